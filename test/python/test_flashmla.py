"""mla.flashmla on the host device with numpy arrays: FlashMLA's dense
decode interface (signatures, layouts, lse in [B, H, Sq], +inf for a query
without keys) on inputs shaped like FlashMLA's tests (NaN past each length,
unused block-table entries 2147480000), compared as FlashMLA compares, with
a float64 reference of FlashMLA's semantics; causal and non-causal MTP;
page sizes 64, 16 and 3; the errors of what it does not support."""

import numpy as np
import pytest

import mla
from mla import flashmla
import reference

DIM, DV = 576, 512


def check_reference(out, lse, q64, k64, table, lens, causal):
    """out and lse against the float64 reference of FlashMLA's semantics,
    compared as FlashMLA compares (out in bf16 with its reference rounded
    to bf16)."""
    ref_out, ref_lse = reference.flashmla_decode(q64, k64, table, lens, DV,
                                                 causal, DIM ** -0.5)
    ok, why = reference.flashmla_close(
        mla.from_bf16(out), mla.from_bf16(mla.to_bf16(ref_out)),
        abs_tol=8e-4, rel_tol=2.01 / 128, cos_diff_tol=5e-6)
    assert ok, "out: " + why
    ok, why = reference.flashmla_close(lse, ref_lse.astype(np.float32),
                                       abs_tol=1e-6, rel_tol=8.01 / 65536)
    assert ok, "lse: " + why


def run(rng, batch, q_len, s_k, heads, varlen, causal, page_size=64,
        zero_lengths=False):
    q, k_cache, table, lens, q64, k64 = reference.flashmla_inputs(
        rng, batch, q_len, s_k, heads, varlen, zero_lengths, page_size)
    meta, num_splits = flashmla.get_mla_metadata(lens, q_len * heads, 1)
    assert num_splits is None and not meta.have_initialized
    out, lse = flashmla.flash_mla_with_kvcache(q, k_cache, table, lens, DV,
                                               meta, num_splits,
                                               causal=causal)
    assert out.shape == (batch, q_len, heads, DV) and out.dtype == np.uint16
    assert lse.shape == (batch, heads, q_len) and lse.dtype == np.float32
    assert lse.flags.c_contiguous
    check_reference(out, lse, q64, k64, table, lens, causal)
    assert meta.have_initialized and meta.config.h_q == heads
    return out, lse, meta


@pytest.mark.parametrize("batch,s_k", [(1, 20), (2, 140), (6, 140)])
@pytest.mark.parametrize("q_len", [1, 2, 4])
@pytest.mark.parametrize("heads", [1, 3, 9])
@pytest.mark.parametrize("varlen", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_grid(rng, batch, s_k, q_len, heads, varlen, causal):
    run(rng, batch, q_len, s_k, heads, varlen, causal)


@pytest.mark.parametrize("causal", [False, True])
def test_zero_lengths(rng, causal):
    _, lse, _ = run(rng, 16, 2, 300, 3, True, causal, zero_lengths=True)
    assert np.isposinf(lse).any()


@pytest.mark.parametrize("page_size", [16, 3])
def test_other_page_sizes(rng, page_size):
    run(rng, 4, 2, 100, 3, True, True, page_size=page_size)


def test_metadata_reused_and_checked(rng):
    q, k_cache, table, lens, _, _ = reference.flashmla_inputs(
        rng, 2, 1, 40, 3, False, False, 64)
    meta, _ = flashmla.get_mla_metadata()
    first = flashmla.flash_mla_with_kvcache(q, k_cache, table, lens, DV, meta)
    again = flashmla.flash_mla_with_kvcache(q, k_cache, table, lens, DV, meta)
    np.testing.assert_array_equal(first[0], again[0])
    # The metadata carries the length-aware schedule's plan: computed by the
    # first call, reused by the later ones (another layer: other q and
    # cache, the same lengths), which still match the reference.
    assert meta.decode_plan is not None and meta.decode_plan.ready
    q2, k2, table2, lens2, q64, k64 = reference.flashmla_inputs(
        rng, 2, 1, 40, 3, False, False, 64)
    np.testing.assert_array_equal(lens2, lens)
    out, lse = flashmla.flash_mla_with_kvcache(q2, k2, table2, lens, DV, meta)
    check_reference(out, lse, q64, k64, table2, lens, False)
    with pytest.raises(mla.InvalidArgumentError, match="causal is True, the "
                       "first call with this metadata had False"):
        flashmla.flash_mla_with_kvcache(q, k_cache, table, lens, DV, meta,
                                        causal=True)


@pytest.mark.parametrize("q_len,causal", [(1, False), (2, False),
                                          (2, True)])
def test_metadata_with_other_lengths_plans_again(rng, q_len, causal):
    """A metadata object serves one step's lengths; lengths written in place
    since its plan (numpy: other values) take a new plan rather than the
    stale one, and match the reference (Sq = 2 non-causal: the Sq rows of a
    request with its lengths repeated)."""
    q, k_cache, table, lens, q64, k64 = reference.flashmla_inputs(
        rng, 4, q_len, 200, 3, True, False, 64)
    meta, _ = flashmla.get_mla_metadata()
    call = lambda lengths: flashmla.flash_mla_with_kvcache(  # noqa: E731
        q, k_cache, table, lengths, DV, meta, causal=causal)
    call(lens)
    first = meta.decode_plan
    call(lens)
    assert meta.decode_plan is first  # the same lengths: reused
    call(lens.copy())
    assert meta.decode_plan is first  # numpy: equal values, the same plan
    lens[:] = np.maximum(lens - 100, q_len)
    lens[0] = q_len
    out, lse = call(lens)
    assert meta.decode_plan is not first and meta.decode_plan.ready
    check_reference(out, lse, q64, k64, table, lens, causal)


def test_unsupported_and_bad_arguments(rng):
    q, k_cache, table, lens, _, _ = reference.flashmla_inputs(
        rng, 2, 1, 40, 3, False, False, 64)
    meta, _ = flashmla.get_mla_metadata()
    call = flashmla.flash_mla_with_kvcache
    for keyword in ("indices", "attn_sink", "extra_k_cache", "topk_length"):
        with pytest.raises(mla.UnsupportedError, match="mla.flashmla: %s"
                           % keyword):
            call(q, k_cache, table, lens, DV, meta, **{keyword: lens})
    with pytest.raises(mla.UnsupportedError, match="is_fp8_kvcache is not "
                       "supported"):
        call(q, k_cache, table, lens, DV, meta, is_fp8_kvcache=True)
    with pytest.raises(mla.InvalidArgumentError, match="num_splits: must be "
                       "None"):
        call(q, k_cache, table, lens, DV, meta, lens)
    with pytest.raises(mla.InvalidArgumentError, match="expected the "
                       "FlashMLASchedMeta"):
        call(q, k_cache, table, lens, DV, None)
    two_heads = np.repeat(k_cache, 2, axis=2)
    with pytest.raises(mla.UnsupportedError, match="num_heads_k = 2"):
        call(q, two_heads, table, lens, DV, flashmla.get_mla_metadata()[0])
    bad = lens.copy()
    bad[1] = 10 ** 6
    with pytest.raises(mla.InvalidArgumentError, match=r"seq_lens\[1\] = "
                       "1000000 exceeds the block table's capacity"):
        call(q, k_cache, table, bad, DV, flashmla.get_mla_metadata()[0])
