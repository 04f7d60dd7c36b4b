"""append_kv through mla.Kernel (bit-exact against numpy, slots from
mla.PagePool, -1 padding), and a serving step: append the new tokens' rows,
then decode over the grown cache."""

import numpy as np
import pytest

import mla
import reference

ROW_LATENT, ROW_ROPE = 32, 16
ROW = ROW_LATENT + ROW_ROPE


@pytest.mark.parametrize("page_size", [1, 3, 16, 64])
def test_append_kv(compile_package, host, rng, page_size):
    kernel = host.load(compile_package("append_kv", latent_dim=ROW_LATENT,
                                       rope_dim=ROW_ROPE, page_size=page_size,
                                       dtype="bf16"))
    pool = mla.PagePool(num_pages=40 // page_size + 8, page_size=page_size)
    kv, _ = reference.random_input(rng, (pool.info()["num_pages"], page_size,
                                         ROW), "bf16")
    slots = np.concatenate([pool.append_tokens(7, 5),
                            np.array([-1, -1], np.int32),  # padding
                            pool.append_tokens(9, 33)])
    kv_new, _ = reference.random_input(rng, (len(slots), ROW), "bf16")
    expected = kv.copy()
    flat = expected.reshape(-1, ROW)
    for t, slot in enumerate(slots):
        if slot >= 0:
            flat[slot] = kv_new[t]
    written = kernel.append_kv(kv_new, slots, kv)
    assert written is kv
    np.testing.assert_array_equal(kv, expected)


def test_append_then_decode(compile_package, host, rng):
    page_size = 16
    append = host.load(compile_package("append_kv", latent_dim=ROW_LATENT,
                                       rope_dim=ROW_ROPE, page_size=page_size,
                                       dtype="bf16"))
    decode = host.load(compile_package("decode", heads=3,
                                       latent_dim=ROW_LATENT,
                                       rope_dim=ROW_ROPE, page_size=page_size,
                                       q_len=1, dtype="bf16"))
    pool = mla.PagePool(num_pages=12, page_size=page_size)
    kv = np.zeros((12, page_size, ROW), np.uint16)
    requests = [3, 1, 4]
    # Requests grow in turns, so their pages interleave.
    for turn in ([20, 1, 33], [17, 0, 2], [1, 15, 14]):
        slots = np.concatenate([pool.append_tokens(r, n)
                                for r, n in zip(requests, turn)])
        rows, _ = reference.random_input(rng, (len(slots), ROW), "bf16")
        append.append_kv(rows, slots, kv)
    table, lens = pool.block_table(requests)
    assert list(lens) == [38, 16, 49]
    assert pool.request_info(4)["num_pages"] == 4
    q, q64 = reference.random_input(rng, (3, 1, 3, ROW), "bf16")
    o, lse = decode.decode(q, kv, table, lens, 0.25)
    kv64 = mla.from_bf16(kv).astype(np.float64)
    ref_o, ref_lse = reference.decode(q64, kv64, table, lens, 0.25,
                                      ROW_LATENT)
    np.testing.assert_allclose(reference.as_float(o, "bf16"), ref_o,
                               atol=2e-2, rtol=0)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-3, rtol=0)
    pool.free_request(1)
    assert pool.info()["num_requests"] == 2
