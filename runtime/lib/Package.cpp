//===- Package.cpp - .mlapkg writer and reader ----------------------------===//

#include "mla/runtime/Package.h"

#include "FileIO.h"

#include <algorithm>
#include <cstring>
#include <set>

using namespace mla::rt;

static const uint8_t kMagic[8] = {'M', 'L', 'A', 'P', 'K', 'G', 0, 1};
static const char *const kManifestSection = "manifest";
/// Longest accepted section name (a sanity bound for corrupted files).
static constexpr uint32_t kMaxSectionNameLength = 4096;

const std::vector<uint8_t> *
Package::findSection(const std::string &name) const {
  auto it = codeSections.find(name);
  return it == codeSections.end() ? nullptr : &it->second;
}

uint64_t mla::rt::fnv1a64(const uint8_t *data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

static Status packageError(const std::string &message) {
  return Status::error(ErrorCode::InvalidPackage, message);
}

static bool isAsciiName(const std::string &name) {
  if (name.empty())
    return false;
  for (char c : name)
    if (c < 0x21 || c > 0x7e)
      return false;
  return true;
}

/// Checks that every target of `manifest` has its code section among
/// `names`.
static Status checkTargetSections(const Manifest &manifest,
                                  const std::set<std::string> &names) {
  for (const TargetSpec &target : manifest.targets)
    if (!names.count(target.section))
      return packageError("package has no section '" + target.section +
                          "' for target '" + target.name + "'");
  return Status::success();
}

namespace {
class Writer {
public:
  void u32(uint32_t value) { integer(value, 4); }
  void u64(uint64_t value) { integer(value, 8); }
  void bytes(const void *data, size_t size) {
    const auto *begin = static_cast<const uint8_t *>(data);
    out.insert(out.end(), begin, begin + size);
  }
  void section(const std::string &name, const void *data, size_t size) {
    u32(static_cast<uint32_t>(name.size()));
    bytes(name.data(), name.size());
    u64(size);
    bytes(data, size);
  }
  std::vector<uint8_t> out;

private:
  void integer(uint64_t value, int size) {
    for (int i = 0; i < size; ++i)
      out.push_back(static_cast<uint8_t>(value >> (8 * i)));
  }
};
} // namespace

Expected<std::vector<uint8_t>>
mla::rt::encodePackage(const std::string &manifestText,
                       const CodeSections &codeSections) {
  Expected<Manifest> manifest = parseManifest(manifestText);
  if (!manifest.ok())
    return manifest.status();
  std::set<std::string> names;
  for (const auto &[name, bytes] : codeSections) {
    if (!isAsciiName(name) || name.size() > kMaxSectionNameLength)
      return Status::error(ErrorCode::InvalidArgument,
                           "invalid section name '" + name + "'");
    if (name == kManifestSection)
      return Status::error(ErrorCode::InvalidArgument,
                           "a code section may not be named 'manifest'");
    if (!names.insert(name).second)
      return Status::error(ErrorCode::InvalidArgument,
                           "duplicate section '" + name + "'");
  }
  if (Status status = checkTargetSections(*manifest, names); !status.ok())
    return Status::error(ErrorCode::InvalidArgument, status.message());

  Writer writer;
  writer.bytes(kMagic, sizeof(kMagic));
  writer.u32(kPackageFormatVersion);
  writer.u32(static_cast<uint32_t>(codeSections.size() + 1));
  writer.section(kManifestSection, manifestText.data(), manifestText.size());
  for (const auto &[name, bytes] : codeSections)
    writer.section(name, bytes.data(), bytes.size());
  writer.u64(fnv1a64(writer.out.data(), writer.out.size()));
  return std::move(writer.out);
}

Status mla::rt::writePackage(const std::string &path,
                             const std::string &manifestText,
                             const CodeSections &codeSections) {
  Expected<std::vector<uint8_t>> bytes =
      encodePackage(manifestText, codeSections);
  if (!bytes.ok())
    return bytes.status();
  return writeFileAtomic(path, bytes->data(), bytes->size());
}

namespace {
class Reader {
public:
  Reader(const uint8_t *data, size_t size) : data(data), size(size) {}

  size_t remaining() const { return size - pos; }
  size_t offset() const { return pos; }

  /// Fails with "package truncated: WHAT needs N bytes, M remain".
  Status need(uint64_t bytes, const std::string &what) const {
    if (bytes <= remaining())
      return Status::success();
    return packageError("package truncated: " + what + " needs " +
                        std::to_string(bytes) + " bytes, " +
                        std::to_string(remaining()) + " remain");
  }
  uint64_t integer(int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes; ++i)
      value |= static_cast<uint64_t>(data[pos + i]) << (8 * i);
    pos += bytes;
    return value;
  }
  const uint8_t *take(size_t bytes) {
    const uint8_t *begin = data + pos;
    pos += bytes;
    return begin;
  }

private:
  const uint8_t *data;
  size_t size;
  size_t pos = 0;
};
} // namespace

Expected<Package> mla::rt::parsePackage(const uint8_t *data, size_t size) {
  Reader reader(data, size);
  if (size == 0 ||
      std::memcmp(data, kMagic, std::min(size, sizeof(kMagic))) != 0)
    return packageError("not an mla package (bad magic)");
  if (Status s = reader.need(16, "the header"); !s.ok())
    return s;
  reader.take(sizeof(kMagic));
  uint64_t version = reader.integer(4);
  if (version != kPackageFormatVersion)
    return packageError("package format version " + std::to_string(version) +
                        " is not supported (this runtime reads " +
                        std::to_string(kPackageFormatVersion) + ")");
  uint64_t count = reader.integer(4);

  Package package;
  std::set<std::string> names;
  bool sawManifest = false;
  for (uint64_t i = 0; i < count; ++i) {
    std::string which = "section " + std::to_string(i);
    if (Status s = reader.need(4, which + " name length"); !s.ok())
      return s;
    uint64_t nameLength = reader.integer(4);
    if (nameLength == 0 || nameLength > kMaxSectionNameLength)
      return packageError("package corrupted: " + which + " name length " +
                          std::to_string(nameLength) + " is invalid");
    if (Status s = reader.need(nameLength, which + " name"); !s.ok())
      return s;
    std::string name(reinterpret_cast<const char *>(reader.take(nameLength)),
                     nameLength);
    if (!isAsciiName(name))
      return packageError("package corrupted: " + which +
                          " name is not printable ASCII");
    which = "section '" + name + "'";
    if (Status s = reader.need(8, which + " length"); !s.ok())
      return s;
    uint64_t length = reader.integer(8);
    if (Status s = reader.need(length, which); !s.ok())
      return s;
    const uint8_t *bytes = reader.take(length);
    if (!names.insert(name).second)
      return packageError("package corrupted: duplicate " + which);
    if (name == kManifestSection) {
      sawManifest = true;
      package.manifestText.assign(reinterpret_cast<const char *>(bytes),
                                  length);
    } else {
      package.codeSections.emplace(name,
                                   std::vector<uint8_t>(bytes, bytes + length));
    }
  }
  size_t hashedBytes = reader.offset();
  if (Status s = reader.need(8, "the checksum"); !s.ok())
    return s;
  uint64_t checksum = reader.integer(8);
  if (checksum != fnv1a64(data, hashedBytes))
    return packageError("package corrupted: checksum mismatch");
  if (reader.remaining())
    return packageError(
        "package corrupted: " + std::to_string(reader.remaining()) +
        " unexpected bytes after the checksum");
  if (!sawManifest)
    return packageError("package has no 'manifest' section");

  Expected<Manifest> manifest = parseManifest(package.manifestText);
  if (!manifest.ok())
    return manifest.status();
  package.manifest = manifest.take();
  names.erase(kManifestSection);
  if (Status s = checkTargetSections(package.manifest, names); !s.ok())
    return s;
  return package;
}

Expected<Package> mla::rt::readPackage(const std::string &path) {
  Expected<std::vector<uint8_t>> bytes = readFile(path);
  if (!bytes.ok())
    return bytes.status();
  Expected<Package> package = parsePackage(bytes->data(), bytes->size());
  if (!package.ok())
    return package.status().withContext(path);
  return package;
}
