"""mla's kernels as torch.library custom ops: torch.ops.mla.decode,
prefill, merge and append_kv, with fake implementations (output shapes from
the kernel's manifest), so that they run under torch.compile and inside
CUDA-graph capture (torch.cuda.CUDAGraph) with changing lengths.

    import mla, mla.torch
    k = mla.Device("cuda").load("decode.mlapkg")
    key = mla.torch.register(k)                 # once, outside compile
    o, lse = torch.ops.mla.decode(q, kv, block_table, seq_lens, scale, key)
    o, lse = mla.torch.decode(k, q, kv, block_table, seq_lens, scale)

A kernel is named in the ops by the string register() returns (custom ops
take tensors, numbers and strings). The ops launch on torch's current
stream with the kernel's "shapes" validation (register(validate=)): static
checks only, never a sync, so a captured graph replays with whatever
seq_lens / block_table / slot_mapping hold at replay. CPU tensors run on a
kernel of the host device. Needs torch 2.4 or later (torch.library.
custom_op); imported by `import mla` when torch is already imported.
"""

from typing import Tuple

import torch

from . import _capi
from ._runtime import fresh_workspaces

if not hasattr(torch.library, "custom_op"):
    raise ImportError("mla.torch needs torch 2.4 or later "
                      "(torch.library.custom_op); this is torch %s"
                      % torch.__version__)

__all__ = ["append_kv", "decode", "merge", "prefill", "register"]

_KERNELS = {}
_VALIDATE = {}
_TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
Tensor = torch.Tensor


def register(kernel, name=None, validate="shapes"):
    """The name of `kernel` (an mla.Kernel) in the ops, registering it on
    first use: `name`, else "KIND:DEVICE:N". `validate`: "shapes"
    (default), True (also the contents: a sync per launch on GPUs, skipped
    while a graph is captured) or False."""
    key = getattr(kernel, "_torch_key", None)
    if key is None:
        key = name or "%s:%s:%d" % (kernel.kind, kernel.device_name,
                                    len(_KERNELS))
        if key in _KERNELS:
            raise _capi.InvalidArgumentError(
                "mla.torch.register: the name %r is taken" % key)
        _KERNELS[key] = kernel
        kernel._torch_key = key
    _VALIDATE[key] = validate
    return key


def _kernel(key, kind):
    kernel = _KERNELS.get(key)
    if kernel is None:
        raise _capi.InvalidArgumentError(
            "kernel: %r is not a registered mla kernel (mla.torch.register)"
            % key)
    if kernel.kind != kind:
        raise _capi.UnsupportedError(
            "torch.ops.mla.%s needs a '%s' kernel, %r is '%s'"
            % (kind, kind, key, kernel.kind))
    return kernel


def _out_dtype(kernel):
    return _TORCH[kernel.args["o"].dtype]


@torch.library.custom_op("mla::decode", mutates_args=())
def _decode(q: Tensor, kv: Tensor, block_table: Tensor, seq_lens: Tensor,
            scale: float, kernel: str,
            lse_layout: str = "bsh") -> Tuple[Tensor, Tensor]:
    k = _kernel(kernel, "decode")
    with fresh_workspaces():
        return k.decode(q, kv, block_table, seq_lens, scale,
                        validate=_VALIDATE[kernel], lse_layout=lse_layout)


@_decode.register_fake
def _decode_fake(q, kv, block_table, seq_lens, scale, kernel,
                 lse_layout="bsh"):
    k = _kernel(kernel, "decode")
    batch, q_len, heads = q.shape[0], q.shape[1], q.shape[2]
    o = q.new_empty((batch, q_len, heads, k.header_int("latent_dim")),
                    dtype=_out_dtype(k))
    shape = (batch, heads, q_len) if lse_layout == "bhs" else \
        (batch, q_len, heads)
    return o, q.new_empty(shape, dtype=torch.float32)


@torch.library.custom_op("mla::prefill", mutates_args=())
def _prefill(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor,
             cu_seqlens_k: Tensor, scale: float,
             kernel: str) -> Tuple[Tensor, Tensor]:
    kern = _kernel(kernel, "prefill")
    with fresh_workspaces():
        return kern.prefill(q, k, v, cu_seqlens_q, cu_seqlens_k, scale,
                            validate=_VALIDATE[kernel])


@_prefill.register_fake
def _prefill_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, scale, kernel):
    kern = _kernel(kernel, "prefill")
    rows, heads = q.shape[0], q.shape[1]
    o = q.new_empty((rows, heads, v.shape[2]), dtype=_out_dtype(kern))
    return o, q.new_empty((heads, rows), dtype=torch.float32)


@torch.library.custom_op("mla::merge", mutates_args=())
def _merge(o_parts: Tensor, lse_parts: Tensor,
           kernel: str) -> Tuple[Tensor, Tensor]:
    k = _kernel(kernel, "merge")
    with fresh_workspaces():
        return k.merge(o_parts, lse_parts, validate=_VALIDATE[kernel])


@_merge.register_fake
def _merge_fake(o_parts, lse_parts, kernel):
    k = _kernel(kernel, "merge")
    rows, heads, dim = o_parts.shape[1], o_parts.shape[2], o_parts.shape[3]
    o = o_parts.new_empty((rows, heads, dim), dtype=_out_dtype(k))
    return o, o_parts.new_empty((heads, rows), dtype=torch.float32)


@torch.library.custom_op("mla::append_kv", mutates_args=("kv",))
def _append_kv(kv_new: Tensor, slot_mapping: Tensor, kv: Tensor,
               kernel: str) -> None:
    k = _kernel(kernel, "append_kv")
    with fresh_workspaces():
        k.append_kv(kv_new, slot_mapping, kv, validate=_VALIDATE[kernel])


@_append_kv.register_fake
def _append_kv_fake(kv_new, slot_mapping, kv, kernel):
    _kernel(kernel, "append_kv")


def decode(kernel, q, kv, block_table, seq_lens, scale, lse_layout="bsh"):
    """torch.ops.mla.decode on `kernel`: (o, lse)."""
    key = getattr(kernel, "_torch_key", None) or register(kernel)
    return torch.ops.mla.decode(q, kv, block_table, seq_lens, float(scale),
                                key, lse_layout)


def prefill(kernel, q, k, v, cu_seqlens_q, cu_seqlens_k, scale):
    """torch.ops.mla.prefill on `kernel`: (o, lse)."""
    key = getattr(kernel, "_torch_key", None) or register(kernel)
    return torch.ops.mla.prefill(q, k, v, cu_seqlens_q, cu_seqlens_k,
                                 float(scale), key)


def merge(kernel, o_parts, lse_parts):
    """torch.ops.mla.merge on `kernel`: (o, lse)."""
    key = getattr(kernel, "_torch_key", None) or register(kernel)
    return torch.ops.mla.merge(o_parts, lse_parts, key)


def append_kv(kernel, kv_new, slot_mapping, kv):
    """torch.ops.mla.append_kv on `kernel`: writes kv in place, returns
    it."""
    key = getattr(kernel, "_torch_key", None) or register(kernel)
    torch.ops.mla.append_kv(kv_new, slot_mapping, kv, key)
    return kv
