#!/usr/bin/env python3
"""Runs the shell blocks of Markdown files as written, against a build.

  run_doc_commands.py ROOT BUILD WORKDIR FILE.md...

Every fenced block marked ```sh (or bash, shell) runs with bash -e -o
pipefail in WORKDIR, where build/ is a link to BUILD and scripts/, test/,
examples/ are links into ROOT, so that the commands work exactly as a reader
types them from the repository root (their outputs land in WORKDIR). The
blocks of one file run in order in one WORKDIR/<file>, so a later block sees
what an earlier one wrote. A block that needs what this machine lacks (a
GPU, the network) or that runs this test suite itself is marked on the line
before its fence:

  <!-- not run by test/readme: REASON -->

Exits 1 on the first block that fails, printing the block and its output.
"""
import os
import re
import shutil
import subprocess
import sys

FENCE = re.compile(r"^```(sh|bash|shell)\s*$")
SKIP = re.compile(r"^<!-- not run by test/readme: .+ -->\s*$")


def blocks(path):
    """(first line number, text, skipped) of each shell block of `path`."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    out = []
    i = 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            prev = next((lines[j] for j in range(i - 1, -1, -1)
                         if lines[j].strip()), "")
            start = i + 1
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
            out.append((start + 1, "".join(lines[start:i]),
                        bool(SKIP.match(prev))))
        i += 1
    return out


def workdir(root, build, base, name):
    work = os.path.join(base, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.symlink(os.path.realpath(build), os.path.join(work, "build"))
    for d in ("scripts", "test", "examples"):
        os.symlink(os.path.join(root, d), os.path.join(work, d))
    return work


def main():
    root, build, base = (os.path.realpath(a) for a in sys.argv[1:4])
    ran = skipped = 0
    for path in sys.argv[4:]:
        rel = os.path.relpath(os.path.realpath(path), root)
        work = workdir(root, build, base, rel.replace("/", "_"))
        for line, text, skip in blocks(path):
            if skip:
                skipped += 1
                continue
            result = subprocess.run(
                ["bash", "-e", "-o", "pipefail", "-c", text], cwd=work,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                timeout=900)
            ran += 1
            if result.returncode != 0:
                print(f"{rel}:{line}: the block failed (exit "
                      f"{result.returncode}) in {work}:\n{text}")
                print("output (last 60 lines):")
                print("\n".join(result.stdout.splitlines()[-60:]))
                return 1
            print(f"{rel}:{line}: ok")
    print(f"{ran} blocks ran, {skipped} marked not run")
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main())
