"""The C API of the mla runtime (mla_runtime.h) through ctypes.

The shared library is found, in order, at $MLA_RUNTIME_LIBRARY (a path),
next to an installed package (``_location.py``, written by ``cmake
--install``), or as ``libmla_runtime.so.1`` on the dynamic linker's path.
The structs below mirror mla_runtime.h 1.1; the library's version is checked
when it is loaded.
"""

import ctypes
import os

# The API this module binds: MAJOR must match, MINOR be at least this.
API_MAJOR = 1
API_MINOR = 1
SONAME = "libmla_runtime.so.%d" % API_MAJOR

MAX_RANK = 8
DYNAMIC_DIM = -1

# mla_status
OK = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_INVALID_PACKAGE = 2
ERROR_INVALID_MANIFEST = 3
ERROR_UNSUPPORTED = 4
ERROR_IO = 5
ERROR_BACKEND = 6
ERROR_INTERNAL = 7

# mla_dtype
DTYPE_BF16, DTYPE_F16, DTYPE_F32, DTYPE_I32, DTYPE_I64 = range(5)

# mla_arg_kind
ARG_TENSOR, ARG_F32, ARG_INT = range(3)
LAUNCH_REUSE_PLAN = 1  # mla_launch_with_flags

# mla_role_use
ROLE_INPUT, ROLE_OUTPUT, ROLE_INOUT = range(3)


class Error(Exception):
    """An error of the mla runtime: ``str(e)`` is the runtime's message
    (one line naming the argument, file or manifest line), ``e.status`` the
    mla_status code and ``e.status_name`` its name ("invalid argument")."""

    def __init__(self, message, status=ERROR_INVALID_ARGUMENT):
        super().__init__(message)
        self.message = message
        self.status = status
        self.status_name = _STATUS_NAMES.get(status, "unknown status")


class InvalidArgumentError(Error, ValueError):
    """MLA_ERROR_INVALID_ARGUMENT: an argument is wrong; the message names
    it."""


class InvalidPackageError(Error):
    """MLA_ERROR_INVALID_PACKAGE: a malformed, truncated or corrupted
    package."""


class InvalidManifestError(Error):
    """MLA_ERROR_INVALID_MANIFEST: "manifest line N: ..."."""


class UnsupportedError(Error):
    """MLA_ERROR_UNSUPPORTED: a request this runtime, build or device cannot
    serve (no CUDA driver, a decode call on a merge kernel, ...)."""


class FileError(Error, OSError):
    """MLA_ERROR_IO: a file could not be read (the message starts with the
    path)."""

    def __init__(self, message, status=ERROR_IO):
        Error.__init__(self, message, status)

    def __str__(self):
        return self.message


class BackendError(Error):
    """MLA_ERROR_BACKEND: the device backend failed."""


class InternalError(Error):
    """MLA_ERROR_INTERNAL: out of host memory or an internal error."""


_ERRORS = {
    ERROR_INVALID_ARGUMENT: InvalidArgumentError,
    ERROR_INVALID_PACKAGE: InvalidPackageError,
    ERROR_INVALID_MANIFEST: InvalidManifestError,
    ERROR_UNSUPPORTED: UnsupportedError,
    ERROR_IO: FileError,
    ERROR_BACKEND: BackendError,
    ERROR_INTERNAL: InternalError,
}
_STATUS_NAMES = {}


def error(status, message):
    """The exception of an mla_status."""
    return _ERRORS.get(status, Error)(message, status)


class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
    ]


class Arg(ctypes.Structure):
    _fields_ = [
        ("role", ctypes.c_char_p),
        ("kind", ctypes.c_int),
        ("tensor", Tensor),
        ("f32", ctypes.c_float),
        ("i64", ctypes.c_int64),
    ]


class ArgInfo(ctypes.Structure):
    _fields_ = [
        ("index", ctypes.c_int32),
        ("role", ctypes.c_char_p),
        ("is_scalar", ctypes.c_int32),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int32),
        ("dims", ctypes.c_int64 * MAX_RANK),
    ]


class RoleInfo(ctypes.Structure):
    _fields_ = [
        ("role", ctypes.c_char_p),
        ("is_scalar", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("use", ctypes.c_int),
    ]


class DeviceOptions(ctypes.Structure):
    _fields_ = [("host_threads", ctypes.c_uint32)]


class HostCopy(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("data", ctypes.c_void_p)]


class LaunchOptions(ctypes.Structure):
    _fields_ = [
        ("skip_validation", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("host_block_table", ctypes.c_void_p),
        ("host_seq_lens", ctypes.c_void_p),
        ("host_copies", ctypes.POINTER(HostCopy)),
        ("num_host_copies", ctypes.c_size_t),
    ]


class PagePoolInfo(ctypes.Structure):
    _fields_ = [
        ("num_pages", ctypes.c_int64),
        ("page_size", ctypes.c_int64),
        ("free_pages", ctypes.c_int64),
        ("num_requests", ctypes.c_int64),
    ]


class RequestInfo(ctypes.Structure):
    _fields_ = [
        ("exists", ctypes.c_int32),
        ("length", ctypes.c_int64),
        ("num_pages", ctypes.c_int64),
        ("tokens_without_new_pages", ctypes.c_int64),
        ("tokens_that_fit", ctypes.c_int64),
    ]


_p = ctypes.c_void_p
_pp = ctypes.POINTER(ctypes.c_void_p)
_s = ctypes.c_char_p
_ps = ctypes.POINTER(ctypes.c_char_p)
_size = ctypes.c_size_t
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_pi32 = ctypes.POINTER(ctypes.c_int32)
_pi64 = ctypes.POINTER(ctypes.c_int64)
_psize = ctypes.POINTER(ctypes.c_size_t)
_st = ctypes.c_int

# name: (restype, argtypes); _st for mla_status functions (call() raises
# from them), None for void ones.
_FUNCTIONS = {
    "mla_last_error": (_s, []),
    "mla_status_name": (_s, [ctypes.c_int]),
    "mla_version": (ctypes.c_int, []),
    "mla_version_string": (_s, []),
    "mla_package_format_version": (ctypes.c_uint32, []),
    "mla_dtype_size": (_size, [ctypes.c_int]),
    "mla_dtype_name": (_s, [ctypes.c_int]),
    "mla_convert": (_st, [_p, ctypes.c_int, _p, ctypes.c_int, _size]),
    "mla_num_kinds": (_size, []),
    "mla_kind_name": (_s, [_size]),
    "mla_kind_num_roles": (_st, [_s, _psize]),
    "mla_kind_role": (_st, [_s, _size, ctypes.POINTER(RoleInfo)]),
    "mla_device_open": (_st, [_s, ctypes.POINTER(DeviceOptions), _pp]),
    "mla_device_close": (None, [_p]),
    "mla_device_name": (_st, [_p, _ps]),
    "mla_device_uses_host_memory": (_st, [_p, _pi32]),
    "mla_device_synchronize": (_st, [_p, _p]),
    "mla_package_load_file": (_st, [_s, _pp]),
    "mla_package_load_memory": (_st, [_p, _size, _pp]),
    "mla_package_close": (None, [_p]),
    "mla_package_kind": (_st, [_p, _ps]),
    "mla_package_num_targets": (_st, [_p, _psize]),
    "mla_package_target": (_st, [_p, _size, _ps]),
    "mla_kernel_load": (_st, [_p, _p, _s, _pp]),
    "mla_kernel_close": (None, [_p]),
    "mla_kernel_kind": (_st, [_p, _ps]),
    "mla_kernel_target": (_st, [_p, _ps]),
    "mla_kernel_num_args": (_st, [_p, _psize]),
    "mla_kernel_arg": (_st, [_p, _size, ctypes.POINTER(ArgInfo)]),
    "mla_kernel_header_int": (_st, [_p, _s, _pi64]),
    "mla_kernel_header_string": (_st, [_p, _s, _ps]),
    "mla_kernel_workspace_bytes": (_st, [_p, ctypes.POINTER(Arg), _size,
                                          _psize]),
    "mla_kernel_reserve_workspace": (_st, [_p, _size]),
    "mla_kernel_output_shape": (_st, [_p, _s, ctypes.POINTER(Arg), _size,
                                       ctypes.POINTER(Tensor)]),
    "mla_kernel_validate": (_st, [_p, ctypes.POINTER(Arg), _size,
                                   ctypes.POINTER(LaunchOptions)]),
    "mla_launch": (_st, [_p, ctypes.POINTER(Arg), _size,
                          ctypes.POINTER(LaunchOptions)]),
    "mla_launch_with_flags": (_st, [_p, ctypes.POINTER(Arg), _size,
                                     ctypes.POINTER(LaunchOptions),
                                     ctypes.c_uint32]),
    "mla_kernel_plan_launches": (_st, [_p, _psize]),
    "mla_page_pool_create": (_st, [_i64, _i64, _pp]),
    "mla_page_pool_destroy": (None, [_p]),
    "mla_page_pool_append_tokens": (_st, [_p, _i64, _i64, _pi32]),
    "mla_page_pool_free_request": (_st, [_p, _i64]),
    "mla_page_pool_allocate_pages": (_st, [_p, _i64, _pi32]),
    "mla_page_pool_free_pages": (_st, [_p, _pi32, _i64]),
    "mla_page_pool_get_info": (_st, [_p, ctypes.POINTER(PagePoolInfo)]),
    "mla_page_pool_request_info": (_st, [_p, _i64,
                                          ctypes.POINTER(RequestInfo)]),
    "mla_page_pool_max_pages": (_st, [_p, _pi64, _size, _pi64]),
    "mla_page_pool_export_block_table": (_st, [_p, _pi64, _size, _i64,
                                                _pi32, _pi32]),
}


def _candidates():
    path = os.environ.get("MLA_RUNTIME_LIBRARY")
    if path:
        return [path]
    found = []
    try:
        from . import _location
    except ImportError:
        pass
    else:
        found.append(os.path.normpath(os.path.join(
            os.path.dirname(os.path.abspath(__file__)), _location.LIBRARY)))
    found.append(SONAME)
    return found


def _load():
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(str(e))
            continue
        for name, (restype, argtypes) in _FUNCTIONS.items():
            function = getattr(lib, name)
            function.argtypes = argtypes
            function.restype = restype
        version = lib.mla_version()
        major, minor = version // 10000, version // 100 % 100
        if major != API_MAJOR or minor < API_MINOR:
            raise ImportError(
                "mla: %s is the mla runtime %s; this package needs %d.%d or "
                "a later %d.x" % (path, lib.mla_version_string().decode(),
                                  API_MAJOR, API_MINOR, API_MAJOR))
        return lib
    raise ImportError(
        "mla: cannot load the mla runtime library (set MLA_RUNTIME_LIBRARY "
        "to the path of %s): %s" % (SONAME, "; ".join(tried)))


lib = _load()
for _status in range(OK, ERROR_INTERNAL + 1):
    _STATUS_NAMES[_status] = lib.mla_status_name(_status).decode()


def check(status):
    """Raises the exception of a failed mla_status call: its message is
    mla_last_error() of this thread, read right after the call."""
    if status != OK:
        raise error(status, lib.mla_last_error().decode())


def call(name, *args):
    """Calls an mla_status function of the library and raises on error."""
    check(getattr(lib, name)(*args))


def text(value):
    """A C string argument."""
    return value.encode() if isinstance(value, str) else value
