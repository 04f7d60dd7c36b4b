"""Fixtures of the Python package's tests.

Environment (the ctest `python` sets all three):
  PYTHONPATH           holds runtime/python (the package) or an installed
                       prefix's site-packages
  MLA_RUNTIME_LIBRARY  the shared library (build/lib/libmla_runtime.so.1);
                       unset for an installed package
  MLA_COMPILE          the mla-compile that writes the test packages
  MLA_PACKAGE_DIR      (optional) folders of packages mla.find_package
                       takes before compiling (the ctest python.cuda)
"""

import os
import subprocess
import zlib

import numpy as np
import pytest

import mla


class Compiler:
    """Compiles packages with mla-compile once per flag set and session."""

    def __init__(self, directory):
        self.directory = directory
        self.path = os.environ.get("MLA_COMPILE")
        self.cache = {}

    def __call__(self, kernel, **flags):
        """The path of a host package for `--kernel=kernel` and `flags`
        (name=value: --name=value, with _ as -; True: a bare --name)."""
        if not self.path:
            pytest.fail("MLA_COMPILE is not set: point it at mla-compile")
        flags.setdefault("target", "host")
        args = ["--kernel=" + kernel]
        for name, value in sorted(flags.items()):
            option = "--" + name.replace("_", "-")
            args.append(option if value is True else "%s=%s" % (option, value))
        key = tuple(args)
        if key not in self.cache:
            name = "_".join(a.lstrip("-").replace("=", "") for a in args)
            out = os.path.join(self.directory, name + ".mlapkg")
            subprocess.run([self.path] + args + ["-o", out], check=True)
            self.cache[key] = out
        return self.cache[key]


@pytest.fixture(scope="session")
def compile_package(tmp_path_factory):
    return Compiler(str(tmp_path_factory.mktemp("packages")))


@pytest.fixture(scope="session", autouse=True)
def package_cache(tmp_path_factory):
    """mla.compile's cache in a folder of the session (mla.find_package
    compiles there what $MLA_PACKAGE_DIR does not hold)."""
    saved = os.environ.get("MLA_CACHE_DIR")
    os.environ["MLA_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield os.environ["MLA_CACHE_DIR"]
    if saved is None:
        os.environ.pop("MLA_CACHE_DIR", None)
    else:
        os.environ["MLA_CACHE_DIR"] = saved


@pytest.fixture(scope="session")
def host():
    return mla.Device("host", threads=2)


@pytest.fixture
def rng(request):
    # A seed per test, so a failure reproduces on its own.
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))
