"""Arrays other than numpy's: torch tensors, objects with
``__cuda_array_interface__`` (versions 2 and 3) and DLPack
(``__dlpack__`` / ``__dlpack_device__``), seen as mla tensors without
copies; launch streams; outputs allocated like the inputs.

Nothing here imports torch: a torch tensor is recognised when torch is
already imported (``sys.modules``), as it must be for one to exist.
"""

import ctypes
import sys

import numpy as np

from . import _capi

# DLPack device types (dlpack.h) and dtype codes.
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_ROCM, DL_ROCM_HOST = 1, 2, 3, 10, 11
DL_CUDA_MANAGED = 13
_DL_DTYPES = {(2, 16): _capi.DTYPE_F16, (2, 32): _capi.DTYPE_F32,
              (4, 16): _capi.DTYPE_BF16, (0, 32): _capi.DTYPE_I32,
              (0, 64): _capi.DTYPE_I64,
              # uint16 holds bf16 bits, as with numpy (mla.to_bf16).
              (1, 16): _capi.DTYPE_BF16}
# __cuda_array_interface__ typestrs (numpy's array-interface codes).
_CAI_DTYPES = {"<f2": _capi.DTYPE_F16, "<f4": _capi.DTYPE_F32,
               "<u2": _capi.DTYPE_BF16, "<i4": _capi.DTYPE_I32,
               "<i8": _capi.DTYPE_I64}
_TORCH_DTYPE_NAMES = {_capi.DTYPE_BF16: "bfloat16", _capi.DTYPE_F16: "float16",
                      _capi.DTYPE_F32: "float32", _capi.DTYPE_I32: "int32",
                      _capi.DTYPE_I64: "int64"}


_TORCH_CODES = {}  # torch dtype -> mla dtype code, filled at first use


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class View:
    """One array seen as an mla tensor: `tensor` (an mla_tensor), where it
    lives (`memory`: "host" or "device"; `device_type` "cpu", "cuda" or
    "rocm", `device_index`), its `family` ("numpy", "torch", "cai",
    "dlpack"), the CUDA stream a v3 __cuda_array_interface__ names, and
    the objects that must outlive the launch (`keep`)."""

    __slots__ = ("role", "array", "tensor", "family", "memory",
                 "device_type", "device_index", "stream", "keep")

    def __init__(self, role, array, tensor, family, device_type,
                 device_index, stream=None, keep=None):
        self.role = role
        self.array = array
        self.tensor = tensor
        self.family = family
        self.device_type = device_type
        self.memory = "host" if device_type == "cpu" else "device"
        self.device_index = device_index
        self.stream = stream
        self.keep = keep

    def where(self):
        """Its device in words ("host memory", "cuda:1")."""
        if self.memory == "host":
            return "host memory"
        if self.device_index is None:
            return "%s memory" % self.device_type
        return "%s:%d" % (self.device_type, self.device_index)


def torch_module():
    """torch when it is imported, else None."""
    return sys.modules.get("torch")


# torch.Tensor and whether torch is ROCm's, looked up once torch is
# imported (every launch asks for each argument).
_TORCH_TYPES = []


def _torch_tensor_type():
    if not _TORCH_TYPES:
        torch = torch_module()
        if torch is None:
            return None
        _TORCH_TYPES.extend([torch.Tensor,
                             bool(getattr(torch.version, "hip", None))])
    return _TORCH_TYPES[0]


def is_torch(value):
    tensor_type = _TORCH_TYPES[0] if _TORCH_TYPES else _torch_tensor_type()
    return tensor_type is not None and isinstance(value, tensor_type)


def is_external(value):
    """Whether `value` is an array this module reads (numpy's are not)."""
    if isinstance(value, np.ndarray):
        return False
    return is_torch(value) or hasattr(value, "__cuda_array_interface__") or \
        hasattr(value, "__dlpack__")


def current_stream(device_index):
    """torch's current CUDA/HIP stream on device `device_index`, as an int
    (through torch's raw-stream query where it has one: a launch asks for
    it every time)."""
    torch = torch_module()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(device_index))
    return torch.cuda.current_stream(device_index).cuda_stream


def _make_tensor(role, data, code, shape, out=None):
    """An mla_tensor (written into `out` when given)."""
    rank = len(shape)
    if rank > _capi.MAX_RANK:
        raise _capi.InvalidArgumentError(
            "%s: rank %d exceeds %d" % (role, rank, _capi.MAX_RANK))
    t = _capi.Tensor() if out is None else out
    t.data = data
    t.dtype = code
    t.rank = rank
    t.shape[:rank] = shape
    return t


def _c_contiguous(shape, strides, itemsize):
    """Whether element strides (in bytes) describe a C-contiguous array;
    dims of size 1 may have any stride."""
    expected = itemsize
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _dtype_error(role, what):
    return _capi.InvalidArgumentError(
        "%s: %s is not an mla dtype (bf16, f16, f32, i32, i64; bf16 as "
        "torch.bfloat16 or uint16 bits)" % (role, what))


def torch_dtype(code):
    """The torch dtype of an mla dtype code."""
    return getattr(torch_module(), _TORCH_DTYPE_NAMES[code])


def _torch_view(role, tensor, writable, out):
    torch = torch_module()
    if not _TORCH_CODES:
        for c, name in _TORCH_DTYPE_NAMES.items():
            _TORCH_CODES[getattr(torch, name)] = c
        if hasattr(torch, "uint16"):
            _TORCH_CODES[torch.uint16] = _capi.DTYPE_BF16  # bits, as numpy's
    code = _TORCH_CODES.get(tensor.dtype)
    if code is None:
        raise _dtype_error(role, "torch dtype %s" % tensor.dtype)
    if not tensor.is_contiguous():
        raise _capi.InvalidArgumentError(
            "%s: the tensor is not contiguous (pass %s.contiguous())"
            % (role, role))
    device = tensor.device
    if device.type == "cpu":
        kind, index = "cpu", None
    elif device.type == "cuda":
        kind = "rocm" if _TORCH_TYPES[1] else "cuda"
        index = device.index if device.index is not None else \
            torch.cuda.current_device()
    else:
        raise _capi.InvalidArgumentError(
            "%s: a torch tensor on %s (mla runs cpu, cuda and ROCm tensors)"
            % (role, device))
    t = _make_tensor(role, tensor.data_ptr(), code, tuple(tensor.shape), out)
    return View(role, tensor, t, "torch", kind, index)


def _cai_view(role, array, writable, out):
    iface = array.__cuda_array_interface__
    version = iface.get("version", 0)
    if version < 2:
        raise _capi.InvalidArgumentError(
            "%s: __cuda_array_interface__ version %s (mla reads 2 and 3)"
            % (role, version))
    shape = tuple(int(s) for s in iface["shape"])
    typestr = iface["typestr"]
    code = _CAI_DTYPES.get(typestr)
    if code is None:
        raise _dtype_error(role, "typestr %r" % typestr)
    if iface.get("mask") is not None:
        raise _capi.InvalidArgumentError(
            "%s: masked arrays are not supported" % role)
    itemsize = int(typestr[2:])
    strides = iface.get("strides")
    if strides is not None and not _c_contiguous(shape, strides, itemsize):
        raise _capi.InvalidArgumentError(
            "%s: the array is not C-contiguous" % role)
    pointer, readonly = iface["data"]
    if writable and readonly:
        raise _capi.InvalidArgumentError(
            "%s: the array is read-only, and the kernel writes it" % role)
    # The interface names no device: the pointer's is the kernel's.
    t = _make_tensor(role, pointer, code, shape, out)
    return View(role, array, t, "cai", "cuda", None,
                stream=iface.get("stream"))


def _dlpack_view(role, array, stream, out):
    device_type, device_id = array.__dlpack_device__()
    if device_type in (DL_CUDA, DL_CUDA_MANAGED, DL_ROCM):
        # The consumer's stream, so that the producer orders its work
        # before the launch: CUDA's legacy default stream is 1 (0 is
        # ambiguous there), ROCm's default stream 0.
        if stream:
            capsule = array.__dlpack__(stream=stream)
        else:
            capsule = array.__dlpack__(
                stream=0 if device_type == DL_ROCM else 1)
    else:
        capsule = array.__dlpack__()
    managed = DLManagedTensor.from_address(
        _capsule_pointer(capsule, b"dltensor"))
    dl = managed.dl_tensor
    shape = tuple(dl.shape[d] for d in range(dl.ndim))
    code = _DL_DTYPES.get((dl.dtype.code, dl.dtype.bits))
    if code is None or dl.dtype.lanes != 1:
        raise _dtype_error(role, "DLPack dtype (code %d, %d bits, %d lanes)"
                           % (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes))
    itemsize = dl.dtype.bits // 8
    if dl.strides:
        strides = [dl.strides[d] * itemsize for d in range(dl.ndim)]
        if not _c_contiguous(shape, strides, itemsize):
            raise _capi.InvalidArgumentError(
                "%s: the array is not C-contiguous" % role)
    kinds = {DL_CPU: "cpu", DL_CUDA_HOST: "cpu", DL_ROCM_HOST: "cpu",
             DL_CUDA: "cuda", DL_CUDA_MANAGED: "cuda", DL_ROCM: "rocm"}
    kind = kinds.get(device_type)
    if kind is None:
        raise _capi.InvalidArgumentError(
            "%s: DLPack device type %d (mla reads CPU, CUDA and ROCm memory)"
            % (role, device_type))
    data = (dl.data or 0) + dl.byte_offset
    t = _make_tensor(role, data, code, shape, out)
    # Unconsumed, the capsule's destructor releases the tensor: keeping
    # the capsule keeps the memory described.
    return View(role, array, t, "dlpack", kind,
                None if kind == "cpu" else device_id, keep=capsule)


def view(role, array, writable=False, stream=None, out=None):
    """The View of a torch tensor, __cuda_array_interface__ or DLPack
    object (in that order of preference); its mla_tensor is written into
    `out` when given."""
    if is_torch(array):
        return _torch_view(role, array, writable, out)
    if hasattr(array, "__cuda_array_interface__"):
        return _cai_view(role, array, writable, out)
    if hasattr(array, "__dlpack__"):
        return _dlpack_view(role, array, stream, out)
    raise _capi.InvalidArgumentError(
        "%s: expected a numpy array, a torch tensor or an array with "
        "__cuda_array_interface__ or __dlpack__, got %s"
        % (role, type(array).__name__))


def stream_handle(stream):
    """A CUstream / hipStream_t as an int from `stream`: an int, a torch
    stream (.cuda_stream), a CuPy stream (.ptr) or an object with
    __cuda_stream__ (returning (version, handle))."""
    if stream is None or isinstance(stream, int):
        return stream or 0
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attribute in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    raise _capi.InvalidArgumentError(
        "stream: expected an int (CUstream / hipStream_t), a torch or CuPy "
        "stream or an object with __cuda_stream__, got %s"
        % type(stream).__name__)


def launch_stream(stream, arrays):
    """The launch's stream: `stream` when given (stream_handle), else
    torch's current stream on the first CUDA tensor's device, else the
    stream the v3 __cuda_array_interface__ of the arrays name (all the
    same one), else the default stream (0)."""
    if stream is not None:
        return stream_handle(stream)
    named = set()
    for array in arrays:
        if is_torch(array) and array.is_cuda:
            return current_stream(array.get_device())
        iface = getattr(array, "__cuda_array_interface__", None)
        if isinstance(iface, dict) and iface.get("stream") is not None:
            named.add(0 if iface["stream"] == 1 else iface["stream"])
    if len(named) > 1:
        raise _capi.InvalidArgumentError(
            "stream: the arrays' __cuda_array_interface__ name different "
            "streams (%s); pass stream=" % ", ".join(
                hex(s) for s in sorted(named)))
    return named.pop() if named else 0


def check_cai_streams(views, stream):
    """A v3 __cuda_array_interface__ that names a stream other than the
    launch's would need the launch to wait for it: refused instead."""
    for v in views:
        if v.family == "cai" and v.stream not in (None, stream) and \
                not (v.stream == 1 and stream == 0):
            raise _capi.InvalidArgumentError(
                "%s: its __cuda_array_interface__ names stream %#x, the "
                "launch is on %#x (pass stream=%#x or synchronize first)"
                % (v.role, v.stream, stream, v.stream))


def capturing():
    """Whether torch is capturing a CUDA graph on its current stream."""
    torch = torch_module()
    try:
        return bool(torch is not None and torch.cuda.is_available() and
                    torch.cuda.is_current_stream_capturing())
    except RuntimeError:
        return False
