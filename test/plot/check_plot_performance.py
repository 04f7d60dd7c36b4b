"""ctest plot-performance: scripts/plot-performance on the synthetic fixtures
beside this file (peers-sample.json, bench-sample.csv: made-up numbers, see
README.md) writes PNGs and plots the fractions worked out below by hand.

  python3 check_plot_performance.py SCRIPT WORKDIR

Exit 77 (ctest: skipped) with a message when matplotlib is missing."""
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
JSON = os.path.join(HERE, "peers-sample.json")
CSV = os.path.join(HERE, "bench-sample.csv")

# Ceilings: the higher of start and end, 4000 GB/s and 800 TFLOP/s. Decode
# bytes 2 * (sum(L) * 576 + B * H * 1088), FLOPs 2 * H * sum(L) * 1088.
#   h16 B=128 L=8192: 1212416000 B, 36.5 GFLOP; ours 400 us -> 3031.04 GB/s
#     = 0.758 of the copy; FlashMLA 320 us -> 0.947; Triton failed its check.
#   h16 page 1: ours 500 us -> 0.606; FlashMLA n/a; Triton an error.
#   h128: 1243611136 B, 292 GFLOP (compute-bound): ours 1000 us -> 292.06
#     TFLOP/s = 0.365 of the matmul; FlashMLA 500 us -> 0.730; Triton
#     3000 us -> 97.35 TFLOP/s = 0.122 (above its 414.5 GB/s / 4000 = 0.104).
#   pf_h16_t4096: 2 * 16 * 4096^2 * 320 / 2 FLOP; ours 400 us -> 0.268;
#     fastest passing SDPA, cudnn at 240 us -> 0.447.
#   CSV rows: 3031.0 GB/s -> 0.758, 2309.5 GB/s -> 0.577.
EXPECTED_WITH_JSON = [
    ("h16_b128_l8192_p64", "ours", "copy", "0.758"),
    ("h16_b128_l8192_p64", "flashmla", "copy", "0.947"),
    ("h16_b128_l8192_p1", "ours", "copy", "0.606"),
    ("h128_b128_l8192", "ours", "matmul", "0.365"),
    ("h128_b128_l8192", "flashmla", "matmul", "0.730"),
    ("h128_b128_l8192", "triton", "matmul", "0.122"),
    ("pf_h16_t4096", "ours", "matmul", "0.268"),
    ("pf_h16_t4096", "sdpa", "matmul", "0.447"),
    ("synthetic_h16_p64 B=128 L=8192", "mla-bench", "copy", "0.758"),
    ("synthetic_h16_p64 B=64 ragged:1024:2048", "mla-bench", "copy", "0.577"),
]
# The CSV alone: the ceilings mla-bench was given (its bw_frac, flop_frac).
EXPECTED_CSV_ONLY = [
    ("synthetic_h16_p64 B=128 L=8192", "mla-bench", "copy", "0.718"),
    ("synthetic_h16_p64 B=64 ragged:1024:2048", "mla-bench", "copy", "0.547"),
]

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def run(script, *args, env=None):
    return subprocess.run([sys.executable, script] + list(args), capture_output=True, text=True,
                          env=env)


def plotted(stdout):
    return [tuple(line.split("\t")[:4]) for line in stdout.splitlines()]


def png_size(path):
    """(width, height) from the PNG's IHDR chunk, or None."""
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def main():
    script, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("SKIP: matplotlib is missing (Debian: apt-get install python3-matplotlib, "
              "which scripts/setup installs)")
        return 77

    png = os.path.join(work, "perf.png")
    if os.path.exists(png):
        os.remove(png)
    r = run(script, "--json", JSON, "--csv", CSV, "-o", png)
    check(r.returncode == 0, "json+csv: exit %d: %s" % (r.returncode, r.stderr))
    check(plotted(r.stdout) == EXPECTED_WITH_JSON, "json+csv: plotted\n%s" % r.stdout)
    check("sdpa[cudnn]" in r.stdout, "the SDPA bar names its backend:\n%s" % r.stdout)
    size = png_size(png) if os.path.exists(png) else None
    check(size is not None and size[0] > 100 and size[1] > 100, "json+csv: no PNG (%s)" % (size,))

    png2 = os.path.join(work, "perf-csv.png")
    r = run(script, "--csv", CSV, "-o", png2, "--device", "SYNTHETIC", "--date", "2000-01-01")
    check(r.returncode == 0, "csv: exit %d: %s" % (r.returncode, r.stderr))
    check(plotted(r.stdout) == EXPECTED_CSV_ONLY, "csv: plotted\n%s" % r.stdout)
    check(os.path.exists(png2) and png_size(png2) is not None, "csv: no PNG")

    r = run(script, "-o", os.path.join(work, "none.png"))
    check(r.returncode == 1 and "give --json FILE and/or --csv FILE" in r.stderr,
          "no input: exit %d: %s" % (r.returncode, r.stderr))
    bad = os.path.join(work, "no-ceilings.json")
    with open(bad, "w") as f:
        f.write('{"device": "x", "decode": [], "prefill": []}')
    r = run(script, "--json", bad, "-o", os.path.join(work, "bad.png"))
    check(r.returncode == 1 and "has no ceilings" in r.stderr,
          "no ceilings: exit %d: %s" % (r.returncode, r.stderr))

    # Without matplotlib: a message and exit 2 (a stand-in package that
    # fails to import shadows the real one).
    fake = os.path.join(work, "fake-site")
    os.makedirs(os.path.join(fake, "matplotlib"), exist_ok=True)
    with open(os.path.join(fake, "matplotlib", "__init__.py"), "w") as f:
        f.write("raise ImportError('stand-in: no matplotlib')\n")
    env = dict(os.environ, PYTHONPATH=fake)
    r = run(script, "--json", JSON, "-o", os.path.join(work, "never.png"), env=env)
    check(r.returncode == 2 and "matplotlib is missing" in r.stderr,
          "no matplotlib: exit %d: %s" % (r.returncode, r.stderr))
    check(not os.path.exists(os.path.join(work, "never.png")), "no matplotlib: a PNG anyway")

    for failure in failures:
        print("FAIL: " + failure)
    if not failures:
        print("plot-performance: all checks passed (%s)" % png)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
