//===- PackageTest.cpp - .mlapkg round trip and parse errors --------------===//

#include "TestUtils.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

Status parseError(const std::vector<uint8_t> &bytes) {
  Expected<Package> package = parsePackage(bytes.data(), bytes.size());
  EXPECT_FALSE(package.ok());
  return package.ok() ? Status::success() : package.status();
}

const std::string kCode = "\x7f"
                          "ELF pretend code";

} // namespace

TEST(PackageTest, Fnv1a64) {
  EXPECT_EQ(fnv1a64(nullptr, 0), 0xcbf29ce484222325ull);
  const uint8_t a[] = {'a'};
  EXPECT_EQ(fnv1a64(a, 1), 0xaf63dc4c8601ec8cull);
}

TEST(PackageTest, RoundTripThroughAFile) {
  TempDir dir;
  std::string manifest = decodeManifest(DecodeShape());
  std::vector<uint8_t> code = testKernelCode();
  std::string path = dir.file("decode.mlapkg");
  Status status = writePackage(path, manifest, {{"code.host-x86_64", code}});
  ASSERT_TRUE(status.ok()) << status.toString();
  // Only the package is left: the temporary file was renamed.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);

  Expected<Package> package = readPackage(path);
  ASSERT_TRUE(package.ok()) << package.status().toString();
  EXPECT_EQ(package->manifestText, manifest);
  EXPECT_EQ(package->manifest.kernel, "decode");
  ASSERT_EQ(package->codeSections.size(), 1u);
  ASSERT_NE(package->findSection("code.host-x86_64"), nullptr);
  EXPECT_EQ(*package->findSection("code.host-x86_64"), code);
  EXPECT_EQ(package->findSection("code.gfx942"), nullptr);
  // The writer and the hand-built layout agree byte for byte.
  EXPECT_EQ(readBytes(path),
            rawPackageBytes(
                {{"manifest", manifest},
                 {"code.host-x86_64", std::string(code.begin(), code.end())}}));
}

TEST(PackageTest, SeveralCodeSections) {
  std::string manifest = decodeManifest(DecodeShape());
  // A second target with the host's plan.
  std::string host = "target host-x86_64 code.host-x86_64\n";
  std::string block = manifest.substr(manifest.find(host));
  manifest += "target gfx942 code.gfx942\n" + block.substr(host.size());
  Expected<std::vector<uint8_t>> bytes = encodePackage(
      manifest, {{"code.host-x86_64", {1, 2}}, {"code.gfx942", {3}}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  Expected<Package> package = parsePackage(bytes->data(), bytes->size());
  ASSERT_TRUE(package.ok()) << package.status().toString();
  EXPECT_EQ(*package->findSection("code.gfx942"), std::vector<uint8_t>{3});
}

TEST(PackageTest, WriterChecksItsInputs) {
  std::string manifest = decodeManifest(DecodeShape());
  auto encodeError = [&](const std::string &text, const CodeSections &code) {
    Expected<std::vector<uint8_t>> bytes = encodePackage(text, code);
    EXPECT_FALSE(bytes.ok());
    return bytes.ok() ? std::string() : bytes.status().message();
  };
  EXPECT_EQ(encodeError(manifest, {}),
            "package has no section 'code.host-x86_64' for target "
            "'host-x86_64'");
  EXPECT_EQ(encodeError(manifest,
                        {{"code.host-x86_64", {}}, {"code.host-x86_64", {}}}),
            "duplicate section 'code.host-x86_64'");
  EXPECT_EQ(encodeError(manifest, {{"code.host-x86_64", {}}, {"manifest", {}}}),
            "a code section may not be named 'manifest'");
  EXPECT_EQ(encodeError(manifest, {{"code host", {}}}),
            "invalid section name 'code host'");
  EXPECT_EQ(encodeError("mla-manifest 1\nbogus 1\n", {}),
            "manifest line 2: unknown key 'bogus'");

  TempDir dir;
  Status status = writePackage(dir.file("missing/x.mlapkg"), manifest,
                               {{"code.host-x86_64", {}}});
  EXPECT_EQ(status.code(), ErrorCode::IOError);
  EXPECT_EQ(status.message().rfind(
                dir.file("missing/x.mlapkg") + ": cannot create: ", 0),
            0u)
      << status.message();
}

TEST(PackageTest, BadMagic) {
  std::vector<uint8_t> bytes = rawPackageBytes({{"manifest", "x"}});
  bytes[0] = 'X';
  EXPECT_EQ(parseError(bytes).message(), "not an mla package (bad magic)");
  EXPECT_EQ(parseError({}).message(), "not an mla package (bad magic)");
}

TEST(PackageTest, WrongVersion) {
  Status status = parseError(
      rawPackageBytes({{"manifest", decodeManifest(DecodeShape())}}, 2));
  EXPECT_EQ(status.code(), ErrorCode::InvalidPackage);
  EXPECT_EQ(status.message(),
            "package format version 2 is not supported (this runtime reads 1)");
}

TEST(PackageTest, TruncatedHeader) {
  std::vector<uint8_t> bytes = rawPackageBytes({});
  bytes.resize(10);
  EXPECT_EQ(parseError(bytes).message(),
            "package truncated: the header needs 16 bytes, 10 remain");
}

TEST(PackageTest, TruncatedSection) {
  std::string manifest = decodeManifest(DecodeShape());
  std::vector<uint8_t> bytes = rawPackageBytes(
      {{"manifest", manifest}, {"code.host-x86_64", std::string(1234, 'c')}});
  // Keep 200 bytes of the code section's data.
  size_t codeData = 16 + 4 + 8 + 8 + manifest.size() + 4 + 16 + 8;
  bytes.resize(codeData + 200);
  Status status = parseError(bytes);
  EXPECT_EQ(status.code(), ErrorCode::InvalidPackage);
  EXPECT_EQ(status.message(), "package truncated: section 'code.host-x86_64' "
                              "needs 1234 bytes, 200 remain");
}

TEST(PackageTest, TruncatedChecksum) {
  std::vector<uint8_t> bytes = rawPackageBytes({{"manifest", "x"}});
  bytes.resize(bytes.size() - 3);
  EXPECT_EQ(parseError(bytes).message(),
            "package truncated: the checksum needs 8 bytes, 5 remain");
}

TEST(PackageTest, CorruptedByte) {
  std::vector<uint8_t> bytes =
      rawPackageBytes({{"manifest", decodeManifest(DecodeShape())},
                       {"code.host-x86_64", kCode}});
  bytes[bytes.size() - 12] ^= 0x10;
  Status status = parseError(bytes);
  EXPECT_EQ(status.code(), ErrorCode::InvalidPackage);
  EXPECT_EQ(status.message(), "package corrupted: checksum mismatch");
}

TEST(PackageTest, TrailingBytes) {
  std::vector<uint8_t> bytes = rawPackageBytes({{"manifest", "x"}});
  bytes.push_back(0);
  EXPECT_EQ(parseError(bytes).message(),
            "package corrupted: 1 unexpected bytes after the checksum");
}

TEST(PackageTest, DuplicateSection) {
  EXPECT_EQ(parseError(rawPackageBytes({{"manifest", "x"}, {"manifest", "y"}}))
                .message(),
            "package corrupted: duplicate section 'manifest'");
}

TEST(PackageTest, MissingManifest) {
  EXPECT_EQ(
      parseError(rawPackageBytes({{"code.host-x86_64", kCode}})).message(),
      "package has no 'manifest' section");
}

TEST(PackageTest, MissingCodeSection) {
  Status status = parseError(
      rawPackageBytes({{"manifest", decodeManifest(DecodeShape())}}));
  EXPECT_EQ(status.message(), "package has no section 'code.host-x86_64' for "
                              "target 'host-x86_64'");
}

TEST(PackageTest, ManifestErrorCarriesTheLine) {
  std::string manifest = decodeManifest(DecodeShape());
  manifest.replace(manifest.find("heads 4"), 7, "heads x");
  Status status = parseError(
      rawPackageBytes({{"manifest", manifest}, {"code.host-x86_64", kCode}}));
  EXPECT_EQ(status.code(), ErrorCode::InvalidManifest);
  EXPECT_EQ(status.message(), "manifest line 6: 'heads' expects a "
                              "non-negative integer, got 'x'");
}

TEST(PackageTest, ReadErrorsNameTheFile) {
  TempDir dir;
  Expected<Package> missing = readPackage(dir.file("none.mlapkg"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::IOError);
  EXPECT_EQ(missing.status().message(),
            dir.file("none.mlapkg") +
                ": cannot open: No such file or directory");

  writeBytes(dir.file("bad.mlapkg"), {'M', 'L', 'A'});
  Expected<Package> bad = readPackage(dir.file("bad.mlapkg"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            dir.file("bad.mlapkg") +
                ": package truncated: the header needs 16 bytes, 3 remain");
}
