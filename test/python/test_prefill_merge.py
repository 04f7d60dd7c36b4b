"""Prefill and merge through mla.Kernel against the float64 reference:
ragged requests (empty ones, more and fewer keys than queries), causal and
full, and a chunked prefill (cached context + new tokens) merged by LSE."""

import numpy as np
import pytest

import reference

HEADS, QK, V = 3, 32, 16


def offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def prefill_inputs(rng, query_lens, key_lens, dtype="bf16"):
    rows, keys = sum(query_lens), sum(key_lens)
    q, q64 = reference.random_input(rng, (rows, HEADS, QK), dtype)
    k, k64 = reference.random_input(rng, (keys, HEADS, QK), dtype)
    v, v64 = reference.random_input(rng, (keys, HEADS, V), dtype)
    return (q, k, v), (q64, k64, v64), offsets(query_lens), offsets(key_lens)


@pytest.mark.parametrize("causal", [True, False])
def test_prefill(compile_package, host, rng, causal):
    flags = dict(heads=HEADS, qk_dim=QK, v_dim=V, dtype="bf16")
    if causal:
        flags["causal"] = True
    kernel = host.load(compile_package("prefill", **flags))
    assert kernel.header_int("causal") == int(causal)
    query_lens, key_lens = [1, 17, 0, 40, 5], [1, 30, 6, 40, 2]
    arrays, arrays64, cu_q, cu_k = prefill_inputs(rng, query_lens, key_lens)
    o, lse = kernel.prefill(*arrays, cu_q, cu_k, 0.25)
    ref_o, ref_lse = reference.prefill(*arrays64, cu_q, cu_k, 0.25, causal)
    np.testing.assert_allclose(reference.as_float(o, "bf16"), ref_o,
                               atol=2e-2, rtol=0)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-3, rtol=0)


def test_merge(compile_package, host, rng):
    kernel = host.load(compile_package("merge", heads=HEADS, v_dim=V,
                                       parts=3, dtype="f32"))
    rows = 11
    o_parts = rng.uniform(-1, 1, (3, rows, HEADS, V)).astype(np.float32)
    lse_parts = rng.uniform(-4, 4, (3, HEADS, rows)).astype(np.float32)
    lse_parts[1, :, 2] = -np.inf  # one empty part
    lse_parts[:, 0, 5] = -np.inf  # a row without keys in any part
    o, lse = kernel.merge(o_parts, lse_parts)
    ref_o, ref_lse = reference.merge(o_parts.astype(np.float64),
                                     lse_parts.astype(np.float64))
    np.testing.assert_allclose(o, ref_o, atol=1e-5, rtol=0)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-5, rtol=0)
    assert np.isneginf(lse[0, 5]) and not o[5, 0].any()


def test_chunked_prefill(compile_package, host, rng):
    """New tokens of requests with cached context: a full prefill over the
    context and a causal one over the new tokens, both with f32 results,
    merged, equal one causal prefill over everything."""
    common = dict(heads=HEADS, qk_dim=QK, v_dim=V, dtype="bf16",
                  o_dtype="f32")
    context = host.load(compile_package("prefill", **common))
    new = host.load(compile_package("prefill", causal=True, **common))
    merge = host.load(compile_package("merge", heads=HEADS, v_dim=V,
                                      parts=2, dtype="f32"))
    context_lens, new_lens = [13, 0, 40], [7, 9, 1]
    queries, q64 = reference.random_input(rng, (sum(new_lens), HEADS, QK),
                                          "bf16")
    ck, ck64 = reference.random_input(rng, (sum(context_lens), HEADS, QK),
                                      "bf16")
    cv, cv64 = reference.random_input(rng, (sum(context_lens), HEADS, V),
                                      "bf16")
    nk, nk64 = reference.random_input(rng, (sum(new_lens), HEADS, QK), "bf16")
    nv, nv64 = reference.random_input(rng, (sum(new_lens), HEADS, V), "bf16")
    cu_q = offsets(new_lens)
    o0, lse0 = context.prefill(queries, ck, cv, cu_q, offsets(context_lens),
                               0.3)
    o1, lse1 = new.prefill(queries, nk, nv, cu_q, cu_q, 0.3)
    assert o0.dtype == np.float32
    o, lse = merge.merge(np.stack([o0, o1]), np.stack([lse0, lse1]))

    # The reference: each request's keys are its context, then its new
    # tokens; bottom-right causal over all of them.
    keys, values, key_lens = [], [], []
    for b in range(len(new_lens)):
        c = slice(offsets(context_lens)[b], offsets(context_lens)[b + 1])
        n = slice(cu_q[b], cu_q[b + 1])
        keys += [ck64[c], nk64[n]]
        values += [cv64[c], nv64[n]]
        key_lens.append(context_lens[b] + new_lens[b])
    ref_o, ref_lse = reference.prefill(q64, np.concatenate(keys),
                                       np.concatenate(values), cu_q,
                                       offsets(key_lens), 0.3, True)
    # f32 results, but the probabilities went through bf16 in each chunk.
    np.testing.assert_allclose(o, ref_o, atol=5e-3, rtol=0)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-3, rtol=0)
