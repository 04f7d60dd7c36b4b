"""FlashMLA's dense decode interface on mla's kernels: swap

    from flash_mla import get_mla_metadata, flash_mla_with_kvcache
for
    from mla.flashmla import get_mla_metadata, flash_mla_with_kvcache

Signatures, layouts and return values are those of FlashMLA's
flash_mla/flash_mla_interface.py at deepseek-ai/FlashMLA 9241ae3 (the
version in ../shared/peers) for the dense decode: q [B, Sq, H, D],
k_cache [num_blocks, page_block_size, 1, D] (bf16 or f16), block_table
int32 [B, max_blocks], cache_seqlens int32 [B]; returns out
[B, Sq, H, head_dim_v] and softmax_lse float32 [B, H, Sq], the natural log
of sum(exp(softmax_scale * q.k)), +inf for a query that sees no key (out
0 there). `causal` applies to Sq > 1 as in FlashMLA (query i sees keys
j <= i + L - Sq). Any page size works, not only 64.

The kernel is found by mla.find_package (heads, q_len, page size, dims,
dtype, the device's target): $MLA_PACKAGE_DIR, then the package cache, then
mla-compile. Causal MTP runs one q_len = Sq kernel; non-causal Sq > 1 runs
the q_len = 1 kernel over B * Sq rows. torch tensors on a CUDA device run
there on torch's current stream without syncing (the contents are not
validated, as in FlashMLA); numpy arrays (bf16 as uint16 bits) run on the
host with every check. Not supported (mla.UnsupportedError): fp8 caches,
sparse attention (indices, topk_length), attn_sink, extra_k_cache and more
than one KV head.
"""

import dataclasses
from typing import Any, Optional

import numpy as np

from . import _capi
from . import _devarrays as _dev
from . import _packages
from . import _runtime

__all__ = ["FlashMLASchedMeta", "flash_mla_with_kvcache", "get_mla_metadata"]


@dataclasses.dataclass
class FlashMLASchedMeta:
    """FlashMLA's scheduling metadata object, with its fields: filled at
    the first flash_mla_with_kvcache call that uses it (the config) and
    checked at the later ones. mla keeps its own plan in it (the kernel
    and how it runs), so reusing it across layers of a step costs a
    lookup, and an mla.DecodePlan: the first call computes the
    length-aware schedule's plan of chunks from cache_seqlens, the later
    calls with this metadata skip that launch and reuse it, as FlashMLA's
    own scheduler metadata is computed once for a step's lengths; a call
    whose lengths are visibly not the plan's (another tensor, one written
    in place since, a graph capture begun since: mla._runtime.lengths_key)
    plans again."""

    @dataclasses.dataclass
    class Config:
        b: int
        s_q: int
        h_q: int
        page_block_size: int
        h_k: int
        causal: bool
        is_fp8_kvcache: bool
        topk: Optional[int]
        extra_page_block_size: Optional[int]
        extra_topk: Optional[int]

    have_initialized: bool = False
    config: Optional[Config] = None
    tile_scheduler_metadata: Any = None
    num_splits: Any = None
    plan: Any = None
    decode_plan: Any = None
    lengths: Any = None  # (lengths_key, the lengths) decode_plan serves


def get_mla_metadata(*args, **kwargs):
    """(FlashMLASchedMeta(), None), as FlashMLA's: the arguments of its
    older interface (cache_seqlens, num_q_tokens_per_head_k, num_heads_k,
    ...) are accepted and ignored."""
    return FlashMLASchedMeta(), None


def _unsupported(what):
    return _capi.UnsupportedError(
        "mla.flashmla: %s is not supported (mla runs FlashMLA's dense bf16 / "
        "f16 decode)" % what)


def _check_config(meta, config):
    if not meta.have_initialized:
        meta.have_initialized = True
        meta.config = config
        return
    for field in dataclasses.fields(config):
        given, first = getattr(config, field.name), getattr(meta.config,
                                                            field.name)
        if given != first:
            raise _capi.InvalidArgumentError(
                "tile_scheduler_metadata: %s is %r, the first call with this "
                "metadata had %r (use one FlashMLASchedMeta per shape)"
                % (field.name, given, first))


def _device_name(q):
    if _dev.is_torch(q) and q.device.type == "cuda":
        torch = _dev.torch_module()
        index = q.device.index if q.device.index is not None else \
            torch.cuda.current_device()
        return ("hip:%d" if getattr(torch.version, "hip", None)
                else "cuda:%d") % index
    return "host"


def _dtype_name(q):
    if _dev.is_torch(q):
        names = {"torch.bfloat16": "bf16", "torch.float16": "f16",
                 "torch.float32": "f32"}
        dtype = names.get(str(q.dtype))
    else:
        dtype = {np.dtype(np.uint16): "bf16", np.dtype(np.float16): "f16",
                 np.dtype(np.float32): "f32"}.get(np.asarray(q).dtype)
    if dtype is None:
        raise _capi.InvalidArgumentError(
            "q: dtype %s (bf16, f16 or f32; numpy bf16 as uint16 bits)"
            % q.dtype)
    return dtype


class _Plan:
    """How one shape runs: the kernel and whether the Sq queries of a
    request run as Sq rows of one query each (non-causal Sq > 1)."""

    def __init__(self, q, k_cache, head_dim_v, causal):
        batch, s_q, heads, dim = q.shape
        self.rows = s_q > 1 and not causal
        self.device = _device_name(q)
        self.kernel = _packages.load_kernel(
            self.device, "decode", heads=heads, q_len=1 if self.rows else s_q,
            page_size=k_cache.shape[1], latent_dim=head_dim_v,
            rope_dim=dim - head_dim_v, dtype=_dtype_name(q))
        self.torch = _dev.is_torch(q)
        self.validate = "shapes" if self.torch and self.device != "host" \
            else True


def _plan(meta, q, k_cache, head_dim_v, causal):
    key = (_device_name(q), tuple(q.shape), tuple(k_cache.shape[1:]),
           str(q.dtype), head_dim_v, bool(causal))
    if meta.plan is None or meta.plan[0] != key:
        meta.plan = (key, _Plan(q, k_cache, head_dim_v, causal))
        meta.decode_plan = None  # computed by another kernel, if any
    return meta.plan[1]


def _contiguous(array):
    if _dev.is_torch(array):
        return array.contiguous()
    return np.ascontiguousarray(array)


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v,
                           tile_scheduler_metadata, num_splits=None,
                           softmax_scale=None, causal=False,
                           is_fp8_kvcache=False, indices=None, attn_sink=None,
                           extra_k_cache=None, extra_indices_in_kvcache=None,
                           topk_length=None, extra_topk_length=None):
    """FlashMLA's flash_mla_with_kvcache, dense decode: (out
    [B, Sq, H, head_dim_v], softmax_lse float32 [B, H, Sq])."""
    meta = tile_scheduler_metadata
    if not isinstance(meta, FlashMLASchedMeta):
        raise _capi.InvalidArgumentError(
            "tile_scheduler_metadata: expected the FlashMLASchedMeta of "
            "mla.flashmla.get_mla_metadata(), got %s" % type(meta).__name__)
    if num_splits is not None:
        raise _capi.InvalidArgumentError(
            "num_splits: must be None (get_mla_metadata's second value)")
    for name, value in (("is_fp8_kvcache", is_fp8_kvcache or None),
                        ("indices (sparse attention)", indices),
                        ("attn_sink", attn_sink),
                        ("extra_k_cache", extra_k_cache),
                        ("extra_indices_in_kvcache", extra_indices_in_kvcache),
                        ("topk_length", topk_length),
                        ("extra_topk_length", extra_topk_length)):
        if value is not None:
            raise _unsupported(name)
    if block_table is None or cache_seqlens is None:
        raise _capi.InvalidArgumentError(
            "block_table and cache_seqlens must be given for dense attention")
    if len(q.shape) != 4 or len(k_cache.shape) != 4:
        raise _capi.InvalidArgumentError(
            "q [B, Sq, H, D] and k_cache [num_blocks, page_block_size, "
            "num_heads_k, D] must have rank 4, have %d and %d"
            % (len(q.shape), len(k_cache.shape)))
    batch, s_q, heads, dim = q.shape
    blocks, page, heads_k, _ = k_cache.shape
    _check_config(meta, FlashMLASchedMeta.Config(
        batch, s_q, heads, page, heads_k, bool(causal), False, None, None,
        None))
    if heads_k != 1:
        raise _unsupported("num_heads_k = %d (MLA has one KV head)" % heads_k)
    if softmax_scale is None:
        softmax_scale = dim ** -0.5
    plan = _plan(meta, q, k_cache, head_dim_v, causal)
    # The plan of chunks is the step's (its lengths'): lengths written in
    # place since, another tensor, or a graph capture begun since take a new
    # one (FlashMLA would reuse its stale metadata).
    lengths = _runtime.lengths_key(cache_seqlens)
    if meta.decode_plan is not None and (meta.lengths is None
                                         or meta.lengths[0] != lengths):
        meta.decode_plan = None
    meta.lengths = (lengths, cache_seqlens)
    q = _contiguous(q)
    # FlashMLA needs only a unit last stride of the block table (serving
    # engines pass row slices of a larger table); mla's C API takes dense
    # arrays, so such a table is copied (a capturable copy kernel).
    block_table = _contiguous(block_table)
    cache_seqlens = _contiguous(cache_seqlens)
    if not (k_cache.is_contiguous() if plan.torch else
            k_cache.flags.c_contiguous):
        raise _capi.InvalidArgumentError(
            "k_cache: not contiguous (mla reads the page pool in place)")
    kv = k_cache.reshape(blocks, page, dim)  # a view: one KV head
    if plan.rows:  # Sq independent queries per request
        q = q.reshape(batch * s_q, 1, heads, dim)
        if plan.torch:  # expand + reshape: no sync, capture safe
            width = block_table.shape[1]
            # reshape may return a stride-0 view (batch 1): contiguous()
            # makes the copy the C API needs.
            block_table = block_table[:, None, :].expand(
                batch, s_q, width).reshape(batch * s_q, width).contiguous()
            cache_seqlens = cache_seqlens[:, None].expand(
                batch, s_q).reshape(batch * s_q).contiguous()
        else:
            block_table = np.repeat(block_table, s_q, axis=0)
            cache_seqlens = np.repeat(cache_seqlens, s_q)
    if meta.decode_plan is None:
        meta.decode_plan = _runtime.DecodePlan()
    out, lse = plan.kernel.decode(q, kv, block_table, cache_seqlens,
                                  softmax_scale, validate=plan.validate,
                                  lse_layout="bhs", plan=meta.decode_plan)
    if plan.rows:  # lse [B * Sq, H, 1] -> [B, H, Sq]
        out = out.reshape(batch, s_q, heads, head_dim_v)
        lse = lse.reshape(batch, s_q, heads)
        lse = lse.transpose(1, 2).contiguous() if plan.torch else \
            np.ascontiguousarray(lse.transpose(0, 2, 1))
    # FlashMLA: +inf, not -inf, for a query without keys.
    if plan.torch:
        lse.masked_fill_(lse == float("-inf"), float("inf"))
    else:
        lse[np.isneginf(lse)] = np.inf
    return out, lse
