"""numpy arrays as mla tensors, and the dtype conventions.

An mla dtype is held in numpy as:

    bf16 -> uint16 (the bf16 bit patterns; numpy has no bfloat16)
    f16  -> float16
    f32  -> float32
    i32  -> int32
    i64  -> int64

Arrays are passed without copies: they must be C-contiguous and aligned
(outputs also writeable). ``to_bf16`` / ``from_bf16`` convert with the
runtime's rounding (round to nearest even, NaN stays NaN).
"""

import ctypes

import numpy as np

from . import _capi

_NUMPY = {
    _capi.DTYPE_BF16: np.dtype(np.uint16),
    _capi.DTYPE_F16: np.dtype(np.float16),
    _capi.DTYPE_F32: np.dtype(np.float32),
    _capi.DTYPE_I32: np.dtype(np.int32),
    _capi.DTYPE_I64: np.dtype(np.int64),
}
_MLA = {dtype: code for code, dtype in _NUMPY.items()}


def dtype_name(code):
    """The runtime's name of an mla_dtype ("bf16", ...)."""
    return _capi.lib.mla_dtype_name(code).decode()


def numpy_dtype(dtype):
    """The numpy dtype holding an mla dtype, by name ("bf16") or code."""
    if isinstance(dtype, str):
        for code in _NUMPY:
            if dtype_name(code) == dtype:
                return _NUMPY[code]
        raise _capi.InvalidArgumentError(
            "unknown mla dtype '%s' (known: %s)"
            % (dtype, ", ".join(dtype_name(c) for c in _NUMPY)))
    return _NUMPY[dtype]


def _conventions():
    return ", ".join("%s: %s" % (dtype_name(c), d.name)
                     for c, d in _NUMPY.items())


def tensor(role, array, writable=False, out=None):
    """The mla_tensor viewing `array` (no copy), written into `out` when
    given; `role` names it in errors."""
    if not isinstance(array, np.ndarray):
        raise _capi.InvalidArgumentError(
            "%s: expected a numpy array, got %s" % (role, type(array).__name__))
    dtype = array.dtype
    code = _MLA.get(dtype)
    if code is None or dtype.byteorder == ">":
        raise _capi.InvalidArgumentError(
            "%s: numpy dtype %s is not an mla dtype (%s; bf16 bits come from "
            "mla.to_bf16)" % (role, dtype.str, _conventions()))
    flags = array.flags
    if not flags.c_contiguous:
        raise _capi.InvalidArgumentError(
            "%s: the array is not C-contiguous (pass np.ascontiguousarray(%s))"
            % (role, role))
    if not flags.aligned:
        raise _capi.InvalidArgumentError("%s: the array is not aligned" % role)
    if writable and not flags.writeable:
        raise _capi.InvalidArgumentError(
            "%s: the array is read-only, and the kernel writes it" % role)
    rank = array.ndim
    if rank > _capi.MAX_RANK:
        raise _capi.InvalidArgumentError(
            "%s: rank %d exceeds %d" % (role, rank, _capi.MAX_RANK))
    t = _capi.Tensor() if out is None else out
    t.data = array.ctypes.data
    t.dtype = code
    t.rank = rank
    t.shape[:rank] = array.shape
    return t


def empty(t):
    """A new array of an mla_tensor's dtype and shape."""
    return np.empty(tuple(t.shape[:t.rank]), _NUMPY[t.dtype])


def _convert(array, src, dst):
    out = np.empty(array.shape, _NUMPY[dst])
    _capi.call("mla_convert", array.ctypes.data_as(ctypes.c_void_p), src,
               out.ctypes.data_as(ctypes.c_void_p), dst, array.size)
    return out


def to_bf16(values):
    """bf16 bit patterns (uint16) of `values` (rounded to float32 first, then
    to bf16, nearest even), shaped like them."""
    array = np.ascontiguousarray(values, dtype=np.float32)
    return _convert(array, _capi.DTYPE_F32, _capi.DTYPE_BF16)


def number(value, dtype):
    """A 0-d array of mla dtype `dtype` (by name) holding the number `value`
    (bf16: its bit pattern, rounded as to_bf16 rounds)."""
    if dtype == "bf16":
        return to_bf16(value)
    return np.asarray(value, numpy_dtype(dtype))


def from_bf16(bits):
    """float32 values of bf16 bit patterns (a uint16 array)."""
    array = np.asarray(bits)
    if array.dtype != np.uint16:
        raise _capi.InvalidArgumentError(
            "from_bf16: expected uint16 bf16 bits, got numpy dtype %s"
            % array.dtype)
    return _convert(np.ascontiguousarray(array), _capi.DTYPE_BF16,
                    _capi.DTYPE_F32)
