#!/usr/bin/env python3
"""Inputs and float64 check for the prefill variant examples
(test/e2e/variants/{softcap,sliding_window,alibi,sink}.mlir) run by mla-run.

  variant_check.py gen DIR --variant NAME [--seed S]
      writes q/k/v/cu_seqlens_q/cu_seqlens_k (and sinks for `sink`) .npy
      files: 16 heads, Dqk 192, Dv 128, a ragged batch with more keys than
      queries; values exactly representable in bf16 (never zero).
  variant_check.py compare IN OUT --variant NAME --scale X [--tol T]
      compares OUT/o.npy and OUT/lse.npy with a float64 causal prefill that
      applies the variant; prints the relative errors, exits 1 above --tol.
"""
import argparse
import sys

import numpy as np

H, DQK, DV = 16, 192, 128


def bf16_exact(x):
    """float32 values with the low 16 bits cleared: exact in bf16."""
    bits = x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def gen(args):
    rng = np.random.default_rng(args.seed)
    lens_q, lens_k = [1, 17, 150], [1, 40, 300]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    t, tk = int(cu_q[-1]), int(cu_k[-1])

    def rnd(*shape):
        x = rng.standard_normal(shape).astype(np.float32)
        x[x == 0] = 0.5
        return bf16_exact(x)

    np.save(f"{args.dir}/q.npy", rnd(t, H, DQK))
    np.save(f"{args.dir}/k.npy", rnd(tk, H, DQK))
    np.save(f"{args.dir}/v.npy", rnd(tk, H, DV))
    np.save(f"{args.dir}/cu_seqlens_q.npy", cu_q)
    np.save(f"{args.dir}/cu_seqlens_k.npy", cu_k)
    if args.variant == "sink":
        np.save(f"{args.dir}/sinks.npy",
                rng.uniform(-1, 3, H).astype(np.float32))


def reference(inp, variant, scale):
    q = np.load(f"{inp}/q.npy").astype(np.float64)
    k = np.load(f"{inp}/k.npy").astype(np.float64)
    v = np.load(f"{inp}/v.npy").astype(np.float64)
    cu_q = np.load(f"{inp}/cu_seqlens_q.npy")
    cu_k = np.load(f"{inp}/cu_seqlens_k.npy")
    sinks = np.load(f"{inp}/sinks.npy").astype(np.float64) \
        if variant == "sink" else None
    t = q.shape[0]
    o = np.zeros((t, H, DV))
    lse = np.full((H, t), -np.inf)
    for b in range(len(cu_q) - 1):
        q0, lq = cu_q[b], cu_q[b + 1] - cu_q[b]
        k0, lk = cu_k[b], cu_k[b + 1] - cu_k[b]
        if lq == 0:
            continue
        qpos = np.arange(lq) + lk - lq                      # [lq]
        kpos = np.arange(lk)                                # [lk]
        s = np.einsum("ihd,jhd->hij", q[q0:q0 + lq], k[k0:k0 + lk]) * scale
        dist = (qpos[:, None] - kpos[None, :]).astype(np.float64)
        if variant == "softcap":
            s = 30.0 * np.tanh(s / 30.0)
        if variant == "alibi":
            slope = 2.0 ** (-8.0 * (np.arange(H) + 1) / H)
            s = s - slope[:, None, None] * dist[None]
        visible = kpos[None, :] <= qpos[:, None]            # causal
        if variant == "sliding_window":
            visible &= dist < 128
        s = np.where(visible[None], s, -np.inf)
        m = s.max(axis=2)                                   # [h, i]
        if sinks is not None:
            m = np.maximum(m, sinks[:, None])
        safe = np.where(np.isinf(m), 0.0, m)
        w = np.exp(s - safe[:, :, None])
        total = w.sum(axis=2)
        if sinks is not None:
            total = total + np.exp(sinks[:, None] - safe)
        with np.errstate(divide="ignore", invalid="ignore"):
            ob = np.einsum("hij,jhd->ihd", w, v[k0:k0 + lk]) / \
                total.T[:, :, None]
            lb = safe + np.log(total)
        ob = np.where(total.T[:, :, None] > 0, ob, 0.0)
        lb = np.where(total > 0, lb, -np.inf)
        o[q0:q0 + lq] = ob
        lse[:, q0:q0 + lq] = lb
    return o, lse


def compare(args):
    o_ref, lse_ref = reference(args.inputs, args.variant, args.scale)
    o = np.load(f"{args.outputs}/o.npy").astype(np.float64)
    lse = np.load(f"{args.outputs}/lse.npy").astype(np.float64)
    if o.shape != o_ref.shape or lse.shape != lse_ref.shape:
        print(f"shape mismatch: o {o.shape} vs {o_ref.shape}, "
              f"lse {lse.shape} vs {lse_ref.shape}")
        return 1
    if np.isnan(o).any() or np.isnan(lse).any():
        print("NaN in the outputs")
        return 1
    finite = np.isfinite(lse_ref)
    if not np.array_equal(np.isfinite(lse), finite):
        print("rows without keys must have lse = -inf (and only those)")
        return 1
    err_o = np.linalg.norm(o - o_ref) / max(np.linalg.norm(o_ref), 1e-30)
    err_l = np.linalg.norm(lse[finite] - lse_ref[finite]) / \
        max(np.linalg.norm(lse_ref[finite]), 1e-30)
    ok = err_o <= args.tol and err_l <= args.tol
    print(f"{args.variant}: error vs float64 reference: o {err_o:.1e}, "
          f"lse {err_l:.1e} (tolerance {args.tol:.0e}) -> "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("dir")
    g.add_argument("--variant", required=True,
                   choices=["softcap", "sliding_window", "alibi", "sink"])
    g.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("compare")
    c.add_argument("inputs")
    c.add_argument("outputs")
    c.add_argument("--variant", required=True,
                   choices=["softcap", "sliding_window", "alibi", "sink"])
    c.add_argument("--scale", type=float, required=True)
    c.add_argument("--tol", type=float, default=2e-2)
    args = p.parse_args()
    if args.cmd == "gen":
        gen(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
