#!/usr/bin/env python3
"""Seed corpora of scripts/fuzz.

  fuzz_seeds.py ir OUT_DIR FILE.mlir...
      every `// -----` split of the files, comment lines dropped, one seed
      each (those over MAX_BYTES left out);
  fuzz_seeds.py package OUT_DIR FILE.mlapkg...
      every package as it is, and a copy whose code sections other than the
      gfx* targets' are cut to 16 bytes (the fuzz target never loads them;
      small seeds mutate faster), with its checksum recomputed.
"""
import hashlib
import os
import struct
import sys

MAX_BYTES = {"ir": 16 * 1024, "package": 512 * 1024}
MAGIC = b"MLAPKG\0\1"


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def write(out_dir, data, kind):
    if not data or len(data) > MAX_BYTES[kind]:
        return 0
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(out_dir, name), "wb") as f:
        f.write(data)
    return 1


def ir_seeds(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for chunk in text.split("// -----"):
        lines = [l for l in chunk.splitlines()
                 if not l.lstrip().startswith("//") and l.strip()]
        if lines:
            yield ("\n".join(lines) + "\n").encode()


def sections(data):
    """(name, bytes) of a well-formed package, or None."""
    if len(data) < 24 or data[:8] != MAGIC:
        return None
    _, count = struct.unpack_from("<II", data, 8)
    pos, out = 16, []
    for _ in range(count):
        if pos + 4 > len(data):
            return None
        (name_len,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + name_len]
        pos += 4 + name_len
        if pos + 8 > len(data):
            return None
        (size,) = struct.unpack_from("<Q", data, pos)
        out.append((name, data[pos + 8:pos + 8 + size]))
        pos += 8 + size
    return out


def package_seeds(path):
    with open(path, "rb") as f:
        data = f.read()
    yield data
    secs = sections(data)
    if secs is None:
        return
    body = data[:16]
    for name, payload in secs:
        if name.startswith(b"code.") and not name.startswith(b"code.gfx"):
            payload = payload[:16]
        body += struct.pack("<I", len(name)) + name
        body += struct.pack("<Q", len(payload)) + payload
    yield body + struct.pack("<Q", fnv1a64(body))


def main():
    kind, out_dir, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out_dir, exist_ok=True)
    seeds = ir_seeds if kind == "ir" else package_seeds
    count = sum(write(out_dir, s, kind) for p in files for s in seeds(p))
    print(f"fuzz: {count} {kind} seeds in {out_dir}")


if __name__ == "__main__":
    main()
