//===- WriteDecodePackage.cpp - A decode package of the reference kernel --===//
//
// mla-test-write-decode-package OUT.mlapkg: writes a host decode package
// (bf16, 4 heads, latent 32 + rope 8, q_len 1, page size 16) whose code is
// the reference decode kernel, for the tests that need a package file
// without mla-compile (embed_decode.reference-kernel).
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include <cstdio>
#include <filesystem>

using namespace mla::rt;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.mlapkg\n", argv[0]);
    return 2;
  }
  test::DecodeShape shape;
  shape.pageSize = 16;
  std::error_code ignored;
  std::filesystem::create_directories(
      std::filesystem::path(argv[1]).parent_path(), ignored);
  Status status = writePackage(argv[1], test::decodeManifest(shape),
                               {{"code.host-x86_64", test::testKernelCode()}});
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.toString().c_str());
    return 1;
  }
  return 0;
}
