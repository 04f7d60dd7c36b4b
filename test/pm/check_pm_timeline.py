"""ctest pm-timeline: scripts/pm-timeline on the synthetic ncu CSV beside
this file (pm-sample.csv: made-up values in ncu's raw-page layout, two
lines of other output before the header, a 2,000 ns interval, 10
intervals of which the first workgroup launches in the second and the
last activity is in the eighth).

  python3 check_pm_timeline.py SCRIPT WORKDIR

Worked out by hand: rows from 0.0 us (interval 1) to 12.0 us (interval
7); DRAM reads 0 40 80 100 80 20 0: mean 320 / 7 = 45.7 %, half its peak
(50 %) first at 4.0 us, last at 8.0 us, a tail of 2 intervals = 4.0 us."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "pm-sample.csv")


def run(script, *args):
    p = subprocess.run([sys.executable, script, *args], capture_output=True,
                       text=True)
    return p.returncode, p.stdout, p.stderr


def main(script, work):
    os.makedirs(work, exist_ok=True)
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    rc, out, err = run(script, SAMPLE)
    expect(rc == 0, f"exit {rc}: {err}")
    lines = out.splitlines()
    expect(lines and lines[0] == "kernel decode_k1, one row per 2 us "
           "(7 intervals, 14.0 us)", f"first line: {lines[:1]}")
    rows = [l for l in lines if l[:6].strip().replace(".", "").isdigit()]
    expect(len(rows) == 7, f"{len(rows)} rows, not 7")
    expect(rows and rows[3].split()[:2] == ["6.0", "100.0"],
           f"the fourth row: {rows[3:4]}")
    expect(rows and rows[0].split()[:4] == ["0.0", "0.0", "0.0", "50.0"],
           f"the first row: {rows[:1]}")
    expect(lines and lines[-1] == "mean DRAM read 45.7 % of peak; reaches "
           "half its peak (50.0 %) after 4.0 us, last at 8.0 us: a tail of "
           "4.0 us", f"summary: {lines[-1:]}")

    rc, out, _ = run(script, SAMPLE, "--all")
    expect(rc == 0 and "(10 intervals, 20.0 us)" in out,
           "--all: every interval")

    rc, _, err = run(script, os.path.join(work, "missing.csv"))
    expect(rc != 0 and "missing.csv" in err, f"missing file: {rc} {err}")

    plain = os.path.join(work, "plain.csv")
    with open(plain, "w") as f:
        f.write('"ID","Kernel Name","gpu__time_duration.sum"\n"","","us"\n'
                '"0","decode_k1","12.5"\n')
    rc, _, err = run(script, plain)
    expect(rc != 0 and "--section PmSampling" in err,
           f"no PM metrics: {rc} {err}")

    rc, _, err = run(script)
    expect(rc != 0 and "usage" in err, "no argument: usage")

    for f in failures:
        print("FAIL:", f)
    print("pm-timeline:", "ok" if not failures else f"{len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
