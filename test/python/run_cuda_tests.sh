#!/bin/sh
# The ctest python.cuda (label cuda): test/python/test_torch_cuda.py with a
# python that has torch and pytest, on the build's library:
#   run_cuda_tests.sh PYTHON LIBRARY
# $MLA_TORCH_PYTHON overrides PYTHON. Packages: $MLA_PACKAGE_DIR/python
# (scripts/gpu-packages writes them there) and $MLA_PACKAGE_DIR, else
# mla-compile ($MLA_COMPILE or on PATH). Exit status 77 (skipped) with a
# one-line reason without torch, pytest or a CUDA device.
set -u
python=${MLA_TORCH_PYTHON:-${1:-python3}}
library=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if ! "$python" -c 'import pytest' >/dev/null 2>&1; then
  echo "skipped: $python has no pytest (set MLA_TORCH_PYTHON)"; exit 77
fi
if ! "$python" -c 'import torch' >/dev/null 2>&1; then
  echo "skipped: $python has no torch (set MLA_TORCH_PYTHON)"; exit 77
fi
if ! "$python" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' >/dev/null 2>&1; then
  echo "skipped: torch sees no CUDA device"; exit 77
fi
export PYTHONPATH="$root/runtime/python" MLA_RUNTIME_LIBRARY="$library"
if [ -n "${MLA_PACKAGE_DIR:-}" ]; then
  export MLA_PACKAGE_DIR="$MLA_PACKAGE_DIR/python:$MLA_PACKAGE_DIR"
fi
shift 2
exec "$python" -B -m pytest -q -p no:cacheprovider -rs "$here/test_torch_cuda.py" "$@"
