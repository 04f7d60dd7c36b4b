"""One launch of a kernel from Python: the arguments bound by role (numpy
arrays on host-memory devices; torch tensors, __cuda_array_interface__
and DLPack arrays where their memory is the device's), i64 index inputs
narrowed to the manifest's i32, outputs allocated like the inputs, the
stream, the workspace and, on GPUs, the host copies of the content
checks."""

import ctypes
import numbers

import numpy as np

from . import _arrays
from . import _capi
from . import _devarrays as _dev

I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1
_FLOATS = ("bf16", "f16", "f32")
_ROLES = {}  # role -> its C string


def parse_device(name):
    """(device_type, index) of a device name: ("cpu", None) for the host
    and the emulator, ("cuda", N), ("rocm", N)."""
    kind, _, index = name.partition(":")
    if kind == "cuda":
        return "cuda", int(index or 0)
    if kind == "hip":
        return "rocm", int(index or 0)
    return "cpu", None


def check_validate(validate):
    if validate in (True, False, "shapes") or validate in (0, 1):
        return validate if isinstance(validate, str) else bool(validate)
    raise _capi.InvalidArgumentError(
        "validate: expected True, False or 'shapes', got %r" % (validate,))


def _range_error(role, host):
    flat = np.asarray(host).reshape(-1)
    bad = np.flatnonzero((flat < I32_MIN) | (flat > I32_MAX))[0]
    index = np.unravel_index(bad, np.shape(host))
    return _capi.InvalidArgumentError(
        "%s%s = %d is outside the int32 range [%d, %d] (the kernel's %s is "
        "i32)" % (role, "".join("[%d]" % i for i in index), flat[bad],
                  I32_MIN, I32_MAX, role))


def _cached(kernel, key):
    """What the kernel said for these argument shapes (output shapes and
    workspace sizes depend on nothing else), or None."""
    return kernel._shape_answers.get(key)


def _remember(kernel, key, answer):
    if len(kernel._shape_answers) > 512:  # serving has a few shapes
        kernel._shape_answers.clear()
    kernel._shape_answers[key] = answer
    return answer


class Launch:
    """The arguments of one launch of `kernel`, bound one by one, then
    run()."""

    def __init__(self, kernel, arrays, stream, validate):
        self.kernel = kernel
        self.validate = check_validate(validate)
        self.host = kernel.uses_host_memory
        self.device_type, self.device_index = parse_device(kernel.device_name)
        self.stream = _dev.launch_stream(stream, arrays)
        # The arguments, filled in place (the kernel's args, or more when
        # a call passes roles the kernel lacks: the runtime names them).
        self.c_args = (_capi.Arg * (len(kernel.args) + 8))()
        self.count = 0
        self.shapes = []  # (role, dtype, shape) of the tensors bound
        self.views = []
        self.keep = []
        self.host_copies = []  # (role, numpy array)
        # The first tensor input: outputs are allocated like it.
        self.model = None
        torch_views = [a for a in arrays if _dev.is_torch(a)]
        self.capturing = bool(torch_views) and _dev.capturing()
        # GPU content checks copy the index inputs to the host (a sync):
        # not while a graph is captured, nor with validate="shapes".
        self.copy_to_host = (not self.host and self.validate is True and
                             not self.capturing)
        self.plan = None  # a DecodePlan shared by the layers of a step

    # -- arguments -------------------------------------------------------

    def _next(self, role):
        if self.count == len(self.c_args):
            grown = (_capi.Arg * (2 * self.count))()
            ctypes.memmove(grown, self.c_args, ctypes.sizeof(self.c_args))
            self.c_args = grown
        arg = self.c_args[self.count]
        self.count += 1
        arg.role = _ROLES.get(role) or _ROLES.setdefault(role, role.encode())
        return arg

    def scalar(self, role, value):
        arg = self._next(role)
        info = self.kernel.args.get(role)
        floating = info.dtype in _FLOATS if info else \
            not isinstance(value, numbers.Integral)
        if floating:
            if not isinstance(value, numbers.Real):
                raise _capi.InvalidArgumentError(
                    "%s: expected a number, got %s"
                    % (role, type(value).__name__))
            arg.kind, arg.f32 = _capi.ARG_F32, float(value)
        else:
            if not isinstance(value, numbers.Integral):
                raise _capi.InvalidArgumentError(
                    "%s: expected an integer, got %s"
                    % (role, type(value).__name__))
            arg.kind, arg.i64 = _capi.ARG_INT, int(value)

    def _wants_i32(self, role):
        info = self.kernel.args.get(role)
        return info is not None and info.dtype == "i32"

    def tensor(self, role, value, writable=False):
        """Binds a tensor argument; returns the array the kernel reads or
        writes (a narrowed copy of an i64 index input)."""
        if not _dev.is_external(value):
            value = self._numpy(role, value)
            arg = self._next(role)
            _arrays.tensor(role, value, writable, arg.tensor)
            shape = value.shape
        else:
            v = _dev.view(role, value, writable, self.stream)
            self._check_place(v)
            if v.tensor.dtype == _capi.DTYPE_I64 and self._wants_i32(role):
                value = self._narrow(v)
                v = _dev.view(role, value, writable, self.stream)
            elif self.copy_to_host and v.tensor.dtype in (
                    _capi.DTYPE_I32, _capi.DTYPE_I64):
                self._host_copy(v, value)
            self.views.append(v)
            arg = self._next(role)
            arg.tensor = v.tensor
            shape = tuple(v.tensor.shape[:v.tensor.rank])
        arg.kind = _capi.ARG_TENSOR
        self.keep.append(value)
        if self.model is None:
            self.model = value
        self.shapes.append((role, arg.tensor.dtype, shape))
        return value

    def _numpy(self, role, value):
        if not self.host and isinstance(value, np.ndarray):
            raise _capi.InvalidArgumentError(
                "%s: a numpy array is host memory, which %s kernels cannot "
                "read (pass a torch tensor on %s or an array with "
                "__cuda_array_interface__ or __dlpack__)"
                % (role, self.kernel.device_name, self.kernel.device_name))
        if isinstance(value, np.ndarray) and value.dtype == np.int64 and \
                self._wants_i32(role):
            if value.size and (value.min() < I32_MIN or
                               value.max() > I32_MAX):
                raise _range_error(role, value)
            value = value.astype(np.int32)
        return value

    def _check_place(self, v):
        name = self.kernel.device_name
        if self.host:
            if v.memory != "host":
                raise _capi.InvalidArgumentError(
                    "%s: %s, which %s kernels cannot read (pass host memory: "
                    "numpy arrays or CPU tensors)" % (v.role, v.where(), name))
            return
        if v.memory == "host":
            raise _capi.InvalidArgumentError(
                "%s: host memory, which %s kernels cannot read (pass it on "
                "%s)" % (v.role, name, name))
        if v.device_type != self.device_type or (
                v.device_index is not None and
                v.device_index != self.device_index):
            raise _capi.InvalidArgumentError(
                "%s: an array on %s, the kernel runs on %s"
                % (v.role, v.where(), name))

    def _to_host(self, value):
        """A torch CUDA tensor copied to the host after the work enqueued
        on the launch stream (a sync)."""
        torch = _dev.torch_module()
        if torch.cuda.current_stream(value.device).cuda_stream == self.stream:
            return value.cpu().numpy()
        with torch.cuda.stream(torch.cuda.ExternalStream(
                self.stream, device=value.device)):
            return value.cpu().numpy()

    def _host_copy(self, v, value):
        if v.family == "torch":  # only torch tensors (docs/Python.md)
            self.host_copies.append((v.role, self._to_host(value)))

    def _narrow(self, v):
        """An i64 index input as i32: numpy-like arrays are refused, torch
        tensors converted on their device (checked on the host when the
        contents are, else values outside int32 become -1)."""
        value = v.array
        if v.family != "torch":
            raise _capi.InvalidArgumentError(
                "%s: expected dtype i32, got i64 (mla narrows i64 index "
                "inputs of numpy arrays and torch tensors only)" % v.role)
        torch = _dev.torch_module()
        if self.copy_to_host or v.memory == "host":
            host = value.numpy() if v.memory == "host" else \
                self._to_host(value)
            if host.size and (host.min() < I32_MIN or host.max() > I32_MAX):
                raise _range_error(v.role, host)
            if v.memory == "device":
                self.host_copies.append((v.role, host.astype(np.int32)))
            return value.to(torch.int32)
        inside = (value >= I32_MIN) & (value <= I32_MAX)
        return torch.where(inside, value, -1).to(torch.int32)

    # -- outputs ---------------------------------------------------------

    def allocate(self, role):
        """A new output `role` shaped by the inputs bound so far, in the
        manifest's dtype, of the first input's kind (numpy, torch on its
        device, CuPy)."""
        key = (role, tuple(self.shapes))
        known = _cached(self.kernel, key)
        if known is None:
            t = _capi.Tensor()
            _capi.call("mla_kernel_output_shape", self.kernel._live(),
                       role.encode(), self.c_args, self.count,
                       ctypes.byref(t))
            known = _remember(self.kernel, key,
                              (tuple(t.shape[:t.rank]), t.dtype))
        return self.empty(role, *known)

    def empty(self, role, shape, code):
        model = self.model
        if model is None or isinstance(model, np.ndarray):
            if not self.host:
                raise _capi.InvalidArgumentError(
                    "%s: pass %s= (no input says where to allocate it)"
                    % (role, role))
            return np.empty(shape, _arrays.numpy_dtype(code))
        if _dev.is_torch(model):
            torch = _dev.torch_module()
            return torch.empty(shape, dtype=_dev.torch_dtype(code),
                               device=model.device)
        if type(model).__module__.split(".")[0] == "cupy":
            import cupy
            return cupy.empty(shape, _arrays.numpy_dtype(code))
        raise _capi.InvalidArgumentError(
            "%s: pass %s= (mla allocates outputs as numpy arrays, torch "
            "tensors and CuPy arrays; the inputs are %s)"
            % (role, "out" if role == "o" else role, type(model).__name__))

    # -- launching -------------------------------------------------------

    def _workspace(self, options):
        if self.host:
            return  # the runtime keeps a pool of host workspaces
        key = ("workspace", tuple(self.shapes))
        nbytes = _cached(self.kernel, key)
        if nbytes is None:
            size = ctypes.c_size_t()
            _capi.call("mla_kernel_workspace_bytes", self.kernel._live(),
                       self.c_args, self.count, ctypes.byref(size))
            nbytes = _remember(self.kernel, key, size.value)
        if not nbytes:
            return
        torch_view = next((v for v in self.views if v.family == "torch"),
                          None)
        if torch_view is None:
            self.kernel._reserve(nbytes)
            return
        buffer = self.kernel._torch_workspace(nbytes, torch_view.array,
                                              self.stream, self.capturing)
        self.keep.append(buffer)
        options.workspace = buffer.data_ptr()
        options.workspace_bytes = nbytes

    def run(self):
        _dev.check_cai_streams(self.views, self.stream)
        options = _capi.LaunchOptions(
            skip_validation=0 if self.validate else 1, stream=self.stream)
        if self.host_copies:
            copies = (_capi.HostCopy * len(self.host_copies))()
            for i, (role, array) in enumerate(self.host_copies):
                copies[i].role = role.encode()
                copies[i].data = array.ctypes.data
            options.host_copies = copies
            options.num_host_copies = len(self.host_copies)
            self.keep.append(copies)
        if self.plan is None:
            self._workspace(options)
            _capi.call("mla_launch", self.kernel._live(), self.c_args,
                       self.count, ctypes.byref(options))
            return
        flags = self._plan_workspace(options)
        _capi.call("mla_launch_with_flags", self.kernel._live(), self.c_args,
                   self.count, ctypes.byref(options), flags)
        self.plan.ready = True

    def _plan_workspace(self, options):
        """Puts the DecodePlan's workspace (allocated at its first launch)
        into `options`; returns the launch flags (reuse after the first)."""
        plan = self.plan
        shapes = tuple(self.shapes)
        if plan.kernel is not None and (plan.kernel is not self.kernel or
                                        plan.shapes != shapes):
            raise _capi.InvalidArgumentError(
                "plan: this DecodePlan was computed for %s; a plan is shared "
                "only by launches of one kernel with the same shapes (use a "
                "DecodePlan per kernel and step)"
                % ("another kernel" if plan.kernel is not self.kernel
                   else "other argument shapes"))
        if plan.workspace is None:
            size = ctypes.c_size_t()
            _capi.call("mla_kernel_workspace_bytes", self.kernel._live(),
                       self.c_args, self.count, ctypes.byref(size))
            nbytes = max(size.value, 1)
            align = 256  # MLA_WORKSPACE_ALIGNMENT
            torch_view = next((v for v in self.views if v.family == "torch"),
                              None)
            if self.host:
                buffer = np.zeros(nbytes + align, np.uint8)
                address = buffer.ctypes.data
            elif torch_view is not None:
                torch = _dev.torch_module()
                buffer = torch.empty(nbytes + align, dtype=torch.uint8,
                                     device=torch_view.array.device)
                address = buffer.data_ptr()
            else:
                raise _capi.UnsupportedError(
                    "plan: a DecodePlan needs numpy arrays (host, emulator) "
                    "or torch tensors (GPU); these are %s arrays"
                    % (self.views[0].family if self.views else "other"))
            plan.workspace, plan.nbytes = buffer, nbytes
            plan.address = address + (-address) % align
            plan.kernel, plan.shapes = self.kernel, shapes
        options.workspace = plan.address
        options.workspace_bytes = plan.nbytes
        return _capi.LAUNCH_REUSE_PLAN if plan.ready else 0
