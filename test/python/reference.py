"""float64 numpy references of the kernel kinds, and random inputs."""

import numpy as np

import mla


def random_input(rng, shape, dtype):
    """Values in [-1, 1) held in `dtype` ("bf16", "f16", "f32"), and the
    same values as float64."""
    values = rng.uniform(-1.0, 1.0, shape)
    if dtype == "bf16":
        bits = mla.to_bf16(values)
        return bits, mla.from_bf16(bits).astype(np.float64)
    array = values.astype(mla.numpy_dtype(dtype))
    return array, array.astype(np.float64)


def as_float(array, dtype):
    """A kernel output as float64."""
    if dtype == "bf16":
        return mla.from_bf16(array).astype(np.float64)
    return array.astype(np.float64)


def _attend(q, k, v, visible, scale, cap=None):
    """o and lse (natural log) of queries q [M, D] over keys k [N, D],
    values v [N, Dv], where visible [M, N] says which keys each sees;
    cap: scores soft-capped to cap * tanh(score / cap)."""
    scores = q @ k.T * scale
    if cap is not None:
        scores = cap * np.tanh(scores / cap)
    scores = np.where(visible, scores, -np.inf)
    peak = scores.max(axis=1, keepdims=True, initial=-np.inf)
    safe = np.where(np.isfinite(peak), peak, 0.0)
    weights = np.exp(scores - safe)
    total = weights.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.where(total > 0, weights @ v / total, 0.0)
        lse = np.where(total[:, 0] > 0, np.log(total[:, 0]) + safe[:, 0],
                       -np.inf)
    return o, lse


def decode(q, kv, block_table, seq_lens, scale, latent_dim, cap=None):
    """q [B, Sq, H, D], kv [pages, P, D] -> o [B, Sq, H, Dv], lse [B, Sq, H];
    query i of a request of length L sees keys t < L - Sq + i + 1; cap: the
    scores soft-capped (decode_softcap_input)."""
    batch, q_len, heads, _ = q.shape
    page_size = kv.shape[1]
    o = np.zeros((batch, q_len, heads, latent_dim))
    lse = np.full((batch, q_len, heads), -np.inf)
    for b in range(batch):
        length = int(seq_lens[b])
        pages = block_table[b, :(length + page_size - 1) // page_size]
        rows = kv[pages].reshape(-1, kv.shape[2])[:length]
        for i in range(q_len):
            visible = np.arange(length)[None, :] < length - q_len + i + 1
            visible = np.repeat(visible, heads, axis=0)
            o[b, i], lse[b, i] = _attend(q[b, i], rows, rows[:, :latent_dim],
                                         visible, scale, cap)
    return o, lse


def prefill(q, k, v, cu_q, cu_k, scale, causal):
    """q [T, H, Dqk], k [Tk, H, Dqk], v [Tk, H, Dv] -> o [T, H, Dv],
    lse [H, T]; causal: query i sees keys j <= i + Lk - Lq."""
    rows, heads, _ = q.shape
    o = np.zeros((rows, heads, v.shape[2]))
    lse = np.full((heads, rows), -np.inf)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        lq, lk = q1 - q0, k1 - k0
        visible = np.ones((lq, lk), bool)
        if causal:
            visible = np.arange(lk)[None, :] <= np.arange(lq)[:, None] + lk - lq
        for h in range(heads):
            o[q0:q1, h], lse[h, q0:q1] = _attend(q[q0:q1, h], k[k0:k1, h],
                                                 v[k0:k1, h], visible, scale)
    return o, lse


def merge(o_parts, lse_parts):
    """o_parts [N, T, H, Dv], lse_parts [N, H, T] -> o [T, H, Dv],
    lse [H, T]; parts with lse -inf count nothing."""
    peak = lse_parts.max(axis=0)
    safe = np.where(np.isfinite(peak), peak, 0.0)
    weights = np.exp(lse_parts - safe)  # [N, H, T]
    total = weights.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.where(total > 0, np.log(total) + safe, -np.inf)
        w = np.where(total > 0, weights / total, 0.0)  # [N, H, T]
    o = np.einsum("nht,nthd->thd", w, o_parts)
    return o, lse


def paged_cache(rng, lengths, page_size, row, dtype, spare_pages=3):
    """A page pool holding sequences of `lengths` tokens on shuffled pages:
    (kv, kv as float64, block_table int32, seq_lens int32)."""
    needs = [(n + page_size - 1) // page_size for n in lengths]
    num_pages = sum(needs) + spare_pages
    kv, kv64 = random_input(rng, (num_pages, page_size, row), dtype)
    order = rng.permutation(num_pages).astype(np.int32)
    width = max(max(needs), 1) + 1
    table = rng.integers(0, num_pages, (len(lengths), width)).astype(np.int32)
    start = 0
    for b, need in enumerate(needs):
        table[b, :need] = order[start:start + need]
        start += need
    return kv, kv64, table, np.array(lengths, np.int32)


def flashmla_decode(q, blocked_k, block_table, seq_lens, head_dim_v, causal,
                    scale):
    """FlashMLA's dense decode in float64: q [B, Sq, H, D], blocked_k
    [blocks, P, 1, D] -> out [B, Sq, H, Dv], lse [B, H, Sq]; causal: query
    i sees keys t <= L - Sq + i, else every key t < L; a query that sees
    no key gets out 0 and lse +inf."""
    batch, q_len, heads, dim = q.shape
    kv = blocked_k.reshape(blocked_k.shape[0], blocked_k.shape[1], dim)
    page_size = kv.shape[1]
    o = np.zeros((batch, q_len, heads, head_dim_v))
    lse = np.full((batch, heads, q_len), np.inf)
    for b in range(batch):
        length = int(seq_lens[b])
        pages = block_table[b, :(length + page_size - 1) // page_size]
        rows = kv[pages].reshape(-1, dim)[:length]
        for i in range(q_len):
            limit = length - q_len + i + 1 if causal else length
            visible = np.arange(length)[None, :] < limit
            visible = np.repeat(visible, heads, axis=0)
            o[b, i], row_lse = _attend(q[b, i], rows, rows[:, :head_dim_v],
                                       visible, scale)
            lse[b, :, i] = np.where(np.isneginf(row_lse), np.inf, row_lse)
    return o, lse


def flashmla_close(ans, ref, abs_tol, rel_tol, cos_diff_tol=1e-7):
    """FlashMLA's comparison of an answer with its reference (the criteria
    of its tests' check_is_allclose, whose cos_diff_tol defaults to 1e-7):
    the same positions of inf, -inf and NaN; every other element within
    abs_tol or within rel_tol; 1 - 2<a,r>/(|a|^2 + |r|^2) at most
    cos_diff_tol. Returns (passed, why)."""
    ans = np.array(ans, np.float64)
    ref = np.array(ref, np.float64)
    if ans.shape != ref.shape:
        return False, "shape %s, expected %s" % (ans.shape, ref.shape)
    for name, test in (("inf", np.isposinf), ("-inf", np.isneginf),
                       ("nan", np.isnan)):
        if not np.array_equal(test(ans), test(ref)):
            return False, "%s at %d positions, expected %d" % (
                name, test(ans).sum(), test(ref).sum())
    special = ~np.isfinite(ref)
    ans[special] = 0.0
    ref[special] = 0.0
    error = np.abs(ans - ref)
    relative = error / (np.abs(ref) + 1e-6)
    bad = (error >= abs_tol) & (relative >= rel_tol)
    if bad.any():
        worst = np.unravel_index(np.argmax(np.where(bad, error, 0)),
                                 error.shape)
        return False, "%d of %d elements off; worst at %s: %r vs %r" % (
            bad.sum(), bad.size, worst, ans[worst], ref[worst])
    if (ref * ref).sum() >= 1e-12:
        cos_diff = 1 - 2 * (ans * ref).sum() / (ans * ans + ref * ref).sum()
        if abs(cos_diff) > cos_diff_tol:
            return False, "cosine diff %g > %g" % (cos_diff, cos_diff_tol)
    return True, ""


def flashmla_inputs(rng, batch, q_len, s_k, heads, varlen, zero_lengths,
                    page_size, dim=576, nan=True):
    """Inputs shaped like FlashMLA's dense-decode tests: lengths s_k (or,
    varlen, normal around s_k with sd s_k / 2, at least q_len; zeroed at
    random with zero_lengths), q and the cache N(0, 1) / 10 clamped to
    [-1, 1], a block table that is a random permutation of the pages with
    the rows padded to a multiple of 256 tokens, its unused entries
    2147480000, and NaN in every cache row past a request's length.
    Returns (q, blocked_k [pages, P, 1, D] as bf16 bits, block_table,
    cache_seqlens, q and blocked_k as float64 with the NaNs)."""
    lengths = np.full(batch, s_k, np.int64)
    if varlen:
        lengths = np.maximum(rng.normal(s_k, s_k / 2, batch), q_len)
        lengths = lengths.astype(np.int64)
    if zero_lengths:
        lengths[rng.standard_normal(batch) > 0] = 0
    padded = -(-max(int(lengths.max()), 1) // 256) * 256
    width = -(-padded // page_size)
    table = rng.permutation(batch * width).astype(np.int32).reshape(batch,
                                                                    width)
    values = np.clip(rng.standard_normal((batch * width, page_size, 1, dim))
                     / 10, -1, 1)
    k_bits = mla.to_bf16(values)
    for b, length in enumerate(lengths):
        used = -(-int(length) // page_size)
        if nan:
            rows = k_bits[table[b, used:]]
            rows[...] = 0x7FC0  # bf16 NaN
            k_bits[table[b, used:]] = rows
            if length % page_size:
                k_bits[table[b, used - 1], length % page_size:] = 0x7FC0
        table[b, used:] = 2147480000
    q = np.clip(rng.standard_normal((batch, q_len, heads, dim)) / 10, -1, 1)
    q_bits = mla.to_bf16(q)
    return (q_bits, k_bits, table, lengths.astype(np.int32),
            mla.from_bf16(q_bits).astype(np.float64),
            mla.from_bf16(k_bits).astype(np.float64))
