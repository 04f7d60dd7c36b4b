"""The installed package, from the prefix alone (ctest python.installed,
after install.find-package installed the build into a temporary prefix):
PYTHONPATH is the prefix's site-packages only, MLA_RUNTIME_LIBRARY is unset,
MLA_COMPILE is the prefix's mla-compile."""

import os

import numpy as np
import pytest

import reference

PREFIX = os.environ.get("MLA_INSTALL_PREFIX")
pytestmark = pytest.mark.skipif(
    not PREFIX, reason="MLA_INSTALL_PREFIX is not set (the ctest "
    "python.installed sets it)")


def inside(path):
    return os.path.realpath(path).startswith(os.path.realpath(PREFIX) + "/")


def test_imports_the_prefix_package_and_library():
    import mla
    assert "MLA_RUNTIME_LIBRARY" not in os.environ
    assert inside(mla.__file__), mla.__file__
    library = mla._capi.lib._name
    assert inside(library) and library.endswith("libmla_runtime.so.1")
    assert mla.version().startswith("1.")


def test_decode_from_the_prefix(compile_package, host, rng):
    import mla
    kernel = host.load(compile_package("decode", heads=3, latent_dim=32,
                                       rope_dim=16, page_size=3, q_len=1,
                                       dtype="bf16"))
    kv, kv64, table, lens = reference.paged_cache(rng, [7, 30], 3, 48, "bf16")
    q, q64 = reference.random_input(rng, (2, 1, 3, 48), "bf16")
    o, lse = kernel.decode(q, kv, table, lens, 0.25)
    ref_o, ref_lse = reference.decode(q64, kv64, table, lens, 0.25, 32)
    np.testing.assert_allclose(mla.from_bf16(o), ref_o, atol=2e-2, rtol=0)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-3, rtol=0)
