"""ctest peers-variants: scripts/peers-variants on a synthetic kit (no GPU,
no torch). The kit file holds only the lines the script looks for; the JSON
of --table is made up (never quote it).

    check_peers_variants.py SCRIPT WORKDIR
"""
import json
import os
import py_compile
import shutil
import subprocess
import sys

KIT_SOURCE = '''def decode_row(args, row, timer, kk, lib_dev, flash_mla, triton_fwd):
    try:
        record("ours", fns, m)
    except Exception as e:  # noqa: BLE001
        res["impl"]["ours"] = {"error": traceback.format_exc()}
        log("  ours ERROR", e)

    # --- FlashMLA
'''


def run(script, *args):
    p = subprocess.run([sys.executable, "-B", script, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def expect(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def main():
    script, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    kit = os.path.join(work, "kit")
    os.makedirs(kit)
    bench = os.path.join(kit, "bench_side_by_side.py")
    with open(bench, "w") as f:
        f.write(KIT_SOURCE)

    rc, out = run(script, kit)
    expect(rc == 0, "patching a kit: rc %d: %s" % (rc, out))
    src = open(bench).read()
    expect(src.count("mla_variants.run(") == 1, "one call inserted")
    expect(src.index("mla_variants.run(") > src.index('log("  ours ERROR", e)') and
           src.index("mla_variants.run(") < src.index("# --- FlashMLA"),
           "the call sits after ours and before FlashMLA")
    py_compile.compile(bench, doraise=True)
    module = os.path.join(kit, "mla_variants.py")
    py_compile.compile(module, doraise=True)

    rc, out = run(script, kit)
    expect(rc == 2 and "already calls" in out, "a second run is refused: %d %s" % (rc, out))

    other = os.path.join(work, "other")
    os.makedirs(other)
    with open(os.path.join(other, "bench_side_by_side.py"), "w") as f:
        f.write("print('a different kit')\n")
    rc, out = run(script, other)
    expect(rc == 2 and "not where this script" in out, "a kit without the anchor: %d %s" % (rc, out))
    rc, out = run(script, os.path.join(work, "missing"))
    expect(rc == 2 and "missing" in out, "a missing kit names its path: %d %s" % (rc, out))
    rc, out = run(script)
    expect(rc == 2 and "usage" in out, "no argument: usage")

    # MLA_PEERS_VARIANTS parsing, through the written module (no torch
    # needed to import it).
    sys.path.insert(0, kit)
    import mla_variants  # noqa: E402
    os.environ["MLA_PEERS_VARIANTS"] = "ours_rp:out/peers:reuse-plan,mg4:out/mg4"
    expect(mla_variants.variants() == [("ours_rp", "out/peers", True), ("mg4", "out/mg4", False)],
           "variants parsed: %r" % (mla_variants.variants(),))
    os.environ["MLA_PEERS_VARIANTS"] = "bad:dir:reuse"
    try:
        mla_variants.variants()
        expect(False, "a bad third field is refused")
    except SystemExit as e:
        expect("NAME:PKGDIR[:reuse-plan]" in str(e), "the refusal says the form: %s" % e)

    # --table: a made-up JSON in the harness's shape.
    doc = {"decode": [{"id": "synthetic_row", "impl": {
        "ours": {"time": {"median_us": 10.0}, "check": {"ok": True}},
        "mg4": {"time": {"median_us": 8.5}, "check": {"ok": False}},
        "flashmla": {"na": "page 1"}}}]}
    js = os.path.join(work, "sbs.json")
    with open(js, "w") as f:
        json.dump(doc, f)
    rc, out = run(script, "--table", js)
    expect(rc == 0, "--table rc %d" % rc)
    expect("| row | ours | mg4 | flashmla |" in out, "table header: %s" % out)
    expect("| synthetic_row | 10.00 | 8.50 (check FAILED) | n/a |" in out, "table row: %s" % out)
    print("peers-variants: all checks passed")


if __name__ == "__main__":
    main()
