#!/bin/sh
# run_compiled_concurrency.sh TESTS MLA_COMPILE WORK_DIR
#
# Runs ConcurrencyTest.CompiledHostPackagesFromEightThreads of the runtime
# test binary TESTS on host decode packages that MLA_COMPILE writes into
# WORK_DIR (8 threads launching real compiled kernels at once). Exits 77
# (ctest: skipped) with a one-line reason when there is no mla-compile, as
# when the runtime is built alone.
tests=$1
compile=$2
work=$3
if [ -z "$compile" ] || [ ! -x "$compile" ]; then
  echo "SKIP: mla-compile is not part of this build (configure with" \
    "-DMLA_COMPILE_EXECUTABLE=PATH)"
  exit 77
fi
mkdir -p "$work" || exit 1
rm -f "$work"/*.mlapkg
"$compile" --kernel=decode --target=host --heads=16 --latent-dim=512 \
  --rope-dim=64 --page-size=16 --q-len=1 --dtype=bf16 \
  -o "$work/decode_h16_p16_bf16.mlapkg" || exit 1
"$compile" --kernel=decode --target=host --heads=4 --latent-dim=64 \
  --rope-dim=16 --page-size=1 --q-len=2 --dtype=f32 \
  -o "$work/decode_h4_p1_s2_f32.mlapkg" || exit 1
MLA_PACKAGE_DIR=$work exec "$tests" \
  --gtest_filter=ConcurrencyTest.CompiledHostPackagesFromEightThreads
