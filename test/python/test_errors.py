"""Bad inputs raise mla.Error subclasses whose message is the runtime's (or
the binding's, for what never reaches it) and names the wrong argument."""

import numpy as np
import pytest

import mla
import reference

LATENT, ROPE, PAGE = 32, 16, 4


@pytest.fixture(scope="module")
def decode_path(compile_package):
    return compile_package("decode", heads=3, latent_dim=LATENT,
                           rope_dim=ROPE, page_size=PAGE, q_len=1,
                           dtype="bf16")


@pytest.fixture(scope="module")
def decode(decode_path, host):
    return host.load(decode_path)


@pytest.fixture
def args(rng):
    """Valid decode inputs: q, kv, block_table, seq_lens, scale."""
    kv, _, table, lens = reference.paged_cache(rng, [5, 11], PAGE,
                                               LATENT + ROPE, "bf16")
    q, _ = reference.random_input(rng, (2, 1, 3, LATENT + ROPE), "bf16")
    return [q, kv, table, lens, 0.3]


def raises(error, message, call, *args, **kwargs):
    with pytest.raises(error) as info:
        call(*args, **kwargs)
    assert str(info.value) == message
    return info.value


def test_valid_inputs_run(decode, args):
    decode.decode(*args)


def test_runtime_validation_names_the_argument(decode, args):
    q, kv, table, lens, scale = args
    e = raises(mla.InvalidArgumentError, "q: expected dtype bf16, got f32",
               decode.decode, q.astype(np.float32), kv, table, lens, scale)
    assert isinstance(e, ValueError) and e.status_name == "invalid argument"
    raises(mla.InvalidArgumentError, "kv: dim 2 is 47, expected 48",
           decode.decode, q, kv[:, :, :47].copy(), table, lens, scale)
    raises(mla.InvalidArgumentError, "block_table: expected rank 2, got 1",
           decode.decode, q, kv, table[0].copy(), lens, scale)
    bad = table.copy()
    bad[1, 2] = 999
    raises(mla.InvalidArgumentError,
           "block_table[1][2] = 999 is outside the page pool (kv has %d "
           "pages)" % kv.shape[0], decode.decode, q, kv, bad, lens, scale)
    width = table.shape[1]
    raises(mla.InvalidArgumentError,
           "seq_lens[0] = 99 exceeds the block table's capacity (%d pages x "
           "%d = %d tokens)" % (width, PAGE, width * PAGE), decode.decode, q,
           kv, table, np.array([99, 11], np.int32), scale)
    raises(mla.InvalidArgumentError,
           "lse: expected dtype f32, got bf16", decode.decode, *args,
           lse=np.zeros((2, 1, 3), np.uint16))
    raises(mla.InvalidArgumentError,
           "unknown role 'sinks' (kernel 'decode' has no such argument)",
           decode.decode, *args, sinks=np.zeros(3, np.float32))


def test_binding_checks_name_the_argument(decode, args):
    q, kv, table, lens, scale = args
    raises(mla.InvalidArgumentError,
           "q: numpy dtype <f8 is not an mla dtype (bf16: uint16, f16: "
           "float16, f32: float32, i32: int32, i64: int64; bf16 bits come "
           "from mla.to_bf16)", decode.decode, q.astype(np.float64), kv,
           table, lens, scale)
    raises(mla.InvalidArgumentError,
           "kv: the array is not C-contiguous (pass np.ascontiguousarray(kv))",
           decode.decode, q, np.asfortranarray(kv), table, lens, scale)
    raises(mla.InvalidArgumentError, "seq_lens: expected a numpy array, got "
           "list", decode.decode, q, kv, table, [5, 11], scale)
    raises(mla.InvalidArgumentError, "scale: expected a number, got str",
           decode.decode, q, kv, table, lens, "0.3")
    out = np.zeros((2, 1, 3, LATENT), np.uint16)
    out.flags.writeable = False
    raises(mla.InvalidArgumentError,
           "o: the array is read-only, and the kernel writes it",
           decode.decode, *args, out=out)
    with pytest.raises(TypeError, match="missing 1 required positional "
                       "argument: 'scale'"):
        decode.decode(q, kv, table, lens)
    with pytest.raises(TypeError, match="unexpected keyword argument 'o' "
                       r"\(pass the output o as out=\)"):
        decode.decode(*args, o=out)
    raises(mla.UnsupportedError, "prefill() needs a 'prefill' kernel, this "
           "one is 'decode'", decode.prefill, q, kv, kv, table, table, scale)


def test_devices_packages_and_closed_handles(decode, decode_path, host,
                                            tmp_path):
    raises(mla.UnsupportedError, "device 'tpu' is not available in this "
           "build (available: host, cuda, cuda:N, hip, hip:N, emu, "
           "emu:reverse, emu:random[:SEED], emu:check-orders[:SEED], auto)",
           mla.Device, "tpu")
    missing = str(tmp_path / "missing.mlapkg")
    e = raises(mla.FileError, missing + ": cannot open: No such file or "
               "directory", host.load, missing)
    assert isinstance(e, OSError)
    with pytest.raises(mla.InvalidPackageError):
        mla.Package(b"not a package at all")
    raises(mla.InvalidArgumentError, "the package has no target 'sm_90a'",
           mla.Kernel, host,
           mla.Package(_read(decode_path)), "sm_90a")
    kernel = host.load(_read(decode_path))
    kernel.close()
    raises(mla.InvalidArgumentError, "Kernel is closed", kernel.header_int,
           "heads")
    raises(mla.InvalidArgumentError,
           "mla_kernel_header_int: unknown key 'nope' (integer keys: heads, "
           "q_len, latent_dim, rope_dim, page_size, qk_dim, v_dim, causal, "
           "parts)", decode.header_int, "nope")


def test_page_pool_and_dtype_helpers():
    pool = mla.PagePool(num_pages=2, page_size=4)
    pool.append_tokens(1, 8)
    raises(mla.InvalidArgumentError, "page pool: the pool is exhausted: "
           "request 2 needs 1 more pages for 1 tokens, 0 of 2 are free",
           pool.append_tokens, 2, 1)
    raises(mla.InvalidArgumentError, "page pool: numPages is 0, must be at "
           "least 1", mla.PagePool, 0, 4)
    raises(mla.InvalidArgumentError, "from_bf16: expected uint16 bf16 bits, "
           "got numpy dtype float32", mla.from_bf16, np.zeros(2, np.float32))
    raises(mla.InvalidArgumentError, "unknown mla dtype 'bf8' (known: bf16, "
           "f16, f32, i32, i64)", mla.numpy_dtype, "bf8")
    bits = mla.to_bf16([1.0, -2.5, 3.14159, np.nan])
    assert bits.dtype == np.uint16 and bits[0] == 0x3F80
    back = mla.from_bf16(bits)
    assert back[1] == -2.5 and abs(back[2] - 3.14159) < 2e-2
    assert np.isnan(back[3])


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def test_other_kinds_name_the_argument(compile_package, host, rng):
    prefill = host.load(compile_package("prefill", heads=3, qk_dim=32,
                                        v_dim=16, causal=True, dtype="bf16"))
    q, _ = reference.random_input(rng, (6, 3, 32), "bf16")
    v, _ = reference.random_input(rng, (6, 3, 16), "bf16")
    cu = np.array([0, 2, 6], np.int32)
    raises(mla.InvalidArgumentError,
           "cu_seqlens_k[2] = 5, expected 6 (the last offset is the number "
           "of key rows, k dim 0)", prefill.prefill, q, q, v, cu,
           np.array([0, 2, 5], np.int32), 0.3)
    raises(mla.InvalidArgumentError, "v: dim 0 is 5, expected 6 (key rows, k "
           "dim 0)", prefill.prefill, q, q, v[:5].copy(), cu, cu, 0.3)

    merge = host.load(compile_package("merge", heads=3, v_dim=16, parts=3,
                                      dtype="f32"))
    o_parts = np.zeros((2, 4, 3, 16), np.float32)
    raises(mla.InvalidArgumentError, "o_parts: dim 0 is 2, expected 3",
           merge.merge, o_parts, np.zeros((2, 3, 4), np.float32))

    append = host.load(compile_package("append_kv", latent_dim=32,
                                       rope_dim=16, page_size=4,
                                       dtype="bf16"))
    kv = np.zeros((6, 4, 48), np.uint16)
    rows = np.zeros((2, 48), np.uint16)
    raises(mla.InvalidArgumentError, "slot_mapping[1] = 24 is outside the "
           "page pool (kv has 6 pages x 4 = 24 slots)", append.append_kv,
           rows, np.array([3, 24], np.int32), kv)
    kv.flags.writeable = False
    raises(mla.InvalidArgumentError, "kv: the array is read-only, and the "
           "kernel writes it", append.append_kv, rows,
           np.array([3, 4], np.int32), kv)
