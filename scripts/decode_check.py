#!/usr/bin/python3
"""Random paged-KV decode inputs, a float64 reference, and the comparison.

  decode_check.py gen DIR --batch B --heads H --q-len S --latent 512 --rope 64
                  --page-size P --max-len L [--seed N]
      writes q.npy, kv.npy, block_table.npy, seq_lens.npy (the mla-run input
      contract, docs/FileContract.md) and ref_o.npy / ref_lse.npy.
  decode_check.py compare INDIR OUTDIR [--tol T]
      relative error of o.npy and lse.npy against the reference; exit 1 when
      over the tolerance or NaN.
Inputs are rounded to --dtype (bf16/f16/f32) before the reference is taken,
so the reference sees exactly what the kernel sees.
"""
import argparse
import os
import sys

import numpy as np


def round_to(x, dtype):
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f32":
        return x
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    # bf16: round to nearest even on the upper 16 bits.
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def gen(a):
    rng = np.random.default_rng(a.seed)
    d = a.latent + a.rope
    lens = rng.integers(max(1, a.max_len // 2), a.max_len + 1, size=a.batch)
    lens[0] = a.max_len
    max_pages = -(-a.max_len // a.page_size)
    pages = a.batch * max_pages + 3
    perm = rng.permutation(pages).astype(np.int32)
    bt = perm[: a.batch * max_pages].reshape(a.batch, max_pages)
    q = round_to(rng.standard_normal((a.batch, a.q_len, a.heads, d)), a.dtype)
    kv = round_to(rng.standard_normal((pages, a.page_size, d)), a.dtype)
    os.makedirs(a.dir, exist_ok=True)
    np.save(os.path.join(a.dir, "q.npy"), q)
    np.save(os.path.join(a.dir, "kv.npy"), kv)
    np.save(os.path.join(a.dir, "block_table.npy"), bt)
    np.save(os.path.join(a.dir, "seq_lens.npy"), lens.astype(np.int32))
    o = np.zeros((a.batch, a.q_len, a.heads, a.latent))
    lse = np.full((a.batch, a.q_len, a.heads), -np.inf)
    for b in range(a.batch):
        t = np.arange(lens[b])
        rows = kv[bt[b, t // a.page_size], t % a.page_size].astype(np.float64)
        for i in range(a.q_len):
            n = lens[b] - a.q_len + i + 1
            if n <= 0:
                continue
            s = q[b, i].astype(np.float64) @ rows[:n].T * a.scale
            m = s.max(axis=1, keepdims=True)
            p = np.exp(s - m)
            o[b, i] = (p / p.sum(axis=1, keepdims=True)) @ rows[:n, : a.latent]
            lse[b, i] = (m[:, 0] + np.log(p.sum(axis=1)))
    np.save(os.path.join(a.dir, "ref_o.npy"), o)
    np.save(os.path.join(a.dir, "ref_lse.npy"), lse)
    tokens = int(lens.sum())
    print(f"inputs: B={a.batch} Sq={a.q_len} H={a.heads} D={d} page={a.page_size} "
          f"tokens={tokens} pages={pages} "
          f"({kv.size * (4 if a.dtype == 'f32' else 2) / 2**20:.1f} MiB {a.dtype} pool)")


def rel(x, y):
    return float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-30))


def compare(a):
    o = np.load(os.path.join(a.outdir, "o.npy")).astype(np.float64)
    lse = np.load(os.path.join(a.outdir, "lse.npy")).astype(np.float64)
    ro = np.load(os.path.join(a.indir, "ref_o.npy"))
    rl = np.load(os.path.join(a.indir, "ref_lse.npy"))
    nan = bool(np.isnan(o).any() or np.isnan(lse).any())
    finite = np.isfinite(rl)
    e_o = rel(o, ro)
    e_l = rel(lse[finite], rl[finite])
    inf_ok = bool(np.all(lse[~finite] == -np.inf))
    ok = not nan and inf_ok and e_o <= a.tol and e_l <= a.tol
    print(f"error vs float64 reference: o {e_o:.2e}, lse {e_l:.2e} "
          f"(tolerance {a.tol:.0e}){', NaN!' if nan else ''} -> {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("dir")
    g.add_argument("--batch", type=int, default=4)
    g.add_argument("--heads", type=int, default=16)
    g.add_argument("--q-len", type=int, default=1)
    g.add_argument("--latent", type=int, default=512)
    g.add_argument("--rope", type=int, default=64)
    g.add_argument("--page-size", type=int, default=64)
    g.add_argument("--max-len", type=int, default=1000)
    g.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    g.add_argument("--scale", type=float, default=0.1352)
    g.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("compare")
    c.add_argument("indir")
    c.add_argument("outdir")
    c.add_argument("--tol", type=float, default=2e-2)
    a = p.parse_args()
    if a.cmd == "gen":
        gen(a)
        return 0
    return compare(a)


if __name__ == "__main__":
    sys.exit(main())
