"""Decode through mla.Kernel.decode against the float64 reference: page
sizes 1, 3, 16, 64 and one chosen at run time, ragged lengths (0 included),
odd head counts, MTP, bf16 and f32, caller outputs, and the AMD emulator."""

import os
import subprocess

import numpy as np
import pytest

import mla
import reference

LATENT, ROPE = 32, 16
TOLERANCE = {"bf16": 2e-2, "f32": 1e-4}


def run_decode(kernel, rng, lengths, page_size, heads, q_len, dtype,
               scale=0.3, **kwargs):
    row = LATENT + ROPE
    kv, kv64, table, lens = reference.paged_cache(rng, lengths, page_size,
                                                  row, dtype)
    q, q64 = reference.random_input(rng, (len(lengths), q_len, heads, row),
                                    dtype)
    o, lse = kernel.decode(q, kv, table, lens, scale, **kwargs)
    ref_o, ref_lse = reference.decode(q64, kv64, table, lens, scale, LATENT)
    assert o.shape == ref_o.shape and lse.shape == ref_lse.shape
    assert o.dtype == mla.numpy_dtype(dtype) and lse.dtype == np.float32
    np.testing.assert_allclose(reference.as_float(o, dtype), ref_o,
                               atol=TOLERANCE[dtype], rtol=0)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-3, rtol=0)
    return o, lse


@pytest.mark.parametrize("page_size", [1, 3, 16, 64])
def test_page_sizes(compile_package, host, rng, page_size):
    path = compile_package("decode", heads=3, latent_dim=LATENT,
                           rope_dim=ROPE, page_size=page_size, q_len=1,
                           dtype="bf16")
    kernel = host.load(path)
    assert (kernel.kind, kernel.target) == ("decode", "host-x86_64")
    assert kernel.args["q"].shape == (None, 1, 3, LATENT + ROPE)
    o, lse = run_decode(kernel, rng, [0, 1, 37, 130], page_size, 3, 1,
                        "bf16")
    # An empty sequence: o = 0, lse = -inf.
    assert not reference.as_float(o, "bf16")[0].any()
    assert np.isneginf(lse[0]).all()


def test_mtp_f32_five_heads(compile_package, host, rng):
    path = compile_package("decode", heads=5, latent_dim=LATENT,
                           rope_dim=ROPE, page_size=16, q_len=2, dtype="f32")
    run_decode(host.load(path), rng, [2, 45, 17], 16, 5, 2, "f32", scale=0.2)


def test_page_size_chosen_at_run_time(compile_package, host, rng):
    path = compile_package("decode", heads=3, latent_dim=LATENT,
                           rope_dim=ROPE, page_size=0, q_len=1, dtype="bf16")
    kernel = host.load(path)
    assert kernel.header_int("page_size") == 0
    for page_size in (5, 64):
        run_decode(kernel, rng, [70, 3], page_size, 3, 1, "bf16")


def test_caller_outputs_and_skipped_validation(compile_package, host, rng):
    path = compile_package("decode", heads=3, latent_dim=LATENT,
                           rope_dim=ROPE, page_size=16, q_len=1, dtype="bf16")
    kernel = host.load(path)
    out = np.full((2, 1, 3, LATENT), 7, np.uint16)
    lse = np.full((2, 1, 3), 7, np.float32)
    o2, lse2 = run_decode(kernel, rng, [9, 33], 16, 3, 1, "bf16", out=out,
                          lse=lse, validate=False)
    assert o2 is out and lse2 is lse


def test_plan_shared_by_the_layers_of_a_step(compile_package, host, rng):
    """mla.DecodePlan: the first layer computes the length-aware schedule's
    plan, the later ones (other q, cache and table, the same lengths) skip
    the plan launch and still match the float64 reference."""
    path = compile_package("decode", heads=3, latent_dim=LATENT,
                           rope_dim=ROPE, page_size=16, q_len=1, dtype="bf16",
                           perf_config="kv_chunks=6")
    kernel = host.load(path)
    assert kernel.plan_launches == 1
    lengths = [0, 1, 300, 47, 129]
    plan = mla.DecodePlan()
    for layer in range(3):
        run_decode(kernel, rng, lengths, 16, 3, 1, "bf16", plan=plan)
        assert plan.ready
    # Other shapes (a longer batch) with the same plan are refused.
    with pytest.raises(mla.InvalidArgumentError, match="other argument shapes"):
        run_decode(kernel, rng, lengths + [5], 16, 3, 1, "bf16", plan=plan)
    # A plan marked computed whose workspace holds none (zeros: no chunks):
    # the plan launch is skipped, so every request merges nothing.
    empty = mla.DecodePlan()
    empty.ready = True
    with pytest.raises(AssertionError):
        run_decode(kernel, rng, lengths, 16, 3, 1, "bf16", plan=empty)
    assert empty.workspace is not None and not empty.workspace.any()
    with pytest.raises(mla.InvalidArgumentError, match="mla.DecodePlan"):
        run_decode(kernel, rng, lengths, 16, 3, 1, "bf16", plan=object())
    # Fixed split-KV has no plan: a DecodePlan changes nothing.
    fixed = host.load(compile_package(
        "decode", heads=3, latent_dim=LATENT, rope_dim=ROPE, page_size=16,
        q_len=1, dtype="bf16", perf_config="kv_chunks=0,kv_splits=2"))
    assert fixed.plan_launches == 0
    shared = mla.DecodePlan()
    for layer in range(2):
        run_decode(fixed, rng, lengths, 16, 3, 1, "bf16", plan=shared)


def test_emulator(compile_package, rng):
    path = compile_package("decode", heads=3, latent_dim=LATENT,
                           rope_dim=ROPE, page_size=3, q_len=1, dtype="bf16",
                           target="gfx942-emu")
    emu = mla.Device("emu", threads=2)
    assert emu.uses_host_memory
    kernel = emu.load(path)
    assert kernel.target == "gfx942-emu"
    run_decode(kernel, rng, [4, 29, 0], 3, 3, 1, "bf16")


def test_rank_zero_variant_input(tmp_path, rng):
    """A variant whose constant is a rank-0 input (the soft-capping bound of
    test/e2e/variants/decode_softcap_input.mlir): a 0-d array or, on the
    host, a plain number; each cap against its own float64 reference."""
    source = os.path.join(os.path.dirname(__file__), "..", "e2e", "variants",
                          "decode_softcap_input.mlir")
    path = str(tmp_path / "cap.mlapkg")
    subprocess.run([os.environ["MLA_COMPILE"], source, "--target=host",
                    "-o", path], check=True)
    kernel = mla.Device("host").load(path)
    assert kernel.args["cap"].shape == () and not kernel.args["cap"].is_scalar
    row = 576
    kv, kv64, table, lens = reference.paged_cache(rng, [5, 70, 0], 64, row,
                                                  "bf16")
    q, q64 = reference.random_input(rng, (3, 1, 16, row), "bf16")
    for cap in (np.float32(7.5), np.array(3.0, np.float32), 20.0):
        o, lse = kernel.decode(q, kv, table, lens, 0.5, cap=cap)
        ref_o, ref_lse = reference.decode(q64, kv64, table, lens, 0.5, 512,
                                          cap=float(cap))
        np.testing.assert_allclose(reference.as_float(o, "bf16"), ref_o,
                                   atol=2e-2, rtol=0)
        np.testing.assert_allclose(lse, ref_lse, atol=1e-3, rtol=0)
    with pytest.raises(mla.InvalidArgumentError,
                       match="cap: expected rank 0, got 1"):
        kernel.decode(q, kv, table, lens, 0.5, cap=np.ones(1, np.float32))
