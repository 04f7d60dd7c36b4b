"""Launch overhead from Python: host microseconds per decode call.

    PYTHONPATH=runtime/python MLA_RUNTIME_LIBRARY=build/lib/libmla_runtime.so.1 \\
      python3 test/python/bench_overhead.py [--device host|cuda] [--json FILE]

Each row times N calls in a row with time.perf_counter (median of
--repeats runs of --iters calls) on a tiny decode (batch 1, one page, so
that the kernel's own time stays below the host's; on the host device the
kernel runs inside the call, so the raw C launch row is the floor the
Python rows add to):

  c_api          mla_launch through ctypes on prebuilt arguments
                 (skip_validation): the C API's cost
  decode/False   Kernel.decode(..., validate=False)
  decode/shapes  Kernel.decode(..., validate="shapes")
  decode/True    Kernel.decode(...) (GPU: index inputs copied to the host)
  binding        Kernel.decode(..., validate=False) with mla_launch itself
                 replaced by a no-op: the Python package's own work
and, with torch on a CUDA device:
  torch_op       torch.ops.mla.decode (eager)
  flashmla       mla.flashmla.flash_mla_with_kvcache
  graph/1        torch.cuda.CUDAGraph.replay() of a graph holding one
                 torch.ops.mla.decode (host us per replay)
  graph/32       one replay of a graph of 32 decodes, per decode

On a GPU the calls only enqueue; the time is the host's (the device
finishes after, synchronize is outside the timed region).
Packages: mla.find_package ($MLA_PACKAGE_DIR, else mla-compile).
"""

import argparse
import ctypes
import json
import platform
import statistics
import time

import numpy as np

import mla
from mla import _capi


def timed(call, iters, repeats, sync=None):
    """Median host us per call of `iters` calls, over `repeats` runs."""
    for _ in range(3):
        call()
    if sync:
        sync()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            call()
        runs.append((time.perf_counter() - start) / iters * 1e6)
        if sync:
            sync()
    return statistics.median(runs)


def binding_only(call):
    """`call` with the C API's mla_launch replaced by a no-op."""
    from mla import _launch
    real = _launch._capi.call

    def skip_launch(name, *args):
        if name != "mla_launch":
            return real(name, *args)

    def run():
        _launch._capi.call = skip_launch
        try:
            call()
        finally:
            _launch._capi.call = real
    return run


def raw_launch(kernel, arrays, scale):
    """A closure calling mla_launch on prebuilt arguments."""
    q, kv, table, lens, o, lse = arrays
    roles = ("q", "kv", "block_table", "seq_lens", "o", "lse")
    args = (_capi.Arg * 7)()
    keep = []
    for i, (role, array) in enumerate(zip(roles, arrays)):
        if isinstance(array, np.ndarray):
            t = mla._arrays.tensor(role, array, True)
        else:
            t = mla._devarrays.view(role, array).tensor
        keep.append(array)
        args[i] = _capi.Arg(role=role.encode(), kind=_capi.ARG_TENSOR,
                            tensor=t)
    args[6] = _capi.Arg(role=b"scale", kind=_capi.ARG_F32, f32=scale)
    options = _capi.LaunchOptions(skip_validation=1)
    if not isinstance(q, np.ndarray):
        import torch
        options.stream = torch.cuda.current_stream().cuda_stream
        size = ctypes.c_size_t()
        _capi.call("mla_kernel_workspace_bytes", kernel._live(), args, 7,
                   ctypes.byref(size))
        kernel.reserve_workspace(size.value)
    launch, handle = _capi.lib.mla_launch, kernel._live()

    def call():
        _capi.check(launch(handle, args, 7, ctypes.byref(options)))
    call.keep = keep
    return call


def host_rows(args):
    dev = mla.Device("host")
    k = mla.load_kernel(dev, "decode", heads=args.heads, q_len=1,
                        page_size=args.page_size)
    q = mla.to_bf16(np.random.uniform(-1, 1, (1, 1, args.heads, 576)))
    kv = mla.to_bf16(np.random.uniform(-1, 1, (2, args.page_size, 576)))
    table = np.zeros((1, 1), np.int32)
    lens = np.array([args.seq_len], np.int32)
    o, lse = k.decode(q, kv, table, lens, 0.1)
    rows = {"c_api": raw_launch(k, (q, kv, table, lens, o, lse), 0.1)}
    for validate in (False, "shapes", True):
        rows["decode/%s" % validate] = (
            lambda v=validate: k.decode(q, kv, table, lens, 0.1, validate=v))
    rows["binding"] = binding_only(
        lambda: k.decode(q, kv, table, lens, 0.1, validate=False))
    return {name: timed(call, args.iters, args.repeats)
            for name, call in rows.items()}


def cuda_rows(args):
    import torch
    import mla.torch  # noqa: F401
    from mla import flashmla
    dev = mla.Device("cuda:%d" % torch.cuda.current_device())
    k = mla.load_kernel(dev, "decode", heads=args.heads, q_len=1,
                        page_size=args.page_size)
    q = torch.randn(1, 1, args.heads, 576, device="cuda").bfloat16()
    kv = torch.randn(2, args.page_size, 576, device="cuda").bfloat16()
    table = torch.zeros(1, 1, dtype=torch.int32, device="cuda")
    lens = torch.tensor([args.seq_len], dtype=torch.int32, device="cuda")
    o, lse = k.decode(q, kv, table, lens, 0.1)
    key = mla.torch.register(k)
    sync = torch.cuda.synchronize
    rows = {"c_api": raw_launch(k, (q, kv, table, lens, o, lse), 0.1)}
    for validate in (False, "shapes", True):
        rows["decode/%s" % validate] = (
            lambda v=validate: k.decode(q, kv, table, lens, 0.1, validate=v))
    rows["binding"] = binding_only(
        lambda: k.decode(q, kv, table, lens, 0.1, validate=False))
    rows["torch_op"] = lambda: torch.ops.mla.decode(q, kv, table, lens, 0.1,
                                                    key)
    meta, _ = flashmla.get_mla_metadata()
    blocked = kv.view(2, args.page_size, 1, 576)
    rows["flashmla"] = lambda: flashmla.flash_mla_with_kvcache(
        q, blocked, table, lens, 512, meta)
    results = {name: timed(call, args.iters, args.repeats, sync)
               for name, call in rows.items()}
    for count in (1, 32):
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.ops.mla.decode(q, kv, table, lens, 0.1, key)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            for _ in range(count):
                torch.ops.mla.decode(q, kv, table, lens, 0.1, key)
        per_replay = timed(graph.replay, max(args.iters // count, 10),
                           args.repeats, sync)
        results["graph/%d" % count] = per_replay / count
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="host", choices=["host", "cuda"])
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--page-size", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="also write the numbers here")
    args = parser.parse_args()
    results = host_rows(args) if args.device == "host" else cuda_rows(args)
    about = {"device": args.device, "heads": args.heads,
             "page_size": args.page_size, "seq_len": args.seq_len,
             "batch": 1, "iters": args.iters, "repeats": args.repeats,
             "date": time.strftime("%Y-%m-%d"), "machine": platform.node(),
             "processor": platform.processor() or platform.machine(),
             "python": platform.python_version(), "mla": mla.version()}
    print("launch overhead, host us per decode call (median of %d x %d "
          "calls; %s)" % (args.repeats, args.iters,
                          ", ".join("%s=%s" % kv for kv in about.items())))
    for name, micros in results.items():
        print("  %-14s %8.1f" % (name, micros))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"about": about, "us_per_call": results}, f, indent=1)


if __name__ == "__main__":
    main()
