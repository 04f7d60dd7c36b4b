#!/usr/bin/env python3
"""Every relative link and file reference of the given Markdown files
resolves inside the repository.

  check_doc_links.py ROOT [FILE.md...]

Without files: ROOT/README.md and every .md file under ROOT/docs.

Checked, outside fenced code blocks:
  * links [text](target): the target (relative to the file) exists inside
    ROOT; a #anchor names a heading of the target (GitHub's slugs);
  * file references, the words that end in .md, and backticked paths that
    start with a top-level directory of the repository (lib/, runtime/,
    test/, ...) and end in a source file's extension, or start with ../: they exist
    relative to the file, to ROOT, ROOT/docs or ROOT/runtime (whose page
    names runtime/test/... as test/...), inside ROOT. A path with a wildcard or a placeholder
    (`*`, `...`, `NAME`) is a pattern, not a reference.
Exits 1 and lists each broken reference as FILE:LINE: ... otherwise.
"""
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
MD_WORD = re.compile(r"(?<![\w/.-])((?:\.\./|[\w-]+/)*[\w-]+\.md)\b")
BACKTICK = re.compile(r"`([^`\s]+)`")
TOP_DIRS = ("lib/", "include/", "runtime/", "test/", "scripts/", "tools/",
            "docs/", "examples/", "../", ".ci/")
# Backticked paths with these endings are files of the repository (not, say,
# an install prefix's lib/libmla_runtime.a or a build's output).
SOURCE_EXT = (".cpp", ".h", ".td", ".def", ".py", ".mlir", ".test", ".md",
              ".txt", ".cmake", ".in", ".sh", ".png", ".json", ".hsaco")


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped,
    spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found, seen = set(), {}
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            if in_code or not line.startswith("#"):
                continue
            base = slug(line.lstrip("#"))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def inside(root, path):
    real = os.path.realpath(path)
    return real == root or real.startswith(root + os.sep)


def resolve(root, here, target):
    """The existing path `target` names inside root, or None."""
    for base in (here, root, os.path.join(root, "docs"),
                 os.path.join(root, "runtime")):
        candidate = os.path.normpath(os.path.join(base, target))
        if inside(root, candidate) and os.path.exists(candidate):
            return candidate
    return None


PLACEHOLDERS = {"DIR", "OUTDIR", "LOGDIR", "PKGDIR", "NAME", "ROLE", "PKG",
                "IN", "OUT", "FILE", "KIND", "PREFIX", "T"}


def is_pattern(target):
    return any(p in target for p in ("*", "...", "…", "<", "{", "$")) or \
        any(part.split(".")[0] in PLACEHOLDERS for part in target.split("/"))


def check_file(root, path):
    problems = []
    here = os.path.dirname(path)
    rel = os.path.relpath(path, root)
    in_code = False
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(here, file_part)) \
                if file_part else path
            if not inside(root, dest):
                problems.append(f"{rel}:{number}: link '{target}' leaves "
                                "the repository")
                continue
            if not os.path.exists(dest):
                problems.append(f"{rel}:{number}: link '{target}': "
                                f"{os.path.relpath(dest, root)} does not "
                                "exist")
                continue
            if anchor and dest.endswith(".md") and \
                    anchor not in anchors(dest):
                problems.append(f"{rel}:{number}: link '{target}': no "
                                f"heading '#{anchor}' in "
                                f"{os.path.relpath(dest, root)}")
        text = LINK.sub("", line)
        refs = set(MD_WORD.findall(text))
        refs |= {t.rstrip(".,:;)") for t in BACKTICK.findall(text)
                 if t.startswith("../") or (t.startswith(TOP_DIRS) and
                 t.rstrip(".,:;)").endswith(SOURCE_EXT))}
        for target in sorted(refs):
            target = target.split("#")[0].split(":")[0]
            if not target or is_pattern(target):
                continue
            if resolve(root, here, target) is None:
                problems.append(f"{rel}:{number}: '{target}' is not a file "
                                "of the repository")
    return problems


def main():
    root = os.path.realpath(sys.argv[1])
    files = sys.argv[2:] or [os.path.join(root, "README.md")] + sorted(
        os.path.join(d, f) for d, _, names in os.walk(os.path.join(root, "docs"))
        for f in names if f.endswith(".md"))
    problems = []
    for path in files:
        problems += check_file(root, os.path.realpath(path))
    for p in problems:
        print(p)
    print(f"{len(files)} files, {len(problems)} broken references")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
