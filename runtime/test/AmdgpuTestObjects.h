//===- AmdgpuTestObjects.h - code objects built by the tests -*- C++ -*-===//
//
// The checked-in AMDGPU code object, a MessagePack writer and ELF files
// around hand-built metadata notes (AmdgpuMetadataTest.cpp,
// AmdgpuMetadataErrorsTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_RUNTIME_TEST_AMDGPUTESTOBJECTS_H
#define MLA_RUNTIME_TEST_AMDGPUTESTOBJECTS_H

#include "TestUtils.h"

#include "mla/runtime/AmdgpuMetadata.h"
#include "mla/runtime/KernelParams.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

namespace mla::rt::test {

inline std::vector<uint8_t> fixtureObject() {
  return readBytes(std::string(MLA_TEST_DATA_DIR) + "/decode_h1_gfx942.hsaco");
}

inline std::string fixtureManifest() {
  std::ifstream in(std::string(MLA_TEST_DATA_DIR) +
                   "/decode_h1_gfx942.manifest");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline Expected<AmdgpuMetadata> parse(const std::vector<uint8_t> &bytes) {
  return parseAmdgpuMetadata(bytes.data(), bytes.size());
}

/// Builds MessagePack documents.
class MsgPack {
public:
  MsgPack &raw(std::initializer_list<uint8_t> bytes) {
    out.insert(out.end(), bytes);
    return *this;
  }
  MsgPack &be(uint64_t value, int bytes) {
    for (int i = bytes - 1; i >= 0; --i)
      out.push_back(static_cast<uint8_t>(value >> (8 * i)));
    return *this;
  }
  /// The shortest unsigned encoding, or a forced width (1, 2, 4, 8 bytes).
  MsgPack &uint(uint64_t value, int width = 0) {
    if (width == 0 && value < 128)
      return raw({static_cast<uint8_t>(value)});
    if (width == 0)
      width = value < 256            ? 1
              : value < 65536        ? 2
              : value < (1ull << 32) ? 4
                                     : 8;
    out.push_back(width == 1   ? 0xcc
                  : width == 2 ? 0xcd
                  : width == 4 ? 0xce
                               : 0xcf);
    return be(value, width);
  }
  MsgPack &sint(int64_t value, int width) {
    out.push_back(width == 1   ? 0xd0
                  : width == 2 ? 0xd1
                  : width == 4 ? 0xd2
                               : 0xd3);
    return be(static_cast<uint64_t>(value), width);
  }
  /// fixstr below 32 bytes unless `width` forces str8/16/32.
  MsgPack &str(const std::string &text, int width = 0) {
    if (width == 0 && text.size() < 32)
      out.push_back(static_cast<uint8_t>(0xa0 | text.size()));
    else {
      if (width == 0)
        width = 1;
      out.push_back(width == 1 ? 0xd9 : width == 2 ? 0xda : 0xdb);
      be(text.size(), width);
    }
    out.insert(out.end(), text.begin(), text.end());
    return *this;
  }
  MsgPack &map(size_t count, int width = 0) {
    if (width == 0 && count < 16)
      return raw({static_cast<uint8_t>(0x80 | count)});
    out.push_back(width == 4 ? 0xdf : 0xde);
    return be(count, width == 4 ? 4 : 2);
  }
  MsgPack &array(size_t count, int width = 0) {
    if (width == 0 && count < 16)
      return raw({static_cast<uint8_t>(0x90 | count)});
    out.push_back(width == 4 ? 0xdd : 0xdc);
    return be(count, width == 4 ? 4 : 2);
  }
  MsgPack &boolean(bool value) {
    return raw({value ? uint8_t{0xc3} : uint8_t{0xc2}});
  }

  std::vector<uint8_t> out;
};

/// One kernel's metadata; `skip` leaves a key out, `override` (key, writer)
/// replaces how a key's value is written.
struct KernelSpec {
  std::string name = "k";
  std::string skip;
  std::string overrideKey;
  std::function<void(MsgPack &)> overrideValue;
  bool extraKeys = false;
  /// Written as `.reqd_workgroup_size` when not empty.
  std::vector<uint64_t> reqd;
};

inline void writeKernel(MsgPack &m, const KernelSpec &spec) {
  struct Entry {
    const char *key;
    std::function<void(MsgPack &)> value;
  };
  std::vector<Entry> entries = {
      {".name", [&](MsgPack &p) { p.str(spec.name); }},
      {".symbol", [&](MsgPack &p) { p.str(spec.name + ".kd", 2); }},
      {".kernarg_segment_size", [](MsgPack &p) { p.uint(28, 2); }},
      {".kernarg_segment_align", [](MsgPack &p) { p.uint(8); }},
      {".group_segment_fixed_size", [](MsgPack &p) { p.uint(70000, 4); }},
      {".private_segment_fixed_size", [](MsgPack &p) { p.sint(0, 2); }},
      {".wavefront_size", [](MsgPack &p) { p.uint(64, 1); }},
      {".sgpr_count", [](MsgPack &p) { p.uint(97, 8); }},
      {".vgpr_count", [](MsgPack &p) { p.sint(80, 4); }},
      {".agpr_count", [](MsgPack &p) { p.sint(4, 8); }},
      {".max_flat_workgroup_size", [](MsgPack &p) { p.sint(256, 1 + 1); }},
      {".uses_dynamic_stack", [](MsgPack &p) { p.boolean(false); }},
      {".args",
       [](MsgPack &p) {
         p.array(3, 2);
         // A pointer, an f32 (named), a hidden argument.
         p.map(4).str(".offset").uint(0).str(".size").uint(8);
         p.str(".value_kind").str("global_buffer");
         p.str(".address_space").str("global");
         p.map(4, 2).str(".offset").uint(8).str(".size").uint(4);
         p.str(".value_kind").str("by_value").str(".name").str("factor", 4);
         p.map(3, 4).str(".offset").uint(16).str(".size").uint(8);
         p.str(".value_kind").str("hidden_block_count_x");
       }},
  };
  size_t count = 0;
  for (const Entry &entry : entries)
    count += entry.key != spec.skip;
  if (spec.extraKeys)
    count += 9;
  if (!spec.reqd.empty())
    count += 1;
  m.map(count, 2);
  for (const Entry &entry : entries) {
    if (entry.key == spec.skip)
      continue;
    m.str(entry.key);
    if (entry.key == spec.overrideKey)
      spec.overrideValue(m);
    else
      entry.value(m);
  }
  if (!spec.reqd.empty()) {
    m.str(".reqd_workgroup_size").array(spec.reqd.size());
    for (uint64_t n : spec.reqd)
      m.uint(n);
  }
  if (!spec.extraKeys)
    return;
  // Keys the reader ignores, in the remaining encodings.
  m.str(".nil").raw({0xc0});
  m.str(".true").boolean(true);
  m.str(".negative_fixint").raw({0xff});
  m.str(".int8").sint(-5, 1);
  m.str(".float32").raw({0xca}).be(0x3f800000, 4);
  m.str(".float64").raw({0xcb}).be(0x3ff0000000000000ull, 8);
  m.str(".bin8").raw({0xc4, 2, 0xde, 0xad});
  m.str(".bin16").raw({0xc5, 0, 1, 0xff});
  m.str(".bin32").raw({0xc6, 0, 0, 0, 0});
}

inline std::vector<uint8_t>
metadataDocument(const std::vector<KernelSpec> &kernels,
                 bool bigContainers = false) {
  MsgPack m;
  m.map(3, bigContainers ? 4 : 0);
  m.str("amdhsa.version").array(2, bigContainers ? 4 : 0).uint(1).uint(2);
  m.str("amdhsa.target").str("amdgcn-amd-amdhsa--gfx90a:xnack-", 1);
  m.str("amdhsa.kernels").array(kernels.size(), bigContainers ? 4 : 0);
  for (const KernelSpec &kernel : kernels)
    writeKernel(m, kernel);
  return m.out;
}

struct NoteSpec {
  std::string name = "AMDGPU";
  uint32_t type = kNoteAmdgpuMetadata;
  std::vector<uint8_t> desc;
};

/// An ELF64 LE EM_AMDGPU file whose note table holds `notes`, reachable
/// through a PT_NOTE program header and/or an SHT_NOTE section.
inline std::vector<uint8_t> elfWithNotes(const std::vector<NoteSpec> &notes,
                                         bool programHeader = true,
                                         bool section = true,
                                         uint64_t align = 4) {
  auto pad = [&](std::vector<uint8_t> &bytes) {
    while (bytes.size() % align)
      bytes.push_back(0);
  };
  std::vector<uint8_t> table;
  auto put32 = [](std::vector<uint8_t> &bytes, uint32_t v) {
    for (int i = 0; i < 4; ++i)
      bytes.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  for (const NoteSpec &note : notes) {
    put32(table, static_cast<uint32_t>(note.name.size() + 1));
    put32(table, static_cast<uint32_t>(note.desc.size()));
    put32(table, note.type);
    table.insert(table.end(), note.name.begin(), note.name.end());
    table.push_back(0);
    pad(table);
    table.insert(table.end(), note.desc.begin(), note.desc.end());
    pad(table);
  }
  std::vector<uint8_t> elf(64, 0);
  auto set = [&](size_t offset, uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i)
      elf[offset + i] = static_cast<uint8_t>(value >> (8 * i));
  };
  std::memcpy(elf.data(),
              "\x7f"
              "ELF",
              4);
  elf[4] = 2;    // ELFCLASS64
  elf[5] = 1;    // little-endian
  elf[6] = 1;    // EV_CURRENT
  elf[7] = 64;   // ELFOSABI_AMDGPU_HSA
  set(16, 3, 2); // ET_DYN
  set(18, kElfMachineAmdgpu, 2);
  set(20, 1, 4);
  set(48, 0x53f, 4); // gfx90a, xnack off, sramecc any
  set(52, 64, 2);
  uint64_t tableOffset = 64 + (programHeader ? 56 : 0);
  if (programHeader) {
    set(32, 64, 8); // e_phoff
    set(54, 56, 2);
    set(56, 1, 2);
    elf.resize(64 + 56, 0);
    set(64, 4, 4); // PT_NOTE
    set(64 + 8, tableOffset, 8);
    set(64 + 32, table.size(), 8);
    set(64 + 40, table.size(), 8);
    set(64 + 48, align, 8);
  }
  elf.insert(elf.end(), table.begin(), table.end());
  if (section) {
    while (elf.size() % 8)
      elf.push_back(0);
    uint64_t shoff = elf.size();
    set(40, shoff, 8);
    set(58, 64, 2);
    set(60, 2, 2);
    elf.resize(elf.size() + 128, 0); // a null section, then the notes
    size_t sh = shoff + 64;
    set(sh + 4, 7, 4); // SHT_NOTE
    set(sh + 24, tableOffset, 8);
    set(sh + 32, table.size(), 8);
    set(sh + 48, align, 8);
  }
  return elf;
}

inline std::vector<uint8_t>
elfWithMetadata(const std::vector<uint8_t> &document) {
  return elfWithNotes({{"AMDGPU", kNoteAmdgpuMetadata, document}});
}

inline std::string errorOf(const std::vector<uint8_t> &bytes) {
  Expected<AmdgpuMetadata> parsed = parse(bytes);
  EXPECT_FALSE(parsed.ok());
  if (parsed.ok())
    return "";
  EXPECT_EQ(parsed.status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos);
  return parsed.status().message();
}

} // namespace mla::rt::test

#endif // MLA_RUNTIME_TEST_AMDGPUTESTOBJECTS_H
