#!/bin/sh
# run_find_package.sh BUILD_DIR SOURCE_DIR WORK_DIR
#
# Installs BUILD_DIR into WORK_DIR/prefix (cmake --install), then, from the
# prefix alone: configures and builds examples/find-package against it
# (find_package(mla_runtime CONFIG)), compiles a host decode package with
# the installed mla-compile, runs the example's C (shared library) and C++
# (static archive) programs on it, builds the C program once more with
# pkg-config's flags and runs it, and runs the installed mla-run --version.
# Exit status 0 when all of it works. (ctest install.find-package.)
set -eu
build=$1
source=$2
work=$3
prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work"

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"

generator=
command -v ninja >/dev/null && generator="-G Ninja"
echo "== configure and build examples/find-package"
# shellcheck disable=SC2086
cmake -S "$source/examples/find-package" -B "$work/example" $generator \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/configure.log"
cmake --build "$work/example" >"$work/build.log"

echo "== the installed mla-compile writes a host decode package"
"$prefix/bin/mla-compile" --kernel=decode --target=host --heads=8 \
  --latent-dim=64 --rope-dim=16 --page-size=16 --q-len=1 --dtype=bf16 \
  -o "$work/decode.mlapkg"

echo "== embed_decode (C API, mla::runtime)"
ldd "$work/example/embed_decode" | grep -q "$prefix/lib/libmla_runtime.so.1" || {
  echo "embed_decode does not load $prefix/lib/libmla_runtime.so.1:" >&2
  ldd "$work/example/embed_decode" >&2
  exit 1
}
"$work/example/embed_decode" "$work/decode.mlapkg"

echo "== package_info (C++ API, mla::runtime_static)"
"$work/example/package_info" "$work/decode.mlapkg"

echo "== embed_decode built with pkg-config"
pcdir=$(dirname "$(find "$prefix" -name mla_runtime.pc | head -n 1)")
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs mla_runtime)
libdir=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir mla_runtime)
# shellcheck disable=SC2086
cc -std=c99 -o "$work/embed_decode_pc" \
  "$source/examples/find-package/embed_decode.c" $flags -lm \
  -Wl,-rpath,"$libdir"
"$work/embed_decode_pc" "$work/decode.mlapkg"

echo "== mla-run --version"
"$prefix/bin/mla-run" --version
echo "install.find-package: ok"
