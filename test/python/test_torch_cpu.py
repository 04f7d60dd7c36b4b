"""torch CPU tensors on the host device (skipped without torch): the
launchers read them like numpy arrays and allocate torch outputs; decode's
lse_layout, int64 narrowing, mla.flashmla and mla.vllm on torch tensors
give what the numpy path gives; with torch 2.4 or later, the torch ops and
their fake implementations (torch.compile on the CPU)."""

import types

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

import mla  # noqa: E402
from mla import flashmla  # noqa: E402
from mla import vllm as mla_vllm  # noqa: E402
import reference  # noqa: E402

LATENT, ROPE, PAGE = 32, 16, 4


def to_torch(array):
    """A torch CPU tensor of a numpy array (uint16 bf16 bits -> bf16)."""
    if array.dtype == np.uint16:
        return torch.from_numpy(array.view(np.int16).copy()).view(
            torch.bfloat16)
    return torch.from_numpy(array.copy())


def bits(tensor):
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16)
    return tensor.numpy()


@pytest.fixture(scope="module")
def decode(host):
    return lambda q_len: mla.load_kernel(host, "decode", heads=3, q_len=q_len,
                                         page_size=PAGE, latent_dim=LATENT,
                                         rope_dim=ROPE)


@pytest.mark.parametrize("q_len", [1, 2])
def test_decode_on_cpu_tensors(decode, rng, q_len):
    kv, _, table, lens = reference.paged_cache(rng, [5, 0, 13], PAGE,
                                               LATENT + ROPE, "bf16")
    q, _ = reference.random_input(rng, (3, q_len, 3, LATENT + ROPE), "bf16")
    o, lse = decode(q_len).decode(q, kv, table, lens, 0.3)
    args = [to_torch(a) for a in (q, kv, table, lens)]
    to, tlse = decode(q_len).decode(*args, 0.3)
    assert isinstance(to, torch.Tensor) and to.dtype == torch.bfloat16
    np.testing.assert_array_equal(bits(to), o)
    np.testing.assert_array_equal(bits(tlse), lse)
    _, bhs = decode(q_len).decode(*args, 0.3, lse_layout="bhs")
    assert bhs.shape == (3, 3, q_len) and bhs.is_contiguous()
    np.testing.assert_array_equal(bits(bhs), lse.transpose(0, 2, 1))
    given = torch.zeros(3, 3, q_len)
    _, same = decode(q_len).decode(*args, 0.3, lse=given, lse_layout="bhs")
    assert same is given
    np.testing.assert_array_equal(bits(given), lse.transpose(0, 2, 1))
    wide = [args[0], args[1], args[2].long(), args[3].long()]
    o64, _ = decode(q_len).decode(*wide, 0.3, validate="shapes")
    np.testing.assert_array_equal(bits(o64), o)
    wide[2][0, 0] = 2 ** 40
    with pytest.raises(mla.InvalidArgumentError, match=r"block_table\[0\]\[0\]"
                       " = 1099511627776 is outside the int32 range"):
        decode(q_len).decode(*wide, 0.3)
    with pytest.raises(mla.InvalidArgumentError, match="kv: the tensor is not "
                       "contiguous"):
        decode(q_len).decode(args[0], args[1].transpose(0, 1), args[2],
                             args[3], 0.3)


@pytest.mark.parametrize("causal", [False, True])
def test_flashmla_on_cpu_tensors(rng, causal):
    q, k_cache, table, lens, _, _ = reference.flashmla_inputs(
        rng, 3, 2, 70, 3, True, True, 16)
    want = flashmla.flash_mla_with_kvcache(q, k_cache, table, lens, 512,
                                           flashmla.get_mla_metadata()[0],
                                           causal=causal)
    got = flashmla.flash_mla_with_kvcache(
        to_torch(q), to_torch(k_cache), to_torch(table), to_torch(lens), 512,
        flashmla.get_mla_metadata()[0], causal=causal)
    assert got[1].shape == (3, 3, 2) and got[1].is_contiguous()
    np.testing.assert_array_equal(bits(got[0]), want[0])
    np.testing.assert_array_equal(bits(got[1]), want[1])


def test_vllm_methods_on_cpu_tensors(rng):
    impl = type("Impl", (mla_vllm.MlaDecodeMethods,), {})()
    impl.num_heads, impl.kv_lora_rank, impl.qk_rope_head_dim = 3, LATENT, ROPE
    impl.scale, impl.kv_cache_dtype = 0.3, "auto"
    kv, _, table, lens = reference.paged_cache(rng, [6, 9], PAGE,
                                               LATENT + ROPE, "bf16")
    kv_c, _ = reference.random_input(rng, (3, LATENT), "bf16")
    k_pe, _ = reference.random_input(rng, (3, 1, ROPE), "bf16")
    slots = np.array([table[0, 1] * PAGE + 1, table[1, 2] * PAGE], np.int64)
    kv_t = to_torch(kv)
    impl.do_kv_cache_update(kv_c, k_pe, kv, slots, "auto", None)
    impl.do_kv_cache_update(to_torch(kv_c), to_torch(k_pe), kv_t,
                            to_torch(slots), "auto", None)
    np.testing.assert_array_equal(bits(kv_t), kv)
    q, _ = reference.random_input(rng, (4, 3, LATENT + ROPE), "bf16")
    meta = types.SimpleNamespace(num_decodes=2, num_decode_tokens=4,
                                 decode=types.SimpleNamespace(
                                     block_table=table, seq_lens=lens))
    o, lse = impl.forward_mqa((q[..., :LATENT], q[..., LATENT:]), kv, meta,
                              None)
    tq = to_torch(q)
    tmeta = types.SimpleNamespace(num_decodes=2, num_decode_tokens=4,
                                  decode=types.SimpleNamespace(
                                      block_table=to_torch(table),
                                      seq_lens=to_torch(lens)))
    to, tlse = impl.forward_mqa((tq[..., :LATENT], tq[..., LATENT:]), kv_t,
                                tmeta, None)
    np.testing.assert_array_equal(bits(to), o)
    np.testing.assert_array_equal(bits(tlse), lse)


def test_torch_ops_on_the_cpu(decode, rng):
    if not hasattr(torch.library, "custom_op"):
        pytest.skip("torch %s has no torch.library.custom_op (2.4 or later)"
                    % torch.__version__)
    import mla.torch
    kernel = decode(1)
    kv, _, table, lens = reference.paged_cache(rng, [5, 13], PAGE,
                                               LATENT + ROPE, "bf16")
    q, _ = reference.random_input(rng, (2, 1, 3, LATENT + ROPE), "bf16")
    o, lse = kernel.decode(q, kv, table, lens, 0.3)
    args = [to_torch(a) for a in (q, kv, table, lens)]
    key = mla.torch.register(kernel)
    to, tlse = torch.ops.mla.decode(*args, 0.3, key)
    np.testing.assert_array_equal(bits(to), o)
    compiled = torch.compile(
        lambda *a: torch.ops.mla.decode(*a, 0.3, key, "bhs"), fullgraph=True)
    co, clse = compiled(*args)
    np.testing.assert_array_equal(bits(co), o)
    np.testing.assert_array_equal(bits(clse), lse.transpose(0, 2, 1))
