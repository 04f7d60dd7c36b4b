"""The packages test_torch_cuda.py and bench_overhead.py need, and a
command that compiles them on a machine with mla-compile:

    PYTHONPATH=runtime/python MLA_RUNTIME_LIBRARY=build/lib/libmla_runtime.so.1 \\
      MLA_COMPILE=build/bin/mla-compile python3 test/python/gpu_packages.py OUTDIR [TARGET]

writes OUTDIR/NAME for each, NAME being mla.package_name's (what
mla.find_package looks for in $MLA_PACKAGE_DIR). scripts/gpu-packages runs
it into PKGDIR/python; the ctest python.cuda puts PKGDIR/python first on
MLA_PACKAGE_DIR.
"""

import os
import sys

# FlashMLA's dense-decode test grid: h_q x s_q at block size 64 (the
# non-causal s_q > 1 rows run the s_q = 1 kernel).
FLASHMLA_HEADS = (1, 3, 9, 63, 64, 126, 128)
FLASHMLA_Q_LENS = (1, 2, 4)


def packages():
    """(kind, flags) of every package, DeepSeek's dims (512 + 64), bf16."""
    found = []
    for heads in FLASHMLA_HEADS:
        for q_len in FLASHMLA_Q_LENS:
            found.append(("decode", dict(heads=heads, q_len=q_len,
                                         page_size=64)))
    # Other page sizes (mla.flashmla takes any), vLLM's block size 16.
    for q_len in (1, 2):
        found.append(("decode", dict(heads=16, q_len=q_len, page_size=16)))
    found.append(("decode", dict(heads=16, q_len=1, page_size=64)))
    found.append(("decode", dict(heads=16, q_len=2, page_size=64)))
    for page_size in (16, 64):
        found.append(("append_kv", dict(page_size=page_size)))
    unique = []
    for entry in found:
        if entry not in unique:
            unique.append(entry)
    return unique


def sources():
    """The .mlir variants the GPU tests load by source (mla.package_name
    names them by content hash)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [os.path.join(root, "e2e", "variants",
                         "decode_softcap_input.mlir")]


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit("usage: gpu_packages.py OUTDIR [TARGET (default sm_90a)]")
    import mla
    out, target = argv[1], argv[2] if len(argv) == 3 else "sm_90a"
    os.makedirs(out, exist_ok=True)
    for kind, flags in packages():
        name = mla.package_name(kind, target, **flags)
        mla.compile(kind, target=target, output=os.path.join(out, name),
                    **flags)
    for source in sources():
        name = mla.package_name(None, target, source)
        mla.compile(None, target=target, source=source,
                    output=os.path.join(out, name))
    print("%d packages in %s" % (len(packages()) + len(sources()), out))


if __name__ == "__main__":
    main(sys.argv)
