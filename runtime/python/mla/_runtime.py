"""Devices, packages and kernels; the kernel launchers (decode, prefill,
merge, append_kv) are built from the runtime's kind table."""

import collections
import ctypes
import inspect
import numbers
import os

import numpy as np

from . import _arrays
from . import _capi

ArgInfo = collections.namedtuple("ArgInfo", "index role is_scalar dtype shape")
ArgInfo.__doc__ = """One manifest argument of a kernel: its position, role,
whether it is a scalar, its mla dtype name and, for tensors, its dims (None
for a dynamic dim)."""

RoleInfo = collections.namedtuple("RoleInfo", "role is_scalar rank use")
RoleInfo.__doc__ = """One argument of a kernel kind (the runtime's kind
table): its role, whether it is a scalar, its rank and its use ("input",
"output" or "inout", an input the kernel updates)."""

_USES = {_capi.ROLE_INPUT: "input", _capi.ROLE_OUTPUT: "output",
         _capi.ROLE_INOUT: "inout"}


def kinds():
    """The kernel kinds and their arguments, in kernel-argument order:
    {kind: [RoleInfo, ...]}, read from the runtime."""
    table = {}
    for index in range(_capi.lib.mla_num_kinds()):
        kind = _capi.lib.mla_kind_name(index)
        count = ctypes.c_size_t()
        _capi.call("mla_kind_num_roles", kind, ctypes.byref(count))
        roles = []
        for i in range(count.value):
            info = _capi.RoleInfo()
            _capi.call("mla_kind_role", kind, i, ctypes.byref(info))
            roles.append(RoleInfo(info.role.decode(), bool(info.is_scalar),
                                  info.rank, _USES[info.use]))
        table[kind.decode()] = roles
    return table


class _Handle:
    """An owned C handle, released once by close() (or when collected)."""

    _close = None

    def __init__(self):
        self._handle = ctypes.c_void_p()

    def close(self):
        handle, self._handle = self._handle, ctypes.c_void_p()
        if handle and _capi is not None and _capi.lib is not None:
            getattr(_capi.lib, self._close)(handle)

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _live(self):
        if not self._handle:
            raise _capi.InvalidArgumentError(
                "%s is closed" % type(self).__name__)
        return self._handle


def _string(function, handle, *args):
    out = ctypes.c_char_p()
    _capi.call(function, handle, *args, ctypes.byref(out))
    return out.value.decode()


class Device(_Handle):
    """A device: "host" (the default: numpy arrays are host memory), the AMD
    emulator "emu" (also "emu:reverse", "emu:random[:SEED]"), "cuda" /
    "cuda:N", "hip" / "hip:N", or "auto" (cuda, else hip, else host; GPU
    kernels do not take numpy arrays yet). `threads`: worker threads of the
    host and the emulator (0: one per core)."""

    _close = "mla_device_close"

    def __init__(self, name="host", threads=0):
        super().__init__()
        options = _capi.DeviceOptions(threads)
        _capi.call("mla_device_open", _capi.text(name), ctypes.byref(options),
                   ctypes.byref(self._handle))
        self.name = _string("mla_device_name", self._handle)
        host = ctypes.c_int32()
        _capi.call("mla_device_uses_host_memory", self._handle,
                   ctypes.byref(host))
        # numpy arrays are host memory: only such devices can take them.
        self.uses_host_memory = bool(host.value)

    def load(self, package, target=None):
        """The kernel of `package` (a path, bytes or a Package) for `target`
        (None: the target this device prefers)."""
        if not isinstance(package, Package):
            package = Package(package)
        return Kernel(self, package, target)

    def synchronize(self, stream=None):
        """Waits for the work enqueued on `stream` (None: the whole device);
        a no-op on the host."""
        _capi.call("mla_device_synchronize", self._live(), stream)

    def __repr__(self):
        return "mla.Device(%r)" % self.name


class Package(_Handle):
    """A package (.mlapkg) read from a path or from bytes; checked when
    read."""

    _close = "mla_package_close"

    def __init__(self, source):
        super().__init__()
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            _capi.call("mla_package_load_memory", data, len(data),
                       ctypes.byref(self._handle))
        else:
            _capi.call("mla_package_load_file",
                       _capi.text(os.fspath(source)),
                       ctypes.byref(self._handle))
        self.kind = _string("mla_package_kind", self._handle)
        count = ctypes.c_size_t()
        _capi.call("mla_package_num_targets", self._handle, ctypes.byref(count))
        self.targets = [_string("mla_package_target", self._handle, i)
                        for i in range(count.value)]


def _arg_info(info):
    shape = None
    if not info.is_scalar:
        shape = tuple(None if d == _capi.DYNAMIC_DIM else d
                      for d in info.dims[:info.rank])
    return ArgInfo(info.index, info.role.decode(), bool(info.is_scalar),
                   _arrays.dtype_name(info.dtype), shape)


class Kernel(_Handle):
    """A package's kernel loaded on a device (Device.load). It keeps what it
    needs of both, and its workspaces: on the host and the emulator the
    runtime keeps a pool of workspace buffers with the kernel, allocated by
    the first launch that needs one and reused after. Launchers, one per
    kernel kind (each checks the kernel has its kind): decode, prefill,
    merge, append_kv."""

    _close = "mla_kernel_close"

    def __init__(self, device, package, target=None):
        super().__init__()
        _capi.call("mla_kernel_load", device._live(), package._live(),
                   None if target is None else _capi.text(target),
                   ctypes.byref(self._handle))
        self.device_name = device.name
        self.uses_host_memory = device.uses_host_memory
        self.kind = _string("mla_kernel_kind", self._handle)
        self.target = _string("mla_kernel_target", self._handle)
        count = ctypes.c_size_t()
        _capi.call("mla_kernel_num_args", self._handle, ctypes.byref(count))
        self.args = {}
        for i in range(count.value):
            info = _capi.ArgInfo()
            _capi.call("mla_kernel_arg", self._handle, i, ctypes.byref(info))
            arg = _arg_info(info)
            self.args[arg.role] = arg

    def header_int(self, key):
        """An integer header value of the manifest ("heads", "page_size",
        ...)."""
        out = ctypes.c_int64()
        _capi.call("mla_kernel_header_int", self._live(), _capi.text(key),
                   ctypes.byref(out))
        return out.value

    def header_string(self, key):
        """A string header value ("dtype", "function", "config.NAME")."""
        return _string("mla_kernel_header_string", self._live(),
                       _capi.text(key))

    def reserve_workspace(self, nbytes):
        """Sets aside at least `nbytes` of workspace (host: one more pooled
        buffer; GPUs: the one reserved buffer, grown)."""
        _capi.call("mla_kernel_reserve_workspace", self._live(), nbytes)

    def __repr__(self):
        return "<mla.Kernel %s %s on %s>" % (self.kind, self.target,
                                            self.device_name)

    # -- launching -------------------------------------------------------

    def _scalar(self, role, value):
        arg = _capi.Arg(role=role.encode())
        info = self.args.get(role)
        floating = info.dtype in ("bf16", "f16", "f32") if info else \
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
        return arg

    def _tensor(self, role, array, writable):
        return _capi.Arg(role=role.encode(), kind=_capi.ARG_TENSOR,
                         tensor=_arrays.tensor(role, array, writable))

    def _output(self, role, given, inputs):
        if given is not None:
            return given, self._tensor(role, given, True)
        args = (_capi.Arg * len(inputs))(*inputs)
        shape = _capi.Tensor()
        _capi.call("mla_kernel_output_shape", self._live(), role.encode(),
                   args, len(inputs), ctypes.byref(shape))
        array = _arrays.empty(shape)
        return array, self._tensor(role, array, True)

    def _launch(self, kind, roles, values, stream, validate):
        """Binds `values` (by role: the kind's, then variant inputs) and
        launches; returns what the kernel wrote."""
        handle = self._live()
        if self.kind != kind:
            raise _capi.UnsupportedError(
                "%s() needs a%s '%s' kernel, this one is '%s'"
                % (kind, "n" if kind[0] in "aeiou" else "", kind, self.kind))
        if not self.uses_host_memory:
            raise _capi.UnsupportedError(
                "%s: numpy arrays are host memory, which this device's "
                "kernels cannot read (the Python package runs on host-memory "
                "devices: host, emu)" % self.device_name)
        args, written = [], []
        for role in roles:
            if role.use == "output":
                continue
            value = values.pop(role.role)
            if role.is_scalar:
                args.append(self._scalar(role.role, value))
            else:
                args.append(self._tensor(role.role, value,
                                         role.use == "inout"))
                if role.use == "inout":
                    written.append(value)
        for role, value in values.items():
            if role in [r.role for r in roles]:
                continue
            args.append(self._tensor(role, value, False)
                        if isinstance(value, np.ndarray)
                        else self._scalar(role, value))
        inputs = list(args)
        outputs = []
        for role in roles:
            if role.use == "output":
                array, arg = self._output(role.role, values[role.role], inputs)
                outputs.append(array)
                args.append(arg)
        options = _capi.LaunchOptions(skip_validation=0 if validate else 1,
                                      stream=stream)
        c_args = (_capi.Arg * len(args))(*args)
        _capi.call("mla_launch", handle, c_args, len(args),
                   ctypes.byref(options))
        results = outputs or written
        return results[0] if len(results) == 1 else tuple(results)


# The Python keyword of an output role: numpy's `out` for "o".
_KEYWORDS = {"o": "out"}
_P = inspect.Parameter


def _launcher(kind, roles):
    """Kernel.<kind>(inputs in table order, *, outputs=None, stream=None,
    validate=True, **variant_inputs)."""
    params = [_P("self", _P.POSITIONAL_ONLY)]
    params += [_P(r.role, _P.POSITIONAL_OR_KEYWORD) for r in roles
               if r.use != "output"]
    params += [_P(_KEYWORDS.get(r.role, r.role), _P.KEYWORD_ONLY,
                  default=None) for r in roles if r.use == "output"]
    params += [_P("stream", _P.KEYWORD_ONLY, default=None),
               _P("validate", _P.KEYWORD_ONLY, default=True),
               _P("variant_inputs", _P.VAR_KEYWORD)]
    signature = inspect.Signature(params)

    def launch(self, *args, **kwargs):
        call = signature.bind(self, *args, **kwargs)
        call.apply_defaults()
        bound = call.arguments
        values = dict(bound.pop("variant_inputs"))
        for r in roles:
            if r.role in values:  # an output's role instead of its keyword
                raise TypeError("%s() got an unexpected keyword argument %r "
                                "(pass the output %s as %s=)"
                                % (kind, r.role, r.role,
                                   _KEYWORDS.get(r.role, r.role)))
        for r in roles:
            values[r.role] = bound[_KEYWORDS.get(r.role, r.role)] \
                if r.use == "output" else bound[r.role]
        return self._launch(kind, roles, values, bound["stream"],
                            bound["validate"])

    inputs = [r.role for r in roles if r.use != "output"]
    outputs = [r.role for r in roles if r.use == "output"]
    written = outputs or [r.role for r in roles if r.use == "inout"]
    launch.__name__ = kind
    launch.__qualname__ = "Kernel." + kind
    launch.__signature__ = signature
    launch.__doc__ = (
        "Launches a '%s' kernel on numpy arrays (dtypes: mla.numpy_dtype).\n\n"
        "Inputs: %s. Outputs (allocated when None): %s. Returns %s.\n"
        "stream: a GPU stream (ignored by the host); validate=False skips\n"
        "the checks that cost time; other keywords are the inputs of a\n"
        "variant's regions, by role (e.g. sinks=...). Errors raise mla.Error\n"
        "subclasses carrying the runtime's message."
        % (kind, ", ".join(inputs),
           ", ".join(_KEYWORDS.get(r, r) for r in outputs) or "none",
           " and ".join(written)))
    return launch


for _kind, _roles in kinds().items():
    setattr(Kernel, _kind, _launcher(_kind, _roles))
