"""mla: the mla runtime from Python (ctypes over its C API, mla_runtime.h).

    import mla, numpy as np
    dev = mla.Device("host")
    k = dev.load("decode.mlapkg")                 # mla-compile's package
    o, lse = k.decode(q, kv, block_table, seq_lens, scale)

Arrays are numpy arrays in host memory (bf16 as uint16 bit patterns:
mla.to_bf16 / mla.from_bf16); errors raise mla.Error subclasses carrying the
runtime's message. docs/Python.md describes the API.
"""

from ._capi import (BackendError, Error, FileError, InternalError,
                    InvalidArgumentError, InvalidManifestError,
                    InvalidPackageError, UnsupportedError)
from ._arrays import from_bf16, numpy_dtype, to_bf16
from ._runtime import ArgInfo, Device, Kernel, Package, RoleInfo, kinds
from ._pagepool import PagePool
from . import _capi


def version():
    """The runtime library's version, "MAJOR.MINOR.PATCH"."""
    return _capi.lib.mla_version_string().decode()


def package_format_version():
    """The package format version the runtime reads."""
    return _capi.lib.mla_package_format_version()


__all__ = [
    "ArgInfo", "BackendError", "Device", "Error", "FileError",
    "InternalError", "InvalidArgumentError", "InvalidManifestError",
    "InvalidPackageError", "Kernel", "Package", "PagePool", "RoleInfo",
    "UnsupportedError", "from_bf16", "kinds", "numpy_dtype",
    "package_format_version", "to_bf16", "version",
]
