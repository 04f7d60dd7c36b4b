"""mla.vllm driven as vLLM drives an MLA backend (vLLM commit 0014ca6b:
MLAAttention.forward calls impl.do_kv_cache_update, then forward_impl calls
impl.forward_mqa on the decode tokens), on the host with numpy arrays:
prefill steps that only fill the cache, decode steps, a speculative-decode
step (2 tokens per request), a mixed batch, CUDA-graph padding (longer
kv_c_normed / k_pe than slot_mapping, -1 slots), int64 slots, q as vLLM's
(ql_nope, q_pe) tuple of non-contiguous views; against float64."""

import types

import numpy as np
import pytest

import mla
from mla import vllm as mla_vllm
import reference

HEADS, LORA, ROPE, BLOCK = 4, 512, 64, 16
SCALE = 192 ** -0.5


class _ImplBase:
    """What vLLM's MLACommonImpl.__init__ keeps of its arguments (the
    attributes the backend's methods read)."""

    def __init__(self, num_heads, head_size, scale, num_kv_heads,
                 alibi_slopes, sliding_window, kv_cache_dtype,
                 logits_soft_cap, attn_type, kv_sharing_target_layer_name,
                 q_lora_rank, kv_lora_rank, qk_nope_head_dim,
                 qk_rope_head_dim, qk_head_dim, v_head_dim, kv_b_proj,
                 indexer=None, q_pad_num_heads=None):
        self.num_heads, self.head_size = num_heads, head_size
        self.scale, self.num_kv_heads = float(scale), num_kv_heads
        self.kv_cache_dtype = kv_cache_dtype
        self.kv_lora_rank, self.qk_rope_head_dim = kv_lora_rank, \
            qk_rope_head_dim


class Impl(mla_vllm.MlaDecodeMethods, _ImplBase):
    pass


def make_impl():
    # The arguments MLAAttention.__init__ passes (DeepSeek's dims).
    return Impl(num_heads=HEADS, head_size=LORA + ROPE, scale=SCALE,
                num_kv_heads=1, alibi_slopes=None, sliding_window=None,
                kv_cache_dtype="auto", logits_soft_cap=None,
                attn_type="decoder", kv_sharing_target_layer_name=None,
                q_lora_rank=1536, kv_lora_rank=LORA, qk_nope_head_dim=128,
                qk_rope_head_dim=ROPE, qk_head_dim=128 + ROPE, v_head_dim=128,
                kv_b_proj=None)


class Engine:
    """Blocks, block tables and slots as vLLM's scheduler and model runner
    make them, and a float64 shadow of the cache."""

    def __init__(self, rng, num_blocks=48):
        self.rng = rng
        self.free = list(rng.permutation(num_blocks))
        self.blocks = {}
        self.lengths = {}
        self.kv_cache = np.zeros((num_blocks, BLOCK, LORA + ROPE), np.uint16)
        self.shadow = np.zeros(self.kv_cache.shape)

    def schedule(self, request, tokens):
        """Slots (int64) of `tokens` new tokens of `request`."""
        start = self.lengths.get(request, 0)
        blocks = self.blocks.setdefault(request, [])
        while len(blocks) * BLOCK < start + tokens:
            blocks.append(self.free.pop())
        self.lengths[request] = start + tokens
        positions = np.arange(start, start + tokens)
        return np.array([blocks[p // BLOCK] * BLOCK + p % BLOCK
                         for p in positions], np.int64)

    def metadata(self, requests, q_len):
        width = max(len(self.blocks[r]) for r in requests) + 2
        table = np.zeros((len(requests), width), np.int32)
        for i, r in enumerate(requests):
            table[i, :len(self.blocks[r])] = self.blocks[r]
        lens = np.array([self.lengths[r] for r in requests], np.int32)
        decode = types.SimpleNamespace(block_table=table, seq_lens=lens,
                                       dcp_tot_seq_lens=None)
        return types.SimpleNamespace(num_decodes=len(requests),
                                     num_decode_tokens=len(requests) * q_len,
                                     decode=decode)

    def kv_update(self, impl, slots, pad=0):
        """do_kv_cache_update as MLAAttention.forward calls it: inputs
        padded by `pad` rows, the slot mapping by `pad` -1 slots."""
        tokens = len(slots) + pad
        kv_c, kv_c64 = reference.random_input(self.rng, (tokens, LORA),
                                              "bf16")
        k_pe, k_pe64 = reference.random_input(self.rng, (tokens, 1, ROPE),
                                              "bf16")
        mapping = np.concatenate([slots, np.full(pad, -1, np.int64)])
        before = self.kv_cache.copy()
        impl.do_kv_cache_update(kv_c, k_pe, self.kv_cache, mapping, "auto",
                                None)
        flat, shadow = before.reshape(-1, LORA + ROPE), \
            self.shadow.reshape(-1, LORA + ROPE)
        for t, slot in enumerate(slots):
            flat[slot, :LORA], flat[slot, LORA:] = kv_c[t], k_pe[t, 0]
            shadow[slot] = np.concatenate([kv_c64[t], k_pe64[t, 0]])
        np.testing.assert_array_equal(self.kv_cache, before)

    def decode(self, impl, requests, q_len, attn=None):
        tokens = len(requests) * q_len
        # forward_impl's q: ql_nope from a transposed bmm output and q_pe a
        # slice of q, both non-contiguous views.
        nope, nope64 = reference.random_input(self.rng, (HEADS, tokens, LORA),
                                              "bf16")
        pe, pe64 = reference.random_input(self.rng, (tokens, HEADS, 192),
                                          "bf16")
        q = (nope.transpose(1, 0, 2), pe[..., 128:])
        attn = attn or self.metadata(requests, q_len)
        o, lse = impl.forward_mqa(q, self.kv_cache, attn, None)
        q64 = np.concatenate([nope64.transpose(1, 0, 2), pe64[..., 128:]], -1)
        ref_o, ref_lse = reference.decode(
            q64.reshape(len(requests), q_len, HEADS, LORA + ROPE),
            self.shadow, attn.decode.block_table, attn.decode.seq_lens, SCALE,
            LORA)
        assert o.shape == (tokens, HEADS, LORA) and lse.shape == (tokens,
                                                                  HEADS)
        np.testing.assert_allclose(reference.as_float(o, "bf16"),
                                   ref_o.reshape(tokens, HEADS, LORA),
                                   atol=2e-2, rtol=0)
        np.testing.assert_allclose(lse, ref_lse.reshape(tokens, HEADS),
                                   atol=1e-3, rtol=0)


def test_serving_steps(rng):
    impl, engine = make_impl(), Engine(rng)
    prompts = {7: 21, 3: 5, 11: 40}
    # Prefill: the cache update only (forward_mha is vLLM's).
    engine.kv_update(impl, np.concatenate(
        [engine.schedule(r, n) for r, n in prompts.items()]), pad=3)
    requests = list(prompts)
    for step in range(3):  # decode, padded like a CUDA-graph batch of 4
        engine.kv_update(impl, np.concatenate(
            [engine.schedule(r, 1) for r in requests]), pad=1)
        engine.decode(impl, requests, 1)
    # Speculative decode: 2 tokens per request, causal among them.
    engine.kv_update(impl, np.concatenate(
        [engine.schedule(r, 2) for r in requests]))
    engine.decode(impl, requests, 2)
    # A mixed batch: two decodes first, then a new prompt (vLLM's order).
    slots = [engine.schedule(7, 1), engine.schedule(3, 1),
             engine.schedule(20, 17)]
    engine.kv_update(impl, np.concatenate(slots))
    engine.decode(impl, [7, 3], 1)


def test_layers_of_a_step_share_the_plan(rng):
    """The layers of one step (one attn_metadata) share one DecodePlan: the
    first layer's call computes it, the others reuse it and still match the
    reference; a new step's metadata, or lengths written in place, plan
    again."""
    impl, engine = make_impl(), Engine(rng)
    prompts = {1: 300, 2: 17, 3: 129, 4: 64}
    engine.kv_update(impl, np.concatenate(
        [engine.schedule(r, n) for r, n in prompts.items()]))
    requests = list(prompts)
    engine.kv_update(impl, np.concatenate(
        [engine.schedule(r, 1) for r in requests]))
    attn = engine.metadata(requests, 1)
    plans = []
    for layer in range(3):  # other q each layer (Engine.decode), same step
        engine.decode(impl, requests, 1, attn)
        plans.append(attn._mla_decode_plan[1])
    assert plans[0].ready and plans[1] is plans[0] and plans[2] is plans[0]
    # The lengths written in place (a shorter step, for the test): a new
    # plan, which matches the reference.
    for r in requests:
        engine.lengths[r] -= 10
    attn.decode.seq_lens[:] = [engine.lengths[r] for r in requests]
    engine.decode(impl, requests, 1, attn)
    assert attn._mla_decode_plan[1] is not plans[0]
    # The next step: its own metadata, its own plan.
    engine.kv_update(impl, np.concatenate(
        [engine.schedule(r, 1) for r in requests]))
    step = engine.metadata(requests, 1)
    engine.decode(impl, requests, 1, step)
    assert step._mla_decode_plan[1] is not attn._mla_decode_plan[1]


def test_int64_slots_outside_int32_and_cache_dtype(rng):
    impl, engine = make_impl(), Engine(rng)
    kv_c, _ = reference.random_input(rng, (2, LORA), "bf16")
    k_pe, _ = reference.random_input(rng, (2, 1, ROPE), "bf16")
    with pytest.raises(mla.InvalidArgumentError, match=r"slot_mapping\[1\] = "
                       r"4294967296 is outside the int32 range"):
        impl.do_kv_cache_update(kv_c, k_pe, engine.kv_cache,
                                np.array([0, 2 ** 32], np.int64), "auto",
                                None)
    with pytest.raises(mla.InvalidArgumentError, match=r"slot_mapping\[1\] = "
                       "768 is outside the page pool"):
        impl.do_kv_cache_update(kv_c, k_pe, engine.kv_cache,
                                np.array([0, 48 * BLOCK], np.int64), "auto",
                                None)
    with pytest.raises(mla.UnsupportedError, match="kv_cache_dtype 'fp8'"):
        impl.do_kv_cache_update(kv_c, k_pe, engine.kv_cache,
                                np.array([0, 1], np.int64), "fp8", None)


def test_backend_classes_need_vllm():
    try:
        import vllm  # noqa: F401
    except ImportError:
        assert mla_vllm.VLLM_ERROR is not None
        with pytest.raises(ImportError, match="vLLM's MLA backend classes"):
            mla_vllm.register()
    else:
        pytest.skip("vLLM is installed: tested with it elsewhere")
