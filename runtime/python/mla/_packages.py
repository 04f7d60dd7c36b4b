"""Packages for given shapes: mla.compile (mla-compile, with an on-disk
cache keyed by everything that changes the code) and mla.find_package (a
directory of packages, $MLA_PACKAGE_DIR, then the cache, then compiling),
and kernels loaded once per device (mla.load_kernel)."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from . import _capi

# The flags of each kind, with mla-compile's defaults where it has them:
# a package's name spells all of them, so equal names mean equal code.
_KIND_FLAGS = {
    "decode": {"heads": None, "latent_dim": 512, "rope_dim": 64,
               "page_size": None, "q_len": 1, "dtype": "bf16"},
    "append_kv": {"latent_dim": 512, "rope_dim": 64, "page_size": None,
                  "dtype": "bf16"},
    "prefill": {"heads": None, "qk_dim": 192, "v_dim": 128, "causal": False,
                "dtype": "bf16", "o_dtype": None},
    "merge": {"heads": None, "v_dim": 128, "parts": None, "dtype": "bf16"},
}
_lock = threading.Lock()
_compiler_ids = {}
_kernels = {}


def _flags(kernel, flags):
    if kernel not in _KIND_FLAGS:
        raise _capi.InvalidArgumentError(
            "kernel: unknown kind %r (known: %s)"
            % (kernel, ", ".join(sorted(_KIND_FLAGS))))
    known = dict(_KIND_FLAGS[kernel], perf_config=None)
    unknown = sorted(set(flags) - set(known))
    if unknown:
        raise _capi.InvalidArgumentError(
            "%s: unknown flag%s %s (flags: %s)"
            % (kernel, "s" if len(unknown) > 1 else "", ", ".join(unknown),
               ", ".join(sorted(known))))
    values = dict(known, **flags)
    missing = [k for k, v in values.items() if v is None and
               k not in ("o_dtype", "perf_config")]
    if missing:
        raise _capi.InvalidArgumentError(
            "%s: needs %s" % (kernel, ", ".join(missing)))
    return {k: v for k, v in values.items() if v is not None and
            v is not False}


def package_name(kernel=None, target="host", source=None, **flags):
    """The file name of a package: its kind (or .mlir source's name and
    content hash), every flag and the targets, e.g.
    decode-dtype=bf16-heads=16-latent_dim=512-page_size=64-q_len=1-rope_dim=64-target=sm_90a.mlapkg"""
    if source is not None:
        with open(source, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:16]
        stem = os.path.splitext(os.path.basename(source))[0]
        parts = ["source=%s@%s" % (stem, digest)]
        if flags:
            raise _capi.InvalidArgumentError(
                "source: an .mlir file has its own shapes (no flags: %s)"
                % ", ".join(sorted(flags)))
    else:
        parts = [kernel] + ["%s=%s" % (k, "1" if v is True else v)
                            for k, v in sorted(_flags(kernel, flags).items())]
    return "-".join(parts + ["target=" + target]) + ".mlapkg"


def _arguments(kernel, target, source, flags):
    if source is not None:
        return [os.fspath(source), "--target=" + target]
    args = ["--kernel=" + kernel, "--target=" + target]
    for key, value in sorted(_flags(kernel, flags).items()):
        option = "--" + key.replace("_", "-")
        args.append(option if value is True else "%s=%s" % (option, value))
    return args


def compiler():
    """The path of mla-compile: $MLA_COMPILE, else mla-compile on PATH,
    else the one beside the runtime library's folder (bin/ of a build
    tree or an install prefix); None when there is none."""
    path = os.environ.get("MLA_COMPILE")
    if path:
        return path
    path = shutil.which("mla-compile")
    if path:
        return path
    library = os.path.realpath(getattr(_capi.lib, "_name", "") or "")
    beside = os.path.join(os.path.dirname(library), os.pardir, "bin",
                          "mla-compile")
    return os.path.normpath(beside) if os.access(beside, os.X_OK) else None


def _compiler_id(path):
    """What identifies the compiler's code: its --version line and the
    binary's path, size and time (a rebuild changes them)."""
    stat = os.stat(path)
    key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)
    with _lock:
        if key not in _compiler_ids:
            version = subprocess.run([path, "--version"], check=True,
                                     capture_output=True, text=True).stdout
            text = "%s\n%s %d %d" % (version.strip(), *key)
            _compiler_ids[key] = hashlib.sha256(text.encode()).hexdigest()[:16]
        return _compiler_ids[key]


def cache_dir():
    """$MLA_CACHE_DIR, else $XDG_CACHE_HOME/mla, else ~/.cache/mla."""
    return os.environ.get("MLA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or
        os.path.join(os.path.expanduser("~"), ".cache"), "mla")


def compile(kernel=None, *, target="host", source=None, cache=True,
            output=None, **flags):
    """Compiles a package with mla-compile and returns its path: `kernel`
    ("decode", "prefill", "merge", "append_kv") with its flags (heads=16,
    page_size=64, q_len=2, dtype="bf16", perf_config="tile_kv=32", ...; the
    names of mla-compile's flags with _ for -), or `source`, an .mlir file.
    `target`: one or several, comma-separated. With `cache` the package is
    kept under cache_dir()/packages/COMPILER/NAME (COMPILER: a hash of
    mla-compile's version and binary) and compiled only when missing;
    `output` writes it there instead."""
    path = compiler()
    if not path:
        raise _capi.UnsupportedError(
            "mla.compile: no mla-compile (set MLA_COMPILE or put it on PATH)")
    name = package_name(kernel, target, source, **flags)
    if output is None:
        if not cache:
            raise _capi.InvalidArgumentError(
                "mla.compile: cache=False needs output=")
        folder = os.path.join(cache_dir(), "packages", _compiler_id(path))
        output = os.path.join(folder, name)
        if os.path.exists(output):
            return output
    folder = os.path.dirname(os.path.abspath(output))
    os.makedirs(folder, exist_ok=True)
    fd, temporary = tempfile.mkstemp(suffix=".mlapkg", dir=folder)
    os.close(fd)
    command = [path] + _arguments(kernel, target, source, flags) + \
        ["-o", temporary]
    try:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip()).splitlines()
            raise _capi.InvalidArgumentError(
                "mla.compile: `%s` failed: %s" % (
                    " ".join(command[:-2]), said[-1] if said else
                    "exit status %d" % done.returncode))
        os.replace(temporary, output)  # whole or not at all
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return output


def package_dirs():
    """The folders of $MLA_PACKAGE_DIR (os.pathsep-separated)."""
    value = os.environ.get("MLA_PACKAGE_DIR", "")
    return [d for d in value.split(os.pathsep) if d]


def find_package(kernel=None, *, target="host", source=None, **flags):
    """The path of a package for these flags: NAME (package_name) in a
    folder of $MLA_PACKAGE_DIR, else compiled (and cached) by compile();
    where neither is possible, mla.UnsupportedError says what was searched
    and the mla-compile command that writes the package."""
    name = package_name(kernel, target, source, **flags)
    for folder in package_dirs():
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    if compiler():
        return compile(kernel, target=target, source=source, **flags)
    command = "mla-compile %s -o %s" % (
        " ".join(_arguments(kernel, target, source, flags)), name)
    searched = package_dirs()
    raise _capi.UnsupportedError(
        "no package %s: %s, and no mla-compile here to compile it (set "
        "MLA_COMPILE, or on a machine with LLVM run `%s` and point "
        "MLA_PACKAGE_DIR at its folder)"
        % (name, "not in $MLA_PACKAGE_DIR (%s)" % os.pathsep.join(searched)
           if searched else "MLA_PACKAGE_DIR is not set", command))


def device_target(device):
    """The target whose code `device` runs: host, gfx942-emu for the
    emulator, the GPU's from torch when it is imported (sm_90a on compute
    capability 9.0, sm_80 on other NVIDIA GPUs of 8.0 or newer, the gfx
    processor on AMD), else $MLA_TARGET, else sm_90a / gfx942."""
    name = device.name
    if name == "host":
        return "host"
    if name.startswith("emu"):
        return os.environ.get("MLA_TARGET", "gfx942-emu")
    if os.environ.get("MLA_TARGET"):
        return os.environ["MLA_TARGET"]
    kind, _, index = name.partition(":")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        index = int(index or 0)
        if kind == "hip":
            arch = torch.cuda.get_device_properties(index).gcnArchName
            return arch.split(":")[0]
        return "sm_90a" if torch.cuda.get_device_capability(index) == (9, 0) \
            else "sm_80"
    return "gfx942" if kind == "hip" else "sm_90a"


_devices = {}


def open_device(name):
    """An mla.Device opened once per name (for the FlashMLA and vLLM
    modules)."""
    from ._runtime import Device
    with _lock:
        if name not in _devices:
            _devices[name] = Device(name)
        return _devices[name]


def load_kernel(device, kernel=None, *, target=None, source=None, **flags):
    """The kernel of find_package(...) loaded on `device` (a Device or a
    device name), once per device and package; target None:
    device_target(device)."""
    if isinstance(device, str):
        device = open_device(device)
    target = target or device_target(device)
    key = (device.name, package_name(kernel, target, source, **flags))
    with _lock:
        loaded = _kernels.get(key)
    if loaded is None:
        path = find_package(kernel, target=target, source=source, **flags)
        loaded = device.load(path)  # the device's target of the package
        with _lock:
            loaded = _kernels.setdefault(key, loaded)
    return loaded
