#!/usr/bin/env python3
"""Inputs and float64 check for the variant examples of docs/Variants.md
(test/e2e/variants/NAME.mlir) run by mla-run.

  variant_check.py gen DIR --variant NAME [--seed S]
      creates DIR if needed and writes the inputs as .npy files, values
      exactly representable in bf16 (never zero). Prefill variants (softcap,
      sliding_window, alibi, sink): q/k/v/cu_seqlens_q/cu_seqlens_k, 16
      heads, Dqk 192, Dv 128, a ragged batch with more keys than queries.
      Decode variants (decode_softcap, decode_sliding_window, decode_alibi,
      decode_sink): q/kv/block_table/seq_lens, 16 heads, 512+64, page 64,
      one query per request. The sink variants also get sinks.npy,
      decode_softcap_input a cap.npy (float32 of shape (), in [8, 40]).
  variant_check.py compare IN OUT --variant NAME --scale X [--tol T]
      compares OUT/o.npy and OUT/lse.npy with a float64 reference (causal
      prefill or paged decode) that applies the variant; prints the
      relative errors, exits 1 above --tol.
"""
import argparse
import os
import sys

import numpy as np

H, DQK, DV = 16, 192, 128
# Decode examples: 512+64 rows (V = the first 512 columns), page 64, Sq 1.
LATENT, ROPE, PAGE = 512, 64, 64
VARIANTS = ["softcap", "sliding_window", "alibi", "sink"]
CHOICES = VARIANTS + ["decode_" + v for v in VARIANTS] + \
    ["decode_softcap_input"]


def bf16_exact(x):
    """float32 values with the low 16 bits cleared: exact in bf16."""
    bits = x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def gen(args):
    rng = np.random.default_rng(args.seed)
    os.makedirs(args.dir, exist_ok=True)

    def rnd(*shape):
        x = rng.standard_normal(shape).astype(np.float32)
        x[x == 0] = 0.5
        return bf16_exact(x)

    if args.variant.startswith("decode_"):
        lens = np.array([1, 150, 300], dtype=np.int32)
        max_pages = -(-int(lens.max()) // PAGE)
        pages = len(lens) * max_pages + 2
        table = rng.permutation(pages)[:len(lens) * max_pages]
        np.save(f"{args.dir}/q.npy", rnd(len(lens), 1, H, LATENT + ROPE))
        np.save(f"{args.dir}/kv.npy", rnd(pages, PAGE, LATENT + ROPE))
        np.save(f"{args.dir}/block_table.npy",
                table.reshape(len(lens), max_pages).astype(np.int32))
        np.save(f"{args.dir}/seq_lens.npy", lens)
    else:
        lens_q, lens_k = [1, 17, 150], [1, 40, 300]
        cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
        cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
        t, tk = int(cu_q[-1]), int(cu_k[-1])
        save_prefill(args.dir, rnd, t, tk, cu_q, cu_k)
    if args.variant.endswith("sink"):
        np.save(f"{args.dir}/sinks.npy",
                rng.uniform(-1, 3, H).astype(np.float32))
    if args.variant == "decode_softcap_input":
        np.save(f"{args.dir}/cap.npy", np.float32(rng.uniform(8, 40)))


def save_prefill(d, rnd, t, tk, cu_q, cu_k):
    np.save(f"{d}/q.npy", rnd(t, H, DQK))
    np.save(f"{d}/k.npy", rnd(tk, H, DQK))
    np.save(f"{d}/v.npy", rnd(tk, H, DV))
    np.save(f"{d}/cu_seqlens_q.npy", cu_q)
    np.save(f"{d}/cu_seqlens_k.npy", cu_k)


def variant_scores(s, dist, variant, cap=30.0):
    """Scores s [h, i, j] with the variant's score region applied, and the
    mask region's visibility (None: all), for query-key distances dist
    [i, j] (query position - key position); `cap`: the soft-capping bound."""
    variant = variant.removeprefix("decode_")
    if variant in ("softcap", "softcap_input"):
        s = cap * np.tanh(s / cap)
    if variant == "alibi":
        slope = 2.0 ** (-8.0 * (np.arange(H) + 1) / H)
        s = s - slope[:, None, None] * dist[None]
    visible = dist < 128 if variant == "sliding_window" else None
    return s, visible


def softmax_rows(s, sinks):
    """Weights w [h, i, j], the denominators [h, i] and lse [h, i] of the
    masked scores s (-inf: invisible), a sink logit per head joining each
    denominator."""
    m = s.max(axis=2)                                       # [h, i]
    if sinks is not None:
        m = np.maximum(m, sinks[:, None])
    safe = np.where(np.isinf(m), 0.0, m)
    w = np.exp(s - safe[:, :, None])
    total = w.sum(axis=2)
    if sinks is not None:
        total = total + np.exp(sinks[:, None] - safe)
    with np.errstate(divide="ignore"):
        lse = np.where(total > 0, safe + np.log(total), -np.inf)
    return w, total, lse


def decode_reference(inp, variant, scale):
    q = np.load(f"{inp}/q.npy").astype(np.float64)        # [B, 1, H, D]
    kv = np.load(f"{inp}/kv.npy").astype(np.float64)      # [P, page, D]
    table = np.load(f"{inp}/block_table.npy")
    lens = np.load(f"{inp}/seq_lens.npy")
    sinks = np.load(f"{inp}/sinks.npy").astype(np.float64) \
        if variant.endswith("sink") else None
    cap = float(np.load(f"{inp}/cap.npy")) \
        if variant == "decode_softcap_input" else 30.0
    batch, sq, page = q.shape[0], q.shape[1], kv.shape[1]
    o = np.zeros((batch, sq, H, LATENT))
    lse = np.full((batch, sq, H), -np.inf)
    for b in range(batch):
        t = np.arange(lens[b])
        rows = kv[table[b, t // page], t % page]           # [len, D]
        qpos = lens[b] - sq + np.arange(sq)                # [sq]
        dist = (qpos[:, None] - t[None, :]).astype(np.float64)
        s = np.einsum("ihd,jd->hij", q[b], rows) * scale
        s, visible = variant_scores(s, dist, variant, cap)
        causal = dist >= 0
        if visible is not None:
            causal &= visible
        s = np.where(causal[None], s, -np.inf)
        w, total, lb = softmax_rows(s, sinks)
        with np.errstate(divide="ignore", invalid="ignore"):
            ob = np.einsum("hij,jd->ihd", w, rows[:, :LATENT]) / \
                total.T[:, :, None]
        o[b] = np.where(total.T[:, :, None] > 0, ob, 0.0)
        lse[b] = lb.T
    return o, lse


def reference(inp, variant, scale):
    if variant.startswith("decode_"):
        return decode_reference(inp, variant, scale)
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
        s, window = variant_scores(s, dist, variant)
        visible = kpos[None, :] <= qpos[:, None]            # causal
        if window is not None:
            visible &= window
        s = np.where(visible[None], s, -np.inf)
        w, total, lb = softmax_rows(s, sinks)
        with np.errstate(divide="ignore", invalid="ignore"):
            ob = np.einsum("hij,jhd->ihd", w, v[k0:k0 + lk]) / \
                total.T[:, :, None]
        ob = np.where(total.T[:, :, None] > 0, ob, 0.0)
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
    g.add_argument("--variant", required=True, choices=CHOICES)
    g.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("compare")
    c.add_argument("inputs")
    c.add_argument("outputs")
    c.add_argument("--variant", required=True, choices=CHOICES)
    c.add_argument("--scale", type=float, required=True)
    c.add_argument("--tol", type=float, default=2e-2)
    args = p.parse_args()
    if args.cmd == "gen":
        gen(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
