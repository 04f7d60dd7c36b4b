//===- Package.h - The .mlapkg container ------------------------*- C++ -*-===//
//
// Format version 1, little-endian:
//   bytes 0..7 : magic "MLAPKG\0\1"
//   u32        : format_version (= 1)
//   u32        : section count N
//   N times    : u32 name_len, name bytes (ASCII), u64 data_len, data bytes
//   u64        : FNV-1a 64-bit hash of every byte before it
// Sections: `manifest` (text) and one `code.<target>` per target.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_PACKAGE_H
#define MLA_RUNTIME_PACKAGE_H

#include "mla/runtime/Manifest.h"
#include "mla/runtime/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mla::rt {

constexpr uint32_t kPackageFormatVersion = 1;

/// Code sections, in file order: (section name, bytes).
using CodeSections = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

/// A parsed, checked package: the manifest and every code section.
struct Package {
  std::string manifestText;
  Manifest manifest;
  std::map<std::string, std::vector<uint8_t>> codeSections;

  /// nullptr when absent.
  const std::vector<uint8_t> *findSection(const std::string &name) const;
};

/// FNV-1a 64-bit hash (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
uint64_t fnv1a64(const uint8_t *data, size_t size);

/// Checks the manifest (it must parse, and every target's section must be
/// among `codeSections`; section names must be unique, ASCII and not
/// "manifest") and serializes the package.
Expected<std::vector<uint8_t>> encodePackage(const std::string &manifestText,
                                             const CodeSections &codeSections);

/// encodePackage, then writes the bytes to a temporary file next to `path`
/// and renames it over `path`, so readers never see a partial package.
Status writePackage(const std::string &path, const std::string &manifestText,
                    const CodeSections &codeSections);

/// Parses a package from memory. Errors (InvalidPackage or InvalidManifest):
/// bad magic, unsupported format version, truncation, checksum mismatch,
/// trailing bytes, duplicate or missing sections, manifest errors.
Expected<Package> parsePackage(const uint8_t *data, size_t size);

/// Reads and parses a package file (IOError when it cannot be read).
Expected<Package> readPackage(const std::string &path);

} // namespace mla::rt

#endif // MLA_RUNTIME_PACKAGE_H
