"""mla's decode and KV-append kernels as a vLLM MLA attention backend.

Written against vLLM's MLA backend interface at vllm-project/vllm commit
0014ca6b9929614f1b72c4bb11e5238de49cba89 (vllm/v1/attention/backend.py:
MLAAttentionImpl; vllm/model_executor/layers/attention/mla_attention.py:
MLACommonBackend, MLACommonImpl, MLACommonMetadata,
MLACommonMetadataBuilder, MLAAttention.forward / forward_impl, which call
the backend): per layer and step, vLLM calls

    impl.do_kv_cache_update(kv_c_normed [T', L], k_pe [T', 1, R], kv_cache,
                            slot_mapping int64 [T], kv_cache_dtype, k_scale)
        (T' >= T: the inputs may be padded, the slots are not)
    impl.forward_mqa(q, kv_cache, attn_metadata, layer) -> (o [Td, N, L],
                                                            lse [Td, N])
        q: (ql_nope [Td, N, L], q_pe [Td, N, R]) or [Td, N, L + R], the
        first Td = attn_metadata.num_decode_tokens tokens, Td = B * q_len
        for B = attn_metadata.num_decodes requests of q_len tokens each;
        attn_metadata.decode.block_table int32 [B, max_blocks],
        attn_metadata.decode.seq_lens int32 [B]

with kv_cache = kv_c_and_k_pe_cache [num_blocks, block_size, L + R] (vLLM's
MLA layout, which is mla's page pool). do_kv_cache_update runs mla's
append_kv (int64 slots narrowed to i32), forward_mqa mla's decode (MTP
with q_len > 1, causal, as vLLM's speculative decode needs). The layers of
one step share the length-aware schedule's plan (an mla.DecodePlan kept on
the step's attn_metadata): the first layer's call computes it, the others
skip that launch, as FlashMLA's callers share one scheduler metadata;
lengths visibly not the plan's (another seq_lens, one written in place, a
CUDA graph capture begun since) plan again. Prefill (forward_mha) stays
vLLM's (MLACommonImpl and its prefill backend).

The methods live in MlaDecodeMethods, which needs no vLLM (the tests drive
it as vLLM would); with vLLM importable this module also defines
MlaRuntimeBackend / MlaRuntimeImpl / MlaRuntimeMetadataBuilder on vLLM's
classes, and register() selects it:

    import mla.vllm; mla.vllm.register()      # before the engine starts
    LLM(model=..., attention_config={"backend": "CUSTOM"})
    # or: vllm serve ... --attention-backend CUSTOM

Kernels come from mla.find_package ($MLA_PACKAGE_DIR, the package cache,
mla-compile): decode for (heads per rank, q_len, block size, L, R, dtype)
and append_kv for (block size, L, R, dtype).
"""

import numpy as np

from . import _capi
from . import _devarrays as _dev
from . import _packages
from . import _runtime

VLLM_COMMIT = "0014ca6b9929614f1b72c4bb11e5238de49cba89"
_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "f16",
           "torch.float32": "f32", "uint16": "bf16", "float16": "f16",
           "float32": "f32"}


def _device_name(array):
    if _dev.is_torch(array) and array.device.type == "cuda":
        torch = _dev.torch_module()
        index = array.device.index if array.device.index is not None else \
            torch.cuda.current_device()
        return ("hip:%d" if getattr(torch.version, "hip", None)
                else "cuda:%d") % index
    return "host"


def _dtype(array):
    dtype = _DTYPES.get(str(array.dtype))
    if dtype is None:
        raise _capi.UnsupportedError(
            "mla.vllm: dtype %s (bf16, f16 or f32; numpy bf16 as uint16)"
            % array.dtype)
    return dtype


def _cat(first, second):
    if _dev.is_torch(first):
        return _dev.torch_module().cat((first, second), dim=-1)
    return np.concatenate((first, second), axis=-1)


class MlaDecodeMethods:
    """The backend's do_kv_cache_update and forward_mqa, with vLLM's
    signatures, on the attributes MLACommonImpl.__init__ sets: num_heads,
    kv_lora_rank, qk_rope_head_dim, scale and kv_cache_dtype. `validate`
    (class attribute): "shapes" (default: never syncs, safe in CUDA-graph
    capture), True (also the contents: a sync per call on GPUs) or False."""

    validate = "shapes"

    def _mla_kernel(self, array, kind, **flags):
        kernels = self.__dict__.setdefault("_mla_kernels", {})
        device = _device_name(array)
        key = (device, kind, tuple(sorted(flags.items())))
        kernel = kernels.get(key)
        if kernel is None:
            kernel = kernels[key] = _packages.load_kernel(device, kind,
                                                          **flags)
        return kernel

    def _mla_validate(self, array):
        if not _dev.is_torch(array) or array.device.type == "cpu":
            return True  # host memory: the checks read it without a sync
        return self.validate

    def do_kv_cache_update(self, kv_c_normed, k_pe, kv_cache, slot_mapping,
                           kv_cache_dtype, k_scale):
        """vLLM's concat_and_cache_mla: row t of [kv_c_normed, k_pe] goes to
        slot slot_mapping[t] of kv_cache (-1: skipped)."""
        if kv_cache_dtype not in ("auto", "bfloat16", "float16"):
            raise _capi.UnsupportedError(
                "mla.vllm: kv_cache_dtype %r (mla caches bf16 / f16 rows)"
                % kv_cache_dtype)
        if int(np.prod(kv_cache.shape)) == 0:
            return
        slots = slot_mapping.reshape(-1)
        tokens = slots.shape[0]
        if tokens == 0:
            return
        rows = _cat(kv_c_normed[:tokens],
                    k_pe[:tokens].reshape(tokens, k_pe.shape[-1]))
        kernel = self._mla_kernel(
            kv_cache, "append_kv", page_size=kv_cache.shape[1],
            latent_dim=kv_c_normed.shape[-1], rope_dim=k_pe.shape[-1],
            dtype=_dtype(kv_cache))
        kernel.append_kv(rows, slots, kv_cache,
                         validate=self._mla_validate(kv_cache))

    def forward_mqa(self, q, kv_c_and_k_pe_cache, attn_metadata, layer):
        """Decode of the first attn_metadata.num_decode_tokens tokens:
        (o [Td, N, kv_lora_rank], lse float32 [Td, N], natural log)."""
        if isinstance(q, tuple):
            q = _cat(*q)
        tokens, heads, dim = q.shape
        requests = attn_metadata.num_decodes
        if not requests or tokens % requests:
            raise _capi.InvalidArgumentError(
                "mla.vllm: %d decode tokens for %d requests (uniform query "
                "lengths only)" % (tokens, requests))
        q_len = tokens // requests
        cache = kv_c_and_k_pe_cache
        kernel = self._mla_kernel(
            q, "decode", heads=heads, q_len=q_len, page_size=cache.shape[1],
            latent_dim=self.kv_lora_rank, rope_dim=dim - self.kv_lora_rank,
            dtype=_dtype(q))
        if _dev.is_torch(q):
            q = q.contiguous()
        decode = attn_metadata.decode
        q = q.reshape(requests, q_len, heads, dim)
        plan = _step_plan(attn_metadata, kernel, decode.seq_lens,
                          (q.shape, cache.shape, decode.block_table.shape))
        o, lse = kernel.decode(q, cache, decode.block_table, decode.seq_lens,
                               self.scale, validate=self._mla_validate(q),
                               plan=plan)
        return o.reshape(tokens, heads, self.kv_lora_rank), \
            lse.reshape(tokens, heads)


def _step_plan(attn_metadata, kernel, seq_lens, shapes):
    """The step's mla.DecodePlan for this kernel and these shapes, kept on
    attn_metadata (vLLM builds one per step; its layers see the same
    lengths): a new one where the lengths are visibly not the kept plan's
    (mla._runtime.lengths_key) or the kernel or shapes differ; None where
    attn_metadata keeps no attribute (each layer then plans)."""
    key = (_runtime.lengths_key(seq_lens), id(kernel),
           tuple(tuple(shape) for shape in shapes))
    kept = getattr(attn_metadata, "_mla_decode_plan", None)
    if kept is not None and kept[0] == key:
        return kept[1]
    plan = _runtime.DecodePlan()
    try:  # the lengths kept with their key (lengths_key)
        attn_metadata._mla_decode_plan = (key, plan, seq_lens, kernel)
    except (AttributeError, TypeError):  # slots or a frozen dataclass
        return None
    return plan


def _define_backend():
    """The vLLM classes, when vLLM is importable."""
    from vllm.model_executor.layers.attention.mla_attention import (
        MLACommonBackend, MLACommonImpl, MLACommonMetadata,
        MLACommonMetadataBuilder, QueryLenSupport)
    from vllm.v1.attention.backend import (AttentionCGSupport,
                                           AttentionType, MultipleOf)
    import torch

    class MlaRuntimeMetadataBuilder(
            MLACommonMetadataBuilder[MLACommonMetadata]):
        # Decode batches of one query length run in full CUDA graphs (the
        # kernels read lengths and block tables from device memory).
        _cudagraph_support = AttentionCGSupport.UNIFORM_BATCH
        query_len_support = QueryLenSupport.UNIFORM

    class MlaRuntimeImpl(MlaDecodeMethods,
                         MLACommonImpl[MLACommonMetadata]):
        can_return_lse_for_decode = True

        def __init__(self, num_heads, head_size, scale, num_kv_heads,
                     alibi_slopes, sliding_window, kv_cache_dtype,
                     logits_soft_cap, attn_type, kv_sharing_target_layer_name,
                     **mla_args):
            super().__init__(num_heads, head_size, scale, num_kv_heads,
                             alibi_slopes, sliding_window, kv_cache_dtype,
                             logits_soft_cap, attn_type,
                             kv_sharing_target_layer_name, **mla_args)
            if any([alibi_slopes, sliding_window, logits_soft_cap]):
                raise NotImplementedError(
                    "mla.vllm does not support alibi_slopes, sliding_window "
                    "or logits_soft_cap")
            if attn_type != AttentionType.DECODER:
                raise NotImplementedError(
                    "mla.vllm runs decoder self-attention only")

    class MlaRuntimeBackend(MLACommonBackend):
        supported_dtypes = [torch.float16, torch.bfloat16]
        supported_kv_cache_dtypes = ["auto", "bfloat16", "float16"]

        @staticmethod
        def get_supported_kernel_block_sizes():
            return [MultipleOf(1)]  # any page size

        @staticmethod
        def get_name():
            return "CUSTOM"

        @staticmethod
        def get_builder_cls():
            return MlaRuntimeMetadataBuilder

        @staticmethod
        def get_impl_cls():
            return MlaRuntimeImpl

    return MlaRuntimeBackend, MlaRuntimeImpl, MlaRuntimeMetadataBuilder


try:
    MlaRuntimeBackend, MlaRuntimeImpl, MlaRuntimeMetadataBuilder = \
        _define_backend()
    VLLM_ERROR = None
except Exception as e:  # no vLLM, or one without these classes
    VLLM_ERROR = e


def register():
    """Registers MlaRuntimeBackend as vLLM's CUSTOM attention backend
    (select it with attention_config={"backend": "CUSTOM"} or
    --attention-backend CUSTOM)."""
    if VLLM_ERROR is not None:
        raise ImportError("mla.vllm: vLLM's MLA backend classes did not "
                          "import (%s)" % VLLM_ERROR)
    from vllm.v1.attention.backends.registry import (AttentionBackendEnum,
                                                     register_backend)
    register_backend(AttentionBackendEnum.CUSTOM,
                     "mla.vllm.MlaRuntimeBackend")
