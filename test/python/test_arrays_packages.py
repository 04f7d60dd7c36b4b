"""What the host can check of the GPU-array layer and the package finder:
decode's lse_layout, DLPack arrays, __cuda_array_interface__ parsing and
refusal on the host, i64 index inputs narrowed to i32, validate modes,
stream objects; mla.compile's cache and mla.find_package's messages."""

import ctypes
import os

import numpy as np
import pytest

import mla
from mla import _devarrays, _packages
import reference

LATENT, ROPE, PAGE = 32, 16, 4


@pytest.fixture(scope="module")
def kernels(host):
    def load(q_len):
        return mla.load_kernel(host, "decode", heads=3, q_len=q_len,
                               page_size=PAGE, latent_dim=LATENT,
                               rope_dim=ROPE)
    return load


def inputs(rng, q_len, lengths=(5, 0, 11)):
    kv, _, table, lens = reference.paged_cache(rng, list(lengths), PAGE,
                                               LATENT + ROPE, "bf16")
    q, _ = reference.random_input(rng, (len(lengths), q_len, 3,
                                        LATENT + ROPE), "bf16")
    return q, kv, table, lens


@pytest.mark.parametrize("q_len", [1, 2])
def test_lse_layout(kernels, rng, q_len):
    kernel = kernels(q_len)
    q, kv, table, lens = inputs(rng, q_len)
    o, lse = kernel.decode(q, kv, table, lens, 0.3)
    o2, lse2 = kernel.decode(q, kv, table, lens, 0.3, lse_layout="bhs")
    np.testing.assert_array_equal(o, o2)
    assert lse2.shape == (3, 3, q_len) and lse2.flags.c_contiguous
    np.testing.assert_array_equal(lse2, lse.transpose(0, 2, 1))
    given = np.full((3, 3, q_len), 7, np.float32)
    _, lse3 = kernel.decode(q, kv, table, lens, 0.3, lse=given,
                            lse_layout="bhs")
    assert lse3 is given
    np.testing.assert_array_equal(given, lse2)
    with pytest.raises(mla.InvalidArgumentError, match=r"lse: shape \(3, %d, "
                       r"3\), expected \[batch, heads, q_len\]" % q_len):
        kernel.decode(q, kv, table, lens, 0.3, lse=lse.copy(),
                      lse_layout="bhs") if q_len > 1 else \
            kernel.decode(q, kv, table, lens, 0.3,
                          lse=np.zeros((3, 1, 3), np.float32),
                          lse_layout="bhs")
    with pytest.raises(mla.InvalidArgumentError, match="lse_layout: expected "
                       "'bsh'"):
        kernel.decode(q, kv, table, lens, 0.3, lse_layout="hbs")


class DLPackOnly:
    """An array seen only through DLPack (numpy's, on the CPU)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, stream=None):
        assert stream is None
        return self._array.__dlpack__()

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class CudaArray:
    """An object with a __cuda_array_interface__ (over host memory, which
    a GPU kernel would never be given)."""

    def __init__(self, array, version=3, **extra):
        self._array = array
        self.__cuda_array_interface__ = dict(
            shape=array.shape, typestr=array.dtype.str,
            data=(array.ctypes.data, False), version=version, strides=None,
            stream=None)
        self.__cuda_array_interface__.update(extra)


def test_dlpack_arrays_on_the_host(kernels, rng):
    kernel = kernels(1)
    q, kv, table, lens = inputs(rng, 1)
    o, lse = kernel.decode(q, kv, table, lens, 0.3)
    out, lse_out = np.empty_like(o), np.empty_like(lse)
    wrapped = [DLPackOnly(a) for a in (q, kv, table, lens)]
    got = kernel.decode(*wrapped, 0.3, out=out, lse=lse_out)
    assert got[0] is out and got[1] is lse_out
    np.testing.assert_array_equal(out, o)
    np.testing.assert_array_equal(lse_out, lse)
    with pytest.raises(mla.InvalidArgumentError, match="o: pass out= .mla "
                       "allocates outputs as numpy arrays, torch tensors and "
                       "CuPy arrays; the inputs are DLPackOnly"):
        kernel.decode(*wrapped, 0.3)
    view = _devarrays.view("kv", wrapped[1])
    assert (view.family, view.memory, view.tensor.rank) == ("dlpack", "host",
                                                            3)
    assert view.tensor.data == kv.ctypes.data


def test_cuda_array_interface(kernels, rng):
    q, kv, table, lens = inputs(rng, 1)
    view = _devarrays.view("q", CudaArray(q, stream=5))
    assert (view.family, view.memory, view.stream) == ("cai", "device", 5)
    assert list(view.tensor.shape[:4]) == list(q.shape)
    assert view.tensor.dtype == 0  # bf16: uint16 bits
    with pytest.raises(mla.InvalidArgumentError, match="q: cuda memory, "
                       "which host kernels cannot read"):
        kernels(1).decode(CudaArray(q), kv, table, lens, 0.3)
    checks = [
        (CudaArray(q, version=1), "__cuda_array_interface__ version 1 "
         r"\(mla reads 2 and 3\)"),
        (CudaArray(q.astype(np.float64)), "typestr '<f8' is not an mla dtype"),
        (CudaArray(q, mask=object()), "masked arrays are not supported"),
    ]
    strided = CudaArray(q)
    strided.__cuda_array_interface__["strides"] = (8, 8, 8, 8)
    checks.append((strided, "the array is not C-contiguous"))
    for array, message in checks:
        with pytest.raises(mla.InvalidArgumentError, match="q: " + message):
            _devarrays.view("q", array)
    readonly = CudaArray(q)
    readonly.__cuda_array_interface__["data"] = (q.ctypes.data, True)
    with pytest.raises(mla.InvalidArgumentError, match="o: the array is "
                       "read-only"):
        _devarrays.view("o", readonly, writable=True)
    assert _devarrays.launch_stream(None, [CudaArray(q, stream=1)]) == 0
    assert _devarrays.launch_stream(None, [CudaArray(q, stream=77)]) == 77
    with pytest.raises(mla.InvalidArgumentError, match="name different "
                       "streams"):
        _devarrays.launch_stream(None, [CudaArray(q, stream=5),
                                        CudaArray(kv, stream=6)])


def test_stream_objects():
    class TorchLike:
        cuda_stream = 0x1234

    class Protocol:
        def __cuda_stream__(self):
            return (0, 0x99)

    assert _devarrays.stream_handle(None) == 0
    assert _devarrays.stream_handle(5) == 5
    assert _devarrays.stream_handle(TorchLike()) == 0x1234
    assert _devarrays.stream_handle(Protocol()) == 0x99
    with pytest.raises(mla.InvalidArgumentError, match="stream: expected an "
                       "int"):
        _devarrays.stream_handle("default")


def test_int64_index_inputs_and_validate(kernels, rng):
    kernel = kernels(1)
    q, kv, table, lens = inputs(rng, 1)
    o, lse = kernel.decode(q, kv, table, lens, 0.3)
    o64, lse64 = kernel.decode(q, kv, table.astype(np.int64),
                               lens.astype(np.int64), 0.3, validate="shapes")
    np.testing.assert_array_equal(o, o64)
    np.testing.assert_array_equal(lse, lse64)
    big = table.astype(np.int64)
    big[2, 1] = -2 ** 40
    with pytest.raises(mla.InvalidArgumentError, match=r"block_table\[2\]\[1\]"
                       r" = -1099511627776 is outside the int32 range "
                       r"\[-2147483648, 2147483647\]"):
        kernel.decode(q, kv, big, lens, 0.3)
    with pytest.raises(mla.InvalidArgumentError, match="validate: expected "
                       "True, False or 'shapes', got 'all'"):
        kernel.decode(q, kv, table, lens, 0.3, validate="all")


def test_compile_cache(compile_package, package_cache):
    flags = dict(heads=2, page_size=8, latent_dim=LATENT, rope_dim=ROPE)
    name = mla.package_name("decode", "host", **flags)
    assert name == ("decode-dtype=bf16-heads=2-latent_dim=32-page_size=8-"
                    "q_len=1-rope_dim=16-target=host.mlapkg")
    path = mla.compile("decode", **flags)
    assert os.path.basename(path) == name
    assert path.startswith(os.path.join(package_cache, "packages"))
    stamp = os.stat(path).st_mtime_ns
    assert mla.compile("decode", **flags) == path
    assert os.stat(path).st_mtime_ns == stamp  # from the cache
    assert mla.Package(path).kind == "decode"
    with pytest.raises(mla.InvalidArgumentError, match="decode: unknown flag "
                       "parts"):
        mla.compile("decode", parts=2, **flags)
    with pytest.raises(mla.InvalidArgumentError, match="decode: needs heads"):
        mla.compile("decode", page_size=8)
    with pytest.raises(mla.InvalidArgumentError, match="mla.compile: `.*"
                       "--heads=0.*` failed: "):
        mla.compile("decode", heads=0, page_size=8)


def test_find_package(tmp_path, monkeypatch, host):
    flags = dict(heads=2, page_size=8, latent_dim=LATENT, rope_dim=ROPE,
                 q_len=2)
    name = mla.package_name("decode", "host", **flags)
    monkeypatch.setattr(_packages, "compiler", lambda: None)
    monkeypatch.delenv("MLA_PACKAGE_DIR", raising=False)
    with pytest.raises(mla.UnsupportedError) as info:
        mla.find_package("decode", **flags)
    assert str(info.value) == (
        "no package %s: MLA_PACKAGE_DIR is not set, and no mla-compile here "
        "to compile it (set MLA_COMPILE, or on a machine with LLVM run "
        "`mla-compile --kernel=decode --target=host --dtype=bf16 --heads=2 "
        "--latent-dim=32 --page-size=8 --q-len=2 --rope-dim=16 -o %s` and "
        "point MLA_PACKAGE_DIR at its folder)" % (name, name))
    monkeypatch.setenv("MLA_PACKAGE_DIR", "%s%s%s" % (tmp_path / "none",
                                                     os.pathsep, tmp_path))
    with pytest.raises(mla.UnsupportedError, match="not in .MLA_PACKAGE_DIR "):
        mla.find_package("decode", **flags)
    monkeypatch.undo()
    built = mla.compile("decode", output=str(tmp_path / name), **flags)
    monkeypatch.setattr(_packages, "compiler", lambda: None)
    monkeypatch.setenv("MLA_PACKAGE_DIR", str(tmp_path))
    assert mla.find_package("decode", **flags) == built
    kernel = mla.load_kernel(host, "decode", **flags)
    assert kernel.header_int("q_len") == 2
    assert mla.load_kernel("host", "decode", **flags) is not None


def test_torch_module_needs_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError):
            import mla.torch  # noqa: F401
    else:  # pragma: no cover
        pytest.skip("torch is installed: test_torch_cuda.py tests mla.torch")


def test_dlpack_capsule_layout():
    # The ctypes mirror of DLManagedTensor reads numpy's capsule.
    array = np.arange(12, dtype=np.int32).reshape(3, 4)
    capsule = array.__dlpack__()  # owns what it points at while it lives
    managed = _devarrays.DLManagedTensor.from_address(
        _devarrays._capsule_pointer(capsule, b"dltensor"))
    dl = managed.dl_tensor
    assert dl.ndim == 2 and [dl.shape[0], dl.shape[1]] == [3, 4]
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (0, 32, 1)
    assert ctypes.c_int32.from_address(dl.data + 4 * 5).value == 5
