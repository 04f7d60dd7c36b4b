"""torch tensors on a CUDA device (ctest python.cuda, label cuda): the
launchers on torch tensors, __cuda_array_interface__ and DLPack arrays and
streams; the torch ops against float64; CUDA-graph capture and replay
with changed lengths, block tables and slots; torch.compile (also
mode="reduce-overhead"); mla.vllm on CUDA tensors; mla.flashmla on
FlashMLA's dense-decode test grid with FlashMLA's comparison
(kernelkit/compare.py of its tests when found: $MLA_FLASHMLA_TESTS,
.peers/FlashMLA/tests, ../shared/peers/FlashMLA/tests; else
reference.flashmla_close, the same criteria); beside FlashMLA's own kernel
when $MLA_FLASHMLA_SO names its built extension (the peers kit's
flashmla_dense_sm90.so), skipped otherwise.

Skips with a message without torch or a CUDA device. Packages: mla.find_
package, i.e. $MLA_PACKAGE_DIR (gpu_packages.py writes them) or
mla-compile.
"""

import importlib.util
import os
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)
if getattr(torch.version, "hip", None):
    pytest.skip("a ROCm torch: these tests are CUDA's", allow_module_level=True)

import mla  # noqa: E402
import mla.torch  # noqa: E402,F401
from mla import flashmla  # noqa: E402
from mla import vllm as mla_vllm  # noqa: E402
import gpu_packages  # noqa: E402
import reference  # noqa: E402

LATENT, ROPE, DIM = 512, 64, 576
CUDA = torch.device("cuda", torch.cuda.current_device())
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def device():
    return mla.Device("cuda:%d" % CUDA.index)


def kernel(device, kind="decode", **flags):
    return mla.load_kernel(device, kind, **flags)


def ref_decode(q, kv, table, lens, scale, dv=LATENT, causal=True, cap=None):
    """float64 decode on the GPU: q [B, Sq, H, D], kv [pages, P, D] ->
    o [B, Sq, H, dv], lse [B, Sq, H] (natural log, -inf without keys);
    cap: scores soft-capped to cap * tanh(score / cap)."""
    batch, q_len, heads, dim = q.shape
    page_size = kv.shape[1]
    q64 = q.double()
    o = torch.zeros(batch, q_len, heads, dv, dtype=torch.float64,
                    device=q.device)
    lse = torch.full((batch, q_len, heads), float("-inf"),
                     dtype=torch.float64, device=q.device)
    lengths, table = lens.cpu().tolist(), table.cpu()
    for b, length in enumerate(lengths):
        if length == 0:
            continue
        pages = table[b, :-(-length // page_size)].long().to(q.device)
        rows = kv[pages].reshape(-1, dim)[:length].double()
        scores = torch.einsum("shd,ld->shl", q64[b], rows) * scale
        if cap is not None:
            scores = cap * torch.tanh(scores / cap)
        limit = torch.full((q_len,), length, device=q.device)
        if causal:
            limit = length - q_len + torch.arange(q_len, device=q.device) + 1
        keys = torch.arange(length, device=q.device)
        visible = keys[None, :] < limit[:, None]  # [Sq, L]
        scores = scores.masked_fill(~visible[:, None, :], float("-inf"))
        row_lse = torch.logsumexp(scores, dim=-1)
        weights = torch.exp(scores - row_lse[..., None]).nan_to_num(0.0)
        o[b] = weights @ rows[:, :dv]
        lse[b] = row_lse
    return o, lse


def paged(rng, lengths, page_size, pages_extra=3, heads=16, q_len=1):
    """A random paged cache on the GPU: q, kv, block_table, seq_lens."""
    needs = [-(-n // page_size) for n in lengths]
    num_pages = sum(needs) + pages_extra
    order = rng.permutation(num_pages)
    table = np.zeros((len(lengths), max(needs + [1]) + 1), np.int32)
    start = 0
    for b, need in enumerate(needs):
        table[b, :need] = order[start:start + need]
        start += need
    kv = torch.randn(num_pages, page_size, DIM, device=CUDA).bfloat16()
    q = torch.randn(len(lengths), q_len, heads, DIM, device=CUDA).bfloat16()
    return (q, kv, torch.from_numpy(table).to(CUDA),
            torch.tensor(lengths, dtype=torch.int32, device=CUDA))


def assert_close(o, lse, ref_o, ref_lse):
    np.testing.assert_allclose(o.double().cpu().numpy(),
                               ref_o.cpu().numpy(), atol=2e-2, rtol=0)
    np.testing.assert_allclose(lse.double().cpu().numpy(),
                               ref_lse.cpu().numpy(), atol=1e-3, rtol=0)


# -- the launchers on GPU arrays ------------------------------------------


def test_rank_zero_variant_input_on_cuda(device):
    """A variant input of rank 0 (decode_softcap_input.mlir's `cap`) as a
    torch tensor of shape (), two values, each against its reference."""
    rng = np.random.default_rng(11)
    k = mla.load_kernel(device, source=gpu_packages.sources()[0])
    q, kv, table, lens = paged(rng, [5, 70, 0], 64)
    for cap in (12.5, 3.0):
        o, lse = k.decode(q, kv, table, lens, 0.5,
                          cap=torch.tensor(cap, device=CUDA))
        assert_close(o, lse, *ref_decode(q, kv, table, lens, 0.5, cap=cap))


@pytest.mark.parametrize("validate", [True, "shapes", False])
def test_decode_on_torch_tensors(device, validate):
    rng = np.random.default_rng(1)
    k = kernel(device, heads=16, page_size=64, q_len=2)
    q, kv, table, lens = paged(rng, [70, 0, 129, 2], 64, q_len=2)
    o, lse = k.decode(q, kv, table, lens, 0.1, validate=validate)
    assert o.device == CUDA and o.dtype == torch.bfloat16
    assert lse.shape == (4, 2, 16) and lse.dtype == torch.float32
    assert_close(o, lse, *ref_decode(q, kv, table, lens, 0.1))
    _, bhs = k.decode(q, kv, table, lens, 0.1, lse_layout="bhs")
    assert bhs.shape == (4, 16, 2) and bhs.is_contiguous()
    torch.testing.assert_close(bhs, lse.transpose(1, 2))


def test_streams_and_content_checks(device):
    rng = np.random.default_rng(2)
    k = kernel(device, heads=16, page_size=64, q_len=1)
    q, kv, table, lens = paged(rng, [300, 5], 64)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # torch's current stream
        o, lse = k.decode(q, kv, table, lens, 0.1)
    side.synchronize()
    assert_close(o, lse, *ref_decode(q, kv, table, lens, 0.1))
    o2, lse2 = k.decode(q, kv, table, lens, 0.1, stream=side)  # stream=
    side.synchronize()
    torch.testing.assert_close(o2, o)
    bad = lens.clone()
    bad[1] = 10 ** 6
    with pytest.raises(mla.InvalidArgumentError, match=r"seq_lens\[1\] = "
                       "1000000 exceeds the block table's capacity"):
        k.decode(q, kv, table, bad, 0.1)  # validate=True copies to host
    with pytest.raises(mla.InvalidArgumentError, match="q: a numpy array is "
                       "host memory"):
        k.decode(q.cpu().view(torch.int16).numpy(), kv, table, lens, 0.1)
    with pytest.raises(mla.InvalidArgumentError, match="kv: host memory"):
        k.decode(q, kv.cpu(), table, lens, 0.1)


class CAI:
    def __init__(self, tensor):
        self._t = tensor
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__ \
            if tensor.dtype != torch.bfloat16 else dict(
                tensor.view(torch.int16).__cuda_array_interface__,
                typestr="<u2")


class DLPack:
    def __init__(self, tensor):
        self._t = tensor

    def __dlpack__(self, stream=None):
        return self._t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


@pytest.mark.parametrize("wrap", [CAI, DLPack])
def test_cuda_array_interface_and_dlpack(device, wrap):
    rng = np.random.default_rng(3)
    k = kernel(device, heads=16, page_size=64, q_len=1)
    q, kv, table, lens = paged(rng, [64, 1, 200], 64)
    o, lse = k.decode(q, kv, table, lens, 0.1)
    out, lse_out = torch.empty_like(o), torch.empty_like(lse)
    k.decode(wrap(q), wrap(kv), wrap(table), wrap(lens), 0.1,
             out=wrap(out), lse=wrap(lse_out))
    torch.cuda.synchronize()
    torch.testing.assert_close(out, o, rtol=0, atol=0)
    torch.testing.assert_close(lse_out, lse, rtol=0, atol=0)


def test_append_kv_int64_slots(device):
    k = kernel(device, "append_kv", page_size=16)
    kv = torch.zeros(10, 16, DIM, device=CUDA).bfloat16()
    rows = torch.randn(5, DIM, device=CUDA).bfloat16()
    slots = torch.tensor([3, -1, 159, 17, 40], dtype=torch.int64,
                         device=CUDA)
    for validate in (True, "shapes"):
        kv.zero_()
        assert k.append_kv(rows, slots, kv, validate=validate) is kv
        flat = kv.view(-1, DIM)
        for t, slot in enumerate(slots.tolist()):
            if slot >= 0:
                torch.testing.assert_close(flat[slot], rows[t], rtol=0,
                                           atol=0)
        assert flat.abs().sum(-1).nonzero().numel() == 4
    with pytest.raises(mla.InvalidArgumentError, match=r"slot_mapping\[0\] = "
                       r"4294967296 is outside the int32 range"):
        k.append_kv(rows[:1], slots[:1] + 2 ** 32 - 3, kv)


# -- torch ops, CUDA graphs, torch.compile ----------------------------------


def test_torch_ops(device):
    rng = np.random.default_rng(4)
    dec = kernel(device, heads=16, page_size=64, q_len=1)
    app = kernel(device, "append_kv", page_size=64)
    q, kv, table, lens = paged(rng, [100, 30], 64)
    # One new token per request, at positions 100 and 30.
    rows = torch.randn(2, DIM, device=CUDA).bfloat16()
    slots = torch.tensor([int(table[b, p // 64]) * 64 + p % 64
                          for b, p in enumerate([100, 30])],
                         dtype=torch.int64, device=CUDA)
    assert mla.torch.append_kv(app, rows, slots, kv) is kv
    torch.testing.assert_close(kv.view(-1, DIM)[slots], rows, rtol=0, atol=0)
    lens = lens + 1
    o, lse = mla.torch.decode(dec, q, kv, table, lens, 0.1)
    assert_close(o, lse, *ref_decode(q, kv, table, lens, 0.1))
    o2, lse2 = torch.ops.mla.decode(q, kv, table, lens, 0.1,
                                    mla.torch.register(dec), "bhs")
    torch.testing.assert_close(o2, o, rtol=0, atol=0)
    torch.testing.assert_close(lse2, lse.transpose(1, 2), rtol=0, atol=0)


def test_cuda_graph_replay_with_changed_lengths(device):
    rng = np.random.default_rng(5)
    dec = kernel(device, heads=16, page_size=64, q_len=2)
    app = kernel(device, "append_kv", page_size=64)
    q, kv, table, lens = paged(rng, [130, 64, 9], 64, pages_extra=12,
                               q_len=2)
    rows = torch.randn(3, DIM, device=CUDA).bfloat16()
    slots = torch.zeros(3, dtype=torch.int64, device=CUDA)
    dkey, akey = mla.torch.register(dec), mla.torch.register(app)

    def step():
        torch.ops.mla.append_kv(rows, slots, kv, akey)
        return torch.ops.mla.decode(q, kv, table, lens, 0.1, dkey)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up, as torch.cuda.graph wants
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o, lse = step()
    for lengths, slot_values in (([131, 64, 10], [130, -1, 9]),
                                 ([40, 200, 1], [-1, 199, 0]),
                                 ([0, 3, 190], [-1, -1, 189])):
        # New lengths, new pages for the grown requests, new slots.
        new_table = table.clone()
        grown = torch.from_numpy(rng.permutation(kv.shape[0])[:12].astype(
            np.int32)).to(CUDA).view(3, 4)
        new_table[:, :4] = grown
        table.copy_(new_table)
        lens.copy_(torch.tensor(lengths, dtype=torch.int32))
        pages = new_table.long()
        slots.copy_(torch.tensor([
            -1 if s < 0 else int(pages[b, s // 64]) * 64 + s % 64
            for b, s in enumerate(slot_values)]))
        rows.copy_(torch.randn(3, DIM, device=CUDA).bfloat16())
        graph.replay()
        torch.cuda.synchronize()
        flat = kv.view(-1, DIM)
        for t, s in enumerate(slots.tolist()):
            if s >= 0:
                torch.testing.assert_close(flat[s], rows[t], rtol=0, atol=0)
        assert_close(o, lse, *ref_decode(q, kv, table, lens, 0.1))


def test_torch_compile(device):
    rng = np.random.default_rng(6)
    dec = kernel(device, heads=16, page_size=64, q_len=1)
    app = kernel(device, "append_kv", page_size=64)
    dkey, akey = mla.torch.register(dec), mla.torch.register(app)

    def f(q, kv, table, lens, rows, slots):
        torch.ops.mla.append_kv(rows, slots, kv, akey)
        o, lse = torch.ops.mla.decode(q * 1.0, kv, table, lens, 0.1, dkey)
        return o.float() * 2, lse + 1

    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    for lengths in ([65, 3], [10, 200, 7, 1]):
        q, kv, table, lens = paged(rng, lengths, 64)
        rows = torch.randn(len(lengths), DIM, device=CUDA).bfloat16()
        slots = torch.full((len(lengths),), -1, dtype=torch.int64,
                           device=CUDA)
        kv_eager = kv.clone()
        want = f(q, kv_eager, table, lens, rows, slots)
        got = compiled(q, kv, table, lens, rows, slots)
        torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
        torch.testing.assert_close(got[1], want[1], rtol=0, atol=0)
        ref_o, ref_lse = ref_decode(q, kv, table, lens, 0.1)
        assert_close(got[0] / 2, got[1] - 1, ref_o, ref_lse)


def test_torch_compile_reduce_overhead(device):
    # CUDA-graph trees check that every live allocation of their pool is an
    # output: the ops take a fresh workspace per launch (fresh_workspaces),
    # never the kernel's cached one, which failed that check (H200,
    # 2026-12-01, torch 2.11).
    rng = np.random.default_rng(7)
    dec = kernel(device, heads=16, page_size=64, q_len=1)
    key = mla.torch.register(dec)
    compiled = torch.compile(
        lambda q, kv, t, n: torch.ops.mla.decode(q, kv, t, n, 0.1, key),
        mode="reduce-overhead")
    q, kv, table, lens = paged(rng, [100, 30, 7], 64, pages_extra=0)
    cached = dict(dec._torch_workspaces)
    for lengths in ([100, 30, 7], [50, 64, 1], [0, 5, 128]):
        lens.copy_(torch.tensor(lengths, dtype=torch.int32))
        for _ in range(3):  # warm-up, record, replay
            o, lse = compiled(q, kv, table, lens)
        assert_close(o, lse, *ref_decode(q, kv, table, lens, 0.1))
    assert dec._torch_workspaces == cached  # the ops cached none


def test_vllm_methods_on_cuda(device):
    rng = np.random.default_rng(8)
    impl = type("Impl", (mla_vllm.MlaDecodeMethods,), {})()
    impl.num_heads, impl.kv_lora_rank, impl.qk_rope_head_dim = 16, LATENT, \
        ROPE
    impl.scale, impl.kv_cache_dtype = 0.1, "auto"
    q, kv, table, lens = paged(rng, [33, 64], 16, pages_extra=4, q_len=2)
    # The last token of each request written as vLLM does: inputs padded
    # to 3 rows, 2 int64 slots.
    kv_c = torch.randn(3, LATENT, device=CUDA).bfloat16()
    k_pe = torch.randn(3, 1, ROPE, device=CUDA).bfloat16()
    slots = torch.tensor([int(table[0, 2]) * 16, int(table[1, 3]) * 16 + 15],
                         dtype=torch.int64, device=CUDA)
    impl.do_kv_cache_update(kv_c, k_pe, kv, slots, "auto", None)
    flat = kv.view(-1, DIM)
    torch.testing.assert_close(flat[slots, :LATENT], kv_c[:2], rtol=0, atol=0)
    torch.testing.assert_close(flat[slots, LATENT:], k_pe[:2, 0], rtol=0,
                               atol=0)
    meta = types.SimpleNamespace(
        num_decodes=2, num_decode_tokens=4,
        decode=types.SimpleNamespace(block_table=table, seq_lens=lens))
    split = (q[..., :LATENT].reshape(4, 16, LATENT),
             q[..., LATENT:].reshape(4, 16, ROPE))
    o, lse = impl.forward_mqa(split, kv, meta, None)
    ref_o, ref_lse = ref_decode(q, kv, table, lens, 0.1)
    assert o.shape == (4, 16, LATENT) and lse.shape == (4, 16)
    assert_close(o.view(2, 2, 16, LATENT), lse.view(2, 2, 16), ref_o, ref_lse)


# -- mla.flashmla on FlashMLA's dense-decode test grid ----------------------


def _flashmla_compare():
    """FlashMLA's tests' check_is_allclose (kernelkit/compare.py), or None
    when its tests are not here."""
    candidates = [os.environ.get("MLA_FLASHMLA_TESTS"),
                  os.path.join(ROOT, ".peers", "FlashMLA", "tests"),
                  os.path.join(ROOT, "..", "shared", "peers", "FlashMLA",
                               "tests"),
                  os.path.join(ROOT, "shared", "peers", "FlashMLA", "tests")]
    for folder in filter(None, candidates):
        path = os.path.join(folder, "kernelkit", "compare.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location(
                "flashmla_kernelkit_compare", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module.check_is_allclose
    return None


CHECK = _flashmla_compare()


def _close(name, ans, ref, abs_tol, rel_tol, cos_diff_tol=1e-7):
    """FlashMLA's check (its default cos_diff_tol is 1e-7)."""
    if CHECK is not None:
        return CHECK(name, ans, ref, abs_tol=abs_tol, rel_tol=rel_tol,
                     cos_diff_tol=cos_diff_tol), \
            "(kernelkit printed the mismatch)"
    return reference.flashmla_close(ans.float().cpu().numpy(),
                                    ref.float().cpu().numpy(), abs_tol,
                                    rel_tol, cos_diff_tol)


def _grid():
    cases = []
    for b in (1, 2, 6, 64):
        for s_q in gpu_packages.FLASHMLA_Q_LENS:
            for s_k in (20, 140, 4096):
                for h_q in gpu_packages.FLASHMLA_HEADS:
                    for varlen in (False, True):
                        for causal in (False, True):
                            cases.append((b, s_q, s_k, h_q, varlen, causal,
                                          False))
    for h_q in gpu_packages.FLASHMLA_HEADS:  # some lengths 0
        for causal in (False, True):
            cases.append((128, 2, 4096, h_q, True, causal, True))
    return cases


def _flashmla_inputs(b, s_q, s_k, h_q, varlen, zero, seed):
    """FlashMLA's dense-decode test data (its generator's rules, h_kv 1,
    block 64): bf16 N(0,1)/10 clamped to [-1, 1], NaN past every length,
    unused block-table entries 2147480000."""
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device=CUDA).manual_seed(seed)
    lengths = np.full(b, s_k)
    if varlen:
        lengths = np.maximum(rng.normal(s_k, s_k / 2, b), s_q).astype(int)
    if zero:
        lengths[rng.standard_normal(b) > 0] = 0
    padded = -(-max(int(lengths.max()), 1) // 256) * 256
    width = padded // 64
    table = torch.from_numpy(rng.permutation(b * width).astype(np.int32)
                             ).view(b, width)
    q = (torch.randn(b, s_q, h_q, DIM, generator=gen, device=CUDA) / 10
         ).clamp(-1, 1).bfloat16()
    k = (torch.randn(b * width, 64, 1, DIM, generator=gen, device=CUDA) / 10
         ).clamp(-1, 1).bfloat16()
    for i, length in enumerate(lengths.tolist()):
        used = -(-length // 64)
        k[table[i, used:].long().to(CUDA)] = float("nan")
        if length % 64:
            k[int(table[i, used - 1]), length % 64:] = float("nan")
        table[i, used:] = 2147480000
    return (q, k, table.to(CUDA),
            torch.tensor(lengths, dtype=torch.int32, device=CUDA))


def _check_flashmla(out, lse, q, k_cache, table, lens, causal, what=""):
    """out and lse of mla.flashmla against ref_decode, compared as FlashMLA
    compares (FlashMLA's lse: +inf where a query sees no key)."""
    ref_o, ref_lse = ref_decode(q, k_cache.view(-1, 64, DIM).nan_to_num(0.0),
                                table.clamp(max=k_cache.shape[0] - 1), lens,
                                DIM ** -0.5, causal=causal)
    ref_lse = ref_lse.masked_fill(ref_lse == float("-inf"), float("inf"))
    ok, why = _close("out", out, ref_o.bfloat16(), 8e-4, 2.01 / 128, 5e-6)
    assert ok, "out" + what + ": " + why
    ok, why = _close("lse", lse, ref_lse.transpose(1, 2).float(), 1e-6,
                     8.01 / 65536)
    assert ok, "lse" + what + ": " + why


@pytest.mark.parametrize("b,s_q,s_k,h_q,varlen,causal,zero", _grid())
def test_flashmla_grid(b, s_q, s_k, h_q, varlen, causal, zero):
    q, k_cache, table, lens = _flashmla_inputs(b, s_q, s_k, h_q, varlen, zero,
                                               seed=b * 7 + s_q * 3 + h_q)
    meta, splits = flashmla.get_mla_metadata(lens, s_q * h_q, 1)
    out, lse = flashmla.flash_mla_with_kvcache(q, k_cache, table, lens,
                                               LATENT, meta, splits,
                                               causal=causal)
    assert out.shape == (b, s_q, h_q, LATENT) and out.dtype == torch.bfloat16
    assert lse.shape == (b, h_q, s_q) and lse.dtype == torch.float32
    _check_flashmla(out, lse, q, k_cache, table, lens, causal or s_q == 1)


@pytest.mark.parametrize("meta_in_capture", [True, False])
def test_flashmla_in_a_cuda_graph(meta_in_capture):
    """A decode step in a CUDA graph, replayed with other lengths: a
    metadata object serves one step's lengths (as FlashMLA's), and the
    step's first layer computes the plan in the graph (a node recomputed at
    each replay), the second reuses it. With the metadata taken inside the
    captured region that is the first call's plan; with one filled by the
    warm-up before the capture, mla.flashmla sees the capture begin and
    records a plan of its own (a plan computed outside the graph would hold
    the warm-up's lengths at every replay)."""
    q, k_cache, table, lens = _flashmla_inputs(8, 2, 300, 16, True, False, 9)
    q2 = (q.float() * -0.5).bfloat16()
    shared, _ = flashmla.get_mla_metadata()

    def step():
        meta = flashmla.get_mla_metadata()[0] if meta_in_capture else shared
        return [flashmla.flash_mla_with_kvcache(x, k_cache, table, lens,
                                                LATENT, meta, causal=False)
                for x in (q, q2)]

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        layers = step()
    original = lens.clone()
    # Shorter lengths (some 0), then the original ones again: a plan left
    # from the shorter lengths would miss the longer ones' last tiles.
    for new_lens in (torch.clamp(original - 100, min=0), original):
        lens.copy_(new_lens)
        graph.replay()
        torch.cuda.synchronize()
        for x, (out, lse) in zip((q, q2), layers):
            _check_flashmla(out, lse, x, k_cache, table, lens, False,
                            f" (lengths {lens.tolist()})")


def test_flashmla_lengths_written_in_place_plan_again():
    """Eager calls: lengths written in place through torch (its version
    counter) after a metadata object's plan take a new plan, not the
    stale one."""
    q, k_cache, table, lens = _flashmla_inputs(8, 1, 300, 16, True, False, 11)
    meta, _ = flashmla.get_mla_metadata()
    flashmla.flash_mla_with_kvcache(q, k_cache, table, lens, LATENT, meta)
    first = meta.decode_plan
    lens.sub_(100).clamp_(min=0)
    out, lse = flashmla.flash_mla_with_kvcache(q, k_cache, table, lens, LATENT,
                                               meta)
    torch.cuda.synchronize()
    assert meta.decode_plan is not first
    _check_flashmla(out, lse, q, k_cache, table, lens, False)


def _flashmla_itself():
    """FlashMLA's own interface on its sm90 dense-decode extension, when
    $MLA_FLASHMLA_SO names one (the peers kit's run-on-gpu builds
    flashmla_dense_sm90.so) and FlashMLA's flash_mla/ folder is found
    ($MLA_FLASHMLA_SRC, .peers/FlashMLA, ../shared/peers/FlashMLA)."""
    so = os.environ.get("MLA_FLASHMLA_SO")
    if not so or not os.path.isfile(so):
        pytest.skip("MLA_FLASHMLA_SO is not set to FlashMLA's built "
                    "extension (flashmla_dense_sm90.so of the peers kit)")
    for src in filter(None, [os.environ.get("MLA_FLASHMLA_SRC"),
                             os.path.join(ROOT, ".peers", "FlashMLA"),
                             os.path.join(ROOT, "..", "shared", "peers",
                                          "FlashMLA")]):
        if os.path.isfile(os.path.join(src, "flash_mla", "__init__.py")):
            break
    else:
        pytest.skip("FlashMLA's flash_mla/ folder not found (MLA_FLASHMLA_SRC)")
    import sys
    spec = importlib.util.spec_from_file_location("flashmla_dense_sm90", so)
    extension = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extension)
    sys.modules["flash_mla.cuda"] = extension
    sys.path.insert(0, src)
    import flash_mla
    return flash_mla


@pytest.mark.parametrize("b,s_q,h_q,causal", [(64, 1, 16, False),
                                              (64, 2, 16, True),
                                              (32, 1, 128, False),
                                              (32, 2, 128, True),
                                              (128, 2, 64, False)])
def test_beside_flashmla(b, s_q, h_q, causal):
    flash_mla = _flashmla_itself()
    q, k_cache, table, lens = _flashmla_inputs(b, s_q, 4096, h_q, True, False,
                                               seed=b + h_q)
    theirs = flash_mla.flash_mla_with_kvcache(
        q, k_cache, table, lens, LATENT, flash_mla.get_mla_metadata()[0],
        None, causal=causal)
    ours = flashmla.flash_mla_with_kvcache(
        q, k_cache, table, lens, LATENT, flashmla.get_mla_metadata()[0], None,
        causal=causal)
    ok, why = _close("out", ours[0], theirs[0], 8e-4, 2.01 / 128, 5e-6)
    assert ok, "out vs FlashMLA: " + why
    # Two approximations of one lse: twice FlashMLA's tolerance to its
    # reference.
    ok, why = _close("lse", ours[1], theirs[1], 2e-6, 2 * 8.01 / 65536)
    assert ok, "lse vs FlashMLA: " + why
