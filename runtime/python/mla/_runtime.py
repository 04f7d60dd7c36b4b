"""Devices, packages and kernels; the kernel launchers (decode, prefill,
merge, append_kv) are built from the runtime's kind table."""

import collections
import ctypes
import inspect
import keyword
import numbers
import os
import threading

import numpy as np

from . import _arrays
from . import _capi
from . import _devarrays
from ._launch import Launch

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


_FRESH = threading.local()


class fresh_workspaces:
    """Within it (per thread), launches on torch tensors take a new
    workspace from torch's allocator instead of the kernel's cached one: the
    torch ops run in it, so that no workspace outlives the op (CUDA-graph
    trees, torch.compile(mode="reduce-overhead"), check that every live
    allocation of their pool is an output)."""

    def __enter__(self):
        self.saved = getattr(_FRESH, "on", False)
        _FRESH.on = True

    def __exit__(self, *exc):
        _FRESH.on = self.saved


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
        self._reserved = 0
        self._torch_workspaces = {}
        self._shape_answers = {}
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

    def _reserve(self, nbytes):
        """The reserved workspace (GPU arrays other than torch tensors),
        grown to `nbytes`."""
        if nbytes > self._reserved:
            self.reserve_workspace(nbytes)
            self._reserved = nbytes

    def _torch_workspace(self, nbytes, like, stream, capturing):
        """A workspace of torch's allocator on `like`'s device: while a
        CUDA graph is captured, and for the torch ops (fresh_workspaces()),
        a new one, freed when the launch returns (the caching allocator
        orders its reuse after the launch on its stream; a graph's pool
        keeps it), else the kernel's own for the stream, grown when too
        small."""
        torch = _devarrays.torch_module()
        key = (like.device, stream)
        fresh = capturing or getattr(_FRESH, "on", False)
        held = None if fresh else self._torch_workspaces.get(key)
        if held is not None and held.numel() >= nbytes:
            return held
        if _devarrays.current_stream(like.get_device()) == stream:
            buffer = torch.empty(nbytes, dtype=torch.uint8, device=like.device)
        else:  # allocated on the stream that uses it
            with torch.cuda.stream(torch.cuda.ExternalStream(
                    stream, device=like.device)):
                buffer = torch.empty(nbytes, dtype=torch.uint8,
                                     device=like.device)
        if not fresh:
            self._torch_workspaces[key] = buffer
        return buffer

    @property
    def plan_launches(self):
        """The leading launches that compute a plan from seq_lens alone and
        that a shared DecodePlan skips after its first launch: 1 for
        decode's length-aware schedule, else 0."""
        n = ctypes.c_size_t()
        _capi.call("mla_kernel_plan_launches", self._live(), ctypes.byref(n))
        return n.value

    def _launch(self, kind, roles, values, stream, validate, lse_layout=None,
                plan=None):
        """Binds `values` (by role: the kind's, then variant inputs) and
        launches; returns what the kernel wrote."""
        self._live()
        if plan is not None and not isinstance(plan, DecodePlan):
            raise _capi.InvalidArgumentError(
                "plan: expected an mla.DecodePlan, got %s"
                % type(plan).__name__)
        if self.kind != kind:
            raise _capi.UnsupportedError(
                "%s() needs a%s '%s' kernel, this one is '%s'"
                % (kind, "n" if kind[0] in "aeiou" else "", kind, self.kind))
        if lse_layout not in (None, "bsh", "bhs"):
            raise _capi.InvalidArgumentError(
                "lse_layout: expected 'bsh' ([batch, q_len, heads]) or 'bhs' "
                "([batch, heads, q_len], FlashMLA's), got %r" % (lse_layout,))
        names = [r.role for r in roles]
        arrays = [v for v in values.values() if _is_array(v)]
        call = Launch(self, arrays, stream, validate)
        call.plan = plan
        written = []
        for role in roles:
            if role.use == "output":
                continue
            value = values.pop(role.role)
            if role.is_scalar:
                call.scalar(role.role, value)
            else:
                call.tensor(role.role, value, role.use == "inout")
                if role.use == "inout":
                    written.append(value)
        for role, value in values.items():
            if role not in names:
                info = self.args.get(role)
                if _is_array(value):
                    call.tensor(role, value)
                elif info is not None and not info.is_scalar and \
                        not info.shape and self.uses_host_memory and \
                        isinstance(value, numbers.Real):
                    # A number for a rank-0 memref input of a host kernel.
                    call.tensor(role, _arrays.number(value, info.dtype))
                else:
                    call.scalar(role, value)
        outputs, finish = [], None
        for role in roles:
            if role.use != "output":
                continue
            given = values[role.role]
            if role.role == "lse" and lse_layout == "bhs":
                array, result, finish = _lse_bhs(call, given)
            else:
                array = result = call.allocate(role.role) \
                    if given is None else given
            call.tensor(role.role, array, True)
            outputs.append(result)
        call.run()
        if finish is not None:
            outputs[-1] = finish()
        results = outputs or written
        return results[0] if len(results) == 1 else tuple(results)


class DecodePlan:
    """The plan of decode's length-aware schedule, shared by the layers of
    one decode step (they all see the same seq_lens), as FlashMLA's callers
    share one scheduler metadata: pass the same DecodePlan as plan= to each
    layer's Kernel.decode. The first launch computes the plan in the
    DecodePlan's own workspace; the later ones skip the plan launch
    (mla_launch_with_flags with MLA_LAUNCH_REUSE_PLAN) and read it there.
    Use a new DecodePlan for each step (new lengths), and one per stream;
    calls with another kernel or other shapes are refused. The lengths
    themselves are not compared (that would need a device sync): the same
    seq_lens values are the caller's promise. Under a CUDA graph capture the
    workspace comes from the graph's pool and the first layer's node
    recomputes the plan at every replay. numpy arrays (host, emulator) and
    torch tensors; a kernel without a plan (fixed split-KV) runs as it
    would without one."""

    def __init__(self):
        self.ready = False      # a launch has computed the plan
        self.kernel = None      # the Kernel and shapes it was computed for
        self.shapes = None
        self.workspace = None   # numpy uint8 array or torch uint8 tensor
        self.address = 0
        self.nbytes = 0

    def __repr__(self):
        return "DecodePlan(%s)" % ("computed" if self.ready else "empty")


def lengths_key(seq_lens):
    """What tells, without reading them (no sync), that a decode's lengths
    are not those a DecodePlan was computed from: a torch tensor's identity,
    storage and version counter (every in-place write through torch bumps
    it) and whether a CUDA graph is being captured (a plan computed outside
    the capture is not a node of the graph: the capture's first call must
    record its own); a numpy array's bytes. Whoever keeps a key keeps the
    array too, so that no other array takes its identity. Equal keys are
    the caller's promise of equal lengths (a kernel writing the tensor's
    memory directly is not seen)."""
    if _devarrays.is_torch(seq_lens):
        torch = _devarrays.torch_module()
        capturing = (seq_lens.device.type == "cuda"
                     and torch.cuda.is_current_stream_capturing())
        return ("torch", id(seq_lens), seq_lens.data_ptr(), seq_lens._version,
                capturing)
    return ("numpy", np.asarray(seq_lens).tobytes())


def _is_array(value):
    return isinstance(value, np.ndarray) or _devarrays.is_external(value)


def _array_module(array):
    if type(array).__module__.split(".")[0] == "cupy":
        import cupy
        return cupy
    if isinstance(array, np.ndarray):
        return np
    raise _capi.InvalidArgumentError(
        "lse: lse_layout='bhs' needs numpy arrays, torch tensors or CuPy "
        "arrays, got %s" % type(array).__name__)


def _lse_bhs(call, given):
    """Decode's lse in FlashMLA's [batch, heads, q_len] layout: (the array
    the kernel writes, [batch, q_len, heads]; the one returned; a function
    run after the launch that returns it)."""
    q = call.c_args[0].tensor
    batch, q_len, heads = q.shape[0], q.shape[1], q.shape[2]
    torch = _devarrays.is_torch(call.model)
    if given is not None and tuple(given.shape) != (batch, heads, q_len):
        raise _capi.InvalidArgumentError(
            "lse: shape %s, expected [batch, heads, q_len] = %s for "
            "lse_layout='bhs'" % (tuple(given.shape), (batch, heads, q_len)))
    if q_len == 1:  # the same memory in both layouts
        if given is None:
            written = call.allocate("lse")
            result = written.view(batch, heads, 1) if torch else \
                written.reshape(batch, heads, 1)
            return written, result, lambda: result
        if torch:
            return given.view(batch, 1, heads), given, lambda: given
        if not getattr(given, "flags", None) or not given.flags.c_contiguous:
            raise _capi.InvalidArgumentError(
                "lse: the array is not C-contiguous")
        return given.reshape(batch, 1, heads), given, lambda: given
    written = call.allocate("lse")
    if torch:
        if given is None:
            return written, None, lambda: written.transpose(1, 2).contiguous()

        def copy():
            given.copy_(written.transpose(1, 2))
            return given
        return written, given, copy
    xp = _array_module(written)
    if given is None:
        return written, None, \
            lambda: xp.ascontiguousarray(written.transpose(0, 2, 1))

    def copy_array():
        given[...] = written.transpose(0, 2, 1)
        return given
    return written, given, copy_array


# The Python keyword of an output role: numpy's `out` for "o".
_KEYWORDS = {"o": "out"}
_P = inspect.Parameter


def _compiled_launcher(kind, roles):
    """The launcher as a function of its own parameters (binding through
    inspect.Signature costs more than the launch itself): positional
    inputs, keyword-only outputs, stream, validate (, lse_layout), variant
    inputs."""
    for r in roles:
        if not r.role.isidentifier() or keyword.iskeyword(r.role):
            raise ImportError("mla: role %r is not a Python name" % r.role)
    inputs = [r.role for r in roles if r.use != "output"]
    outputs = [(r.role, _KEYWORDS.get(r.role, r.role)) for r in roles
               if r.use == "output"]
    params = ["self"] + inputs + ["*"] + ["%s=None" % k for _, k in outputs]
    params += ["stream=None", "validate=True"]
    layout = "lse_layout, plan" if kind == "decode" else "None"
    if kind == "decode":
        params += ["lse_layout='bsh'", "plan=None"]
    params.append("**variant_inputs")
    values = ", ".join(["%r: %s" % (r, r) for r in inputs] +
                       ["%r: %s" % (r, k) for r, k in outputs])
    source = (
        "def %s(%s):\n"
        "    values = {%s}\n"
        "    if variant_inputs:\n"
        "        _check(variant_inputs)\n"
        "        values.update(variant_inputs)\n"
        "    return self._launch(_kind, _roles, values, stream, validate, "
        "%s)\n" % (kind, ", ".join(params), values, layout))

    def check(variant_inputs):
        for role, keyword_ in outputs:
            if role in variant_inputs:  # an output's role, not its keyword
                raise TypeError("%s() got an unexpected keyword argument %r "
                                "(pass the output %s as %s=)"
                                % (kind, role, role, keyword_))
    namespace = {"_check": check, "_kind": kind, "_roles": roles}
    exec(source, namespace)
    return namespace[kind]


def _launcher(kind, roles):
    """Kernel.<kind>(inputs in table order, *, outputs=None, stream=None,
    validate=True, **variant_inputs)."""
    params = [_P("self", _P.POSITIONAL_ONLY)]
    params += [_P(r.role, _P.POSITIONAL_OR_KEYWORD) for r in roles
               if r.use != "output"]
    params += [_P(_KEYWORDS.get(r.role, r.role), _P.KEYWORD_ONLY,
                  default=None) for r in roles if r.use == "output"]
    params += [_P("stream", _P.KEYWORD_ONLY, default=None),
               _P("validate", _P.KEYWORD_ONLY, default=True)]
    if kind == "decode":
        params.append(_P("lse_layout", _P.KEYWORD_ONLY, default="bsh"))
        params.append(_P("plan", _P.KEYWORD_ONLY, default=None))
    params.append(_P("variant_inputs", _P.VAR_KEYWORD))
    signature = inspect.Signature(params)

    launch = _compiled_launcher(kind, roles)

    inputs = [r.role for r in roles if r.use != "output"]
    outputs = [r.role for r in roles if r.use == "output"]
    written = outputs or [r.role for r in roles if r.use == "inout"]
    launch.__name__ = kind
    launch.__qualname__ = "Kernel." + kind
    launch.__signature__ = signature
    launch.__doc__ = (
        "Launches a '%s' kernel.\n\n"
        "Inputs: %s. Outputs (allocated like the first input when None):\n"
        "%s. Returns %s.\n"
        "Arrays: numpy on the host and the emulator (dtypes:\n"
        "mla.numpy_dtype); torch tensors, __cuda_array_interface__ or DLPack\n"
        "arrays where their memory is the device's (torch CPU tensors on the\n"
        "host). stream: the GPU stream (default: torch's current stream for\n"
        "torch tensors, else the default stream); validate: True (every\n"
        "check; on GPUs the index inputs of torch tensors are copied to the\n"
        "host for the content checks, a sync), 'shapes' (no content checks:\n"
        "never syncs), False (skips the checks that cost time).%s Other\n"
        "keywords are the inputs of a variant's regions, by role (e.g.\n"
        "sinks=...). Errors raise mla.Error subclasses carrying the runtime's\n"
        "message."
        % (kind, ", ".join(inputs),
           ", ".join(_KEYWORDS.get(r, r) for r in outputs) or "none",
           " and ".join(written),
           "\nlse_layout: 'bsh' (lse [batch, q_len, heads], the kernel's) or\n"
           "'bhs' ([batch, heads, q_len], FlashMLA's). plan: an mla.DecodePlan\n"
           "shared by the layers of a decode step (the first computes the\n"
           "length-aware schedule's plan, the others reuse it)."
           if kind == "decode"
           else ""))
    return launch


for _kind, _roles in kinds().items():
    setattr(Kernel, _kind, _launcher(_kind, _roles))
