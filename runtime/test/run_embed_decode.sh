#!/bin/sh
# run_embed_decode.sh EXAMPLE MLA_COMPILE WORK_DIR
#
# Runs examples/find-package/embed_decode on a host decode package with page
# size 16: $MLA_EMBED_PACKAGE when set, else one MLA_COMPILE writes into
# WORK_DIR.
# Exits 77 (ctest: skipped) with a one-line reason when neither exists, as
# when the runtime is built alone.
example=$1
compile=$2
work=$3
if [ -n "$MLA_EMBED_PACKAGE" ]; then
  package=$MLA_EMBED_PACKAGE
elif [ -n "$compile" ] && [ -x "$compile" ]; then
  mkdir -p "$work" || exit 1
  package=$work/decode_host_h8_p16.mlapkg
  "$compile" --kernel=decode --target=host --heads=8 --latent-dim=64 \
    --rope-dim=16 --page-size=16 --q-len=1 --dtype=bf16 -o "$package" || exit 1
else
  echo "SKIP: no compiled decode package: mla-compile is not part of this" \
    "build (configure with -DMLA_COMPILE_EXECUTABLE=PATH or set" \
    "MLA_EMBED_PACKAGE=FILE.mlapkg)"
  exit 77
fi
exec "$example" "$package"
