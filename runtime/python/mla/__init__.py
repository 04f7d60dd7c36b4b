"""mla: the mla runtime from Python (ctypes over its C API, mla_runtime.h).

    import mla, numpy as np
    dev = mla.Device("host")
    k = dev.load("decode.mlapkg")                 # mla-compile's package
    o, lse = k.decode(q, kv, block_table, seq_lens, scale)

Arrays are numpy arrays in host memory (bf16 as uint16 bit patterns:
mla.to_bf16 / mla.from_bf16) and, on GPUs, torch tensors or arrays with
__cuda_array_interface__ or DLPack; errors raise mla.Error subclasses
carrying the runtime's message. mla.compile / mla.find_package build or
find packages for given shapes; mla.torch (torch.library ops),
mla.flashmla (FlashMLA's decode interface) and mla.vllm (a vLLM MLA
backend) build on them. docs/Python.md describes the API.
"""

import sys


from ._capi import (BackendError, Error, FileError, InternalError,
                    InvalidArgumentError, InvalidManifestError,
                    InvalidPackageError, UnsupportedError)
from ._arrays import from_bf16, numpy_dtype, to_bf16
from ._runtime import (ArgInfo, DecodePlan, Device, Kernel, Package, RoleInfo,
                       kinds)
from ._pagepool import PagePool
from ._packages import (cache_dir, compile, find_package, load_kernel,
                        package_name)
from . import _capi


def version():
    """The runtime library's version, "MAJOR.MINOR.PATCH"."""
    return _capi.lib.mla_version_string().decode()


def package_format_version():
    """The package format version the runtime reads."""
    return _capi.lib.mla_package_format_version()


__all__ = [
    "ArgInfo", "BackendError", "DecodePlan", "Device", "Error", "FileError",
    "InternalError", "InvalidArgumentError", "InvalidManifestError",
    "InvalidPackageError", "Kernel", "Package", "PagePool", "RoleInfo",
    "UnsupportedError", "cache_dir", "compile", "find_package", "from_bf16",
    "kinds", "load_kernel", "numpy_dtype", "package_format_version",
    "package_name", "to_bf16", "version",
]

# The torch ops register when torch is there already (importing torch for
# them would slow every `import mla`); `import mla.torch` otherwise.
if "torch" in sys.modules:
    try:
        from . import torch  # noqa: F401
    except (ImportError, AttributeError):  # a torch without custom_op
        pass
