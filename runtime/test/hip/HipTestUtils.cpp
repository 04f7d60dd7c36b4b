//===- HipTestUtils.cpp ---------------------------------------------------===//

#include "HipTestUtils.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

using namespace mla::rt;
using namespace mla::rt::test;

const char *mla::rt::test::testHipLibraryPath() { return MLA_TEST_HIP_LIBRARY; }

bool mla::rt::test::usingFakeHip() { return *MLA_TEST_HIP_LIBRARY != 0; }

Expected<Device> mla::rt::test::openTestHipDevice(int ordinal) {
  HipBackendOptions options;
  options.ordinal = ordinal;
  options.libraryPath = testHipLibraryPath();
  Expected<std::shared_ptr<Backend>> backend = createHipBackend(options);
  if (!backend.ok())
    return backend.status();
  return Device(backend.take());
}

std::vector<uint8_t> mla::rt::test::fixtureCodeObject() {
  return readBytes(std::string(MLA_TEST_DATA_DIR) + "/decode_h1_gfx942.hsaco");
}

std::string mla::rt::test::fixtureManifest() {
  std::ifstream in(std::string(MLA_TEST_DATA_DIR) +
                   "/decode_h1_gfx942.manifest");
  EXPECT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

DecodeShape mla::rt::test::fixtureShape() {
  DecodeShape shape;
  shape.dtype = DType::BF16;
  shape.heads = 1;
  shape.qLen = 1;
  shape.latentDim = 16;
  shape.ropeDim = 16;
  shape.pageSize = 64;
  shape.kvSplits = 4;
  return shape;
}

Package mla::rt::test::codePackage(const std::string &manifest,
                                   const std::vector<uint8_t> &code) {
  Expected<Manifest> parsed = parseManifest(manifest);
  EXPECT_TRUE(parsed.ok()) << parsed.status().toString();
  if (!parsed.ok())
    return {};
  CodeSections sections;
  for (const TargetSpec &target : parsed->targets)
    sections.emplace_back(target.section, code);
  Expected<std::vector<uint8_t>> bytes = encodePackage(manifest, sections);
  EXPECT_TRUE(bytes.ok()) << bytes.status().toString();
  if (!bytes.ok())
    return {};
  Expected<Package> package = parsePackage(bytes->data(), bytes->size());
  EXPECT_TRUE(package.ok()) << package.status().toString();
  return package.ok() ? package.take() : Package{};
}

Package mla::rt::test::fixturePackage(const std::string &from,
                                      const std::string &to) {
  std::string manifest = fixtureManifest();
  if (!from.empty()) {
    size_t pos = manifest.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    if (pos != std::string::npos)
      manifest.replace(pos, from.size(), to);
  }
  return codePackage(manifest, fixtureCodeObject());
}
