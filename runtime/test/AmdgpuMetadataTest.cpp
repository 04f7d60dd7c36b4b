//===- AmdgpuMetadataTest.cpp - AMDGPU code object metadata ---------------===//
//
// The reader on the checked-in code object (test/data, values from
// llvm-readelf --notes), on hand-built ELF files whose MessagePack uses
// every encoding, and on broken inputs (truncations and byte flips of the
// real object must fail cleanly, never crash); the kernarg layout and the
// checks against a manifest target. test/e2e/AmdgpuMetadataTest.cpp does the
// same against freshly compiled objects and llvm-readelf itself.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "mla/runtime/AmdgpuMetadata.h"
#include "mla/runtime/KernelParams.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

std::vector<uint8_t> fixtureObject() {
  return readBytes(std::string(MLA_TEST_DATA_DIR) + "/decode_h1_gfx942.hsaco");
}

std::string fixtureManifest() {
  std::ifstream in(std::string(MLA_TEST_DATA_DIR) +
                   "/decode_h1_gfx942.manifest");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Expected<AmdgpuMetadata> parse(const std::vector<uint8_t> &bytes) {
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

void writeKernel(MsgPack &m, const KernelSpec &spec) {
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

std::vector<uint8_t> metadataDocument(const std::vector<KernelSpec> &kernels,
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
std::vector<uint8_t> elfWithNotes(const std::vector<NoteSpec> &notes,
                                  bool programHeader = true,
                                  bool section = true, uint64_t align = 4) {
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

std::vector<uint8_t> elfWithMetadata(const std::vector<uint8_t> &document) {
  return elfWithNotes({{"AMDGPU", kNoteAmdgpuMetadata, document}});
}

std::string errorOf(const std::vector<uint8_t> &bytes) {
  Expected<AmdgpuMetadata> parsed = parse(bytes);
  EXPECT_FALSE(parsed.ok());
  if (parsed.ok())
    return "";
  EXPECT_EQ(parsed.status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos);
  return parsed.status().message();
}

} // namespace

//===----------------------------------------------------------------------===//
// The checked-in code object
//===----------------------------------------------------------------------===//

TEST(AmdgpuMetadataTest, ReadsTheCheckedInCodeObject) {
  Expected<AmdgpuMetadata> parsed = parse(fixtureObject());
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  const AmdgpuMetadata &m = *parsed;
  EXPECT_EQ(m.version, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(m.target, "amdgcn-amd-amdhsa--gfx942");
  EXPECT_EQ(m.processor(), "gfx942");
  EXPECT_EQ(m.elfFlags & 0xff, 0x4cu); // EF_AMDGPU_MACH_AMDGCN_GFX942
  ASSERT_EQ(m.kernels.size(), 2u);

  // llvm-readelf --notes test/data/decode_h1_gfx942.hsaco
  const AmdgpuKernelMetadata *k0 = m.findKernel("decode_k0");
  ASSERT_NE(k0, nullptr);
  EXPECT_EQ(k0->symbol, "decode_k0.kd");
  EXPECT_EQ(k0->kernargSegmentSize, 456u);
  EXPECT_EQ(k0->kernargSegmentAlign, 8u);
  EXPECT_EQ(k0->groupSegmentFixedSize, 0u);
  EXPECT_EQ(k0->privateSegmentFixedSize, 0u);
  EXPECT_EQ(k0->wavefrontSize, 64u);
  EXPECT_EQ(k0->sgprCount, 66u);
  EXPECT_EQ(k0->vgprCount, 52u);
  EXPECT_EQ(k0->agprCount, 0u);
  EXPECT_EQ(k0->maxFlatWorkgroupSize, 256u);
  EXPECT_FALSE(k0->usesDynamicStack);
  EXPECT_EQ(k0->reqdWorkgroupSize, (std::array<uint64_t, 3>{256, 1, 1}));
  // seq_lens (5 parameters), q (11), scale (1), block_table (7), kv (9),
  // two workspaces (13 + 11).
  ASSERT_EQ(k0->args.size(), 57u);
  EXPECT_EQ(k0->args[0].valueKind, "global_buffer");
  EXPECT_EQ(k0->args[0].addressSpace, "generic");
  EXPECT_EQ(k0->args[2].valueKind, "by_value");
  EXPECT_EQ(k0->args[16].offset, 128u); // the f32 scale
  EXPECT_EQ(k0->args[16].size, 4u);
  EXPECT_EQ(k0->args[17].offset, 136u); // realigned to 8
  EXPECT_EQ(k0->args[56].offset, 448u);
  EXPECT_TRUE(k0->args[0].name.empty());

  const AmdgpuKernelMetadata *k1 = m.findKernel("decode_k1");
  ASSERT_NE(k1, nullptr);
  EXPECT_EQ(k1->kernargSegmentSize, 352u);
  EXPECT_EQ(k1->args.size(), 44u);
  EXPECT_EQ(m.findKernel("decode_k2"), nullptr);
}

TEST(AmdgpuMetadataTest, TheCheckedInObjectMatchesItsManifest) {
  Expected<AmdgpuMetadata> metadata = parse(fixtureObject());
  Expected<Manifest> manifest = parseManifest(fixtureManifest());
  ASSERT_TRUE(metadata.ok() && manifest.ok()) << manifest.status().toString();
  const TargetSpec &target = *manifest->findTarget("gfx942");
  Status status =
      checkAmdgpuCodeObject(*metadata, *manifest, target, {65536, 64, false});
  EXPECT_TRUE(status.ok()) << status.toString();

  // The layout the HIP backend packs, slot by slot.
  for (const LaunchSpec &launch : target.launches) {
    std::vector<KernargSlot> layout =
        kernargLayout(launchParams(*manifest, target, launch));
    const AmdgpuKernelMetadata &kernel = *metadata->findKernel(launch.entry);
    ASSERT_EQ(layout.size(), kernel.args.size());
    for (size_t i = 0; i < layout.size(); ++i) {
      EXPECT_EQ(layout[i].offset, kernel.args[i].offset) << i;
      EXPECT_EQ(layout[i].size, kernel.args[i].size) << i;
    }
    EXPECT_EQ(kernargBufferBytes(layout), kernel.kernargSegmentSize);
  }
}

TEST(AmdgpuMetadataTest, ChecksAgainstTheManifestAndTheDevice) {
  AmdgpuMetadata metadata = *parse(fixtureObject());
  std::string text = fixtureManifest();
  Manifest manifest = *parseManifest(text);
  const TargetSpec &target = manifest.targets[0];
  auto check = [&](const AmdgpuMetadata &m, const Manifest &man,
                   AmdgpuDeviceLimits limits = {65536, 64, false}) {
    return checkAmdgpuCodeObject(m, man, man.targets[0], limits);
  };

  // Arguments in another order than the kernel's.
  Manifest swapped = manifest;
  std::swap(swapped.targets[0].launches[0].args[0],
            swapped.targets[0].launches[0].args[1]);
  Status status = check(metadata, swapped);
  EXPECT_EQ(status.code(), ErrorCode::InvalidPackage);
  EXPECT_EQ(status.message(),
            "kernel 'decode_k0': kernel argument 5 (size 2 of 'q') is at "
            "offset 40 (8 bytes, global_buffer) in the code object, the "
            "runtime packs it at offset 40 (8 bytes, by_value)");

  // A launch that passes one argument fewer.
  Manifest fewer = manifest;
  fewer.targets[0].launches[1].args.pop_back();
  status = check(metadata, fewer);
  EXPECT_EQ(status.message(),
            "kernel 'decode_k1': the code object declares 44 explicit kernel "
            "arguments, the runtime packs 35 for this launch");

  // A scale of another width shifts everything after it.
  Manifest wideScale = manifest;
  wideScale.args[4].dtype = DType::I64;
  status = check(metadata, wideScale);
  EXPECT_EQ(status.message(),
            "kernel 'decode_k0': kernel argument 16 (scalar 'scale', i64) is "
            "at offset 128 (4 bytes, by_value) in the code object, the "
            "runtime packs it at offset 128 (8 bytes, by_value)");

  Manifest renamed = manifest;
  renamed.targets[0].launches[1].entry = "decode_k9";
  status = check(metadata, renamed);
  EXPECT_EQ(status.message(),
            "launch 'decode_k9': the code object has no kernel 'decode_k9' "
            "(its kernels: decode_k0, decode_k1)");

  Manifest otherBlock = manifest;
  otherBlock.targets[0].launches[0].block = {128, 1, 1};
  status = check(metadata, otherBlock);
  EXPECT_EQ(status.message(),
            "launch 'decode_k0': block 128,1,1 differs from the kernel's "
            ".reqd_workgroup_size 256,1,1");
  AmdgpuMetadata unconstrained = metadata;
  for (AmdgpuKernelMetadata &k : unconstrained.kernels) {
    k.reqdWorkgroupSize.reset();
    k.maxFlatWorkgroupSize = 64;
  }
  status = check(unconstrained, manifest);
  EXPECT_EQ(status.message(),
            "launch 'decode_k0': block 256,1,1 has 256 threads, the kernel "
            "allows at most 64 (.max_flat_workgroup_size)");

  // Device limits: LDS (5792 dynamic bytes here), wavefront size.
  status = check(metadata, manifest, {5791, 64, false});
  EXPECT_EQ(status.code(), ErrorCode::Unsupported);
  EXPECT_EQ(status.message(),
            "launch 'decode_k0': 5792 bytes of dynamic LDS (shared) plus 0 "
            "static exceed the device's 5791 bytes per workgroup");
  AmdgpuMetadata withStatic = metadata;
  withStatic.kernels[0].groupSegmentFixedSize = 1;
  EXPECT_FALSE(check(withStatic, manifest, {5792, 64, false}).ok());
  EXPECT_TRUE(check(withStatic, manifest, {5793, 64, false}).ok());
  EXPECT_TRUE(check(metadata, manifest, {0, 64, false}).ok());
  status = check(metadata, manifest, {65536, 32, false});
  EXPECT_EQ(status.code(), ErrorCode::Unsupported);
  EXPECT_EQ(status.message(),
            "launch 'decode_k0': the kernel runs in wavefronts of 64 lanes, "
            "the device's are 32");

  // Scratch: reported unless allowed.
  AmdgpuMetadata spilling = metadata;
  spilling.kernels[1].privateSegmentFixedSize = 48;
  spilling.kernels[1].usesDynamicStack = true;
  status = check(spilling, manifest);
  EXPECT_EQ(status.code(), ErrorCode::Unsupported);
  EXPECT_EQ(status.message(),
            "launch 'decode_k1': the kernel uses scratch memory (48 private "
            "bytes per work-item, a dynamic stack): register spills the "
            "runtime does not accept");
  EXPECT_TRUE(check(spilling, manifest, {65536, 64, true}).ok());

  // A kernarg segment too small for its own arguments.
  AmdgpuMetadata shortSegment = metadata;
  shortSegment.kernels[1].kernargSegmentSize = 300;
  EXPECT_EQ(check(shortSegment, manifest).message(),
            "kernel 'decode_k1': .kernarg_segment_size 300 is smaller than "
            "the 352 bytes of its explicit arguments");

  // Hidden arguments are the HIP runtime's business.
  AmdgpuMetadata hidden = metadata;
  hidden.kernels[0].args.push_back({456, 4, "hidden_block_count_x", "", ""});
  hidden.kernels[0].kernargSegmentSize = 512;
  EXPECT_TRUE(check(hidden, manifest).ok());
  (void)target;
}

//===----------------------------------------------------------------------===//
// Hand-built files: every MessagePack encoding, notes in sections only
//===----------------------------------------------------------------------===//

TEST(AmdgpuMetadataTest, EveryMessagePackEncoding) {
  KernelSpec spec;
  spec.extraKeys = true;
  std::vector<uint8_t> bytes =
      elfWithMetadata(metadataDocument({spec}, /*bigContainers=*/true));
  Expected<AmdgpuMetadata> parsed = parse(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(parsed->version, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(parsed->target, "amdgcn-amd-amdhsa--gfx90a:xnack-");
  EXPECT_EQ(parsed->processor(), "gfx90a");
  EXPECT_EQ(parsed->elfFlags, 0x53fu);
  ASSERT_EQ(parsed->kernels.size(), 1u);
  const AmdgpuKernelMetadata &k = parsed->kernels[0];
  EXPECT_EQ(k.name, "k");
  EXPECT_EQ(k.symbol, "k.kd");
  EXPECT_EQ(k.kernargSegmentSize, 28u);
  EXPECT_EQ(k.groupSegmentFixedSize, 70000u);
  EXPECT_EQ(k.privateSegmentFixedSize, 0u);
  EXPECT_EQ(k.wavefrontSize, 64u);
  EXPECT_EQ(k.sgprCount, 97u);
  EXPECT_EQ(k.vgprCount, 80u);
  EXPECT_EQ(k.agprCount, 4u);
  EXPECT_EQ(k.maxFlatWorkgroupSize, 256u);
  EXPECT_FALSE(k.reqdWorkgroupSize.has_value());
  ASSERT_EQ(k.args.size(), 3u);
  EXPECT_EQ(k.args[0].addressSpace, "global");
  EXPECT_EQ(k.args[1].name, "factor");
  EXPECT_EQ(k.args[1].size, 4u);
  EXPECT_TRUE(k.args[2].isHidden());
  EXPECT_FALSE(k.args[1].isHidden());
}

TEST(AmdgpuMetadataTest, OptionalKeysAndKernelsWithoutArguments) {
  KernelSpec noAgpr;
  noAgpr.skip = ".agpr_count";
  KernelSpec noArgs;
  noArgs.name = "empty";
  noArgs.skip = ".args";
  KernelSpec reqd;
  reqd.name = "fixed";
  reqd.overrideKey = ".uses_dynamic_stack";
  reqd.overrideValue = [](MsgPack &p) { p.boolean(true); };
  reqd.reqd = {64, 2, 1};
  Expected<AmdgpuMetadata> parsed =
      parse(elfWithMetadata(metadataDocument({noAgpr, noArgs, reqd})));
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_FALSE(parsed->kernels[0].agprCount.has_value());
  EXPECT_TRUE(parsed->kernels[1].args.empty());
  EXPECT_TRUE(parsed->kernels[2].usesDynamicStack);
  EXPECT_EQ(parsed->kernels[2].reqdWorkgroupSize,
            (std::array<uint64_t, 3>{64, 2, 1}));
  EXPECT_EQ(parsed->findKernel("fixed"), &parsed->kernels[2]);

  reqd.reqd = {64, 1};
  EXPECT_EQ(errorOf(elfWithMetadata(metadataDocument({reqd}))),
            "AMDGPU code object: '.reqd_workgroup_size' of kernel 'fixed' has "
            "2 entries, expected 3");
}

TEST(AmdgpuMetadataTest, NotesInSectionsOnlyAlignedToEightAfterOthers) {
  std::vector<uint8_t> document = metadataDocument({KernelSpec{}});
  std::vector<NoteSpec> notes = {
      {"GNU", 3, {1, 2, 3, 4, 5}},
      {"AMDGPU", 31, {0}},  // another AMDGPU note type
      {"AMDGPUX", 32, {0}}, // another owner
      {"AMDGPU", 32, document}};
  for (bool programHeader : {true, false})
    for (uint64_t align : {uint64_t{4}, uint64_t{8}}) {
      SCOPED_TRACE(std::to_string(programHeader) + " " + std::to_string(align));
      Expected<AmdgpuMetadata> parsed =
          parse(elfWithNotes(notes, programHeader, !programHeader, align));
      ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
      EXPECT_EQ(parsed->kernels[0].name, "k");
    }
}

//===----------------------------------------------------------------------===//
// Malformed input
//===----------------------------------------------------------------------===//

TEST(AmdgpuMetadataTest, BadElfFiles) {
  std::vector<uint8_t> good = elfWithMetadata(metadataDocument({KernelSpec{}}));
  EXPECT_EQ(errorOf({}), "AMDGPU code object: not an ELF file (bad magic)");
  EXPECT_EQ(parseAmdgpuMetadata(nullptr, 100).status().message(),
            "AMDGPU code object: not an ELF file (bad magic)");
  std::vector<uint8_t> ptx = {'.', 'v', 'e', 'r', 's', 'i', 'o', 'n'};
  EXPECT_EQ(errorOf(ptx), "AMDGPU code object: not an ELF file (bad magic)");
  EXPECT_EQ(errorOf({good.begin(), good.begin() + 40}),
            "AMDGPU code object: truncated ELF header (40 bytes, need 64)");
  std::vector<uint8_t> bad = good;
  bad[4] = 1;
  EXPECT_EQ(errorOf(bad), "AMDGPU code object: not a 64-bit little-endian "
                          "ELF file (class 1, data encoding 1)");
  bad = good;
  bad[5] = 2;
  EXPECT_EQ(errorOf(bad), "AMDGPU code object: not a 64-bit little-endian "
                          "ELF file (class 2, data encoding 2)");
  bad = good;
  bad[6] = 0;
  EXPECT_EQ(errorOf(bad), "AMDGPU code object: ELF version 0 (expected 1)");
  bad = good;
  bad[18] = 62; // EM_X86_64
  EXPECT_EQ(errorOf(bad), "AMDGPU code object: ELF machine 62, expected 224 "
                          "(EM_AMDGPU)");
  bad = good;
  bad[33] = 0x10; // e_phoff = 0x1040, past the end
  EXPECT_EQ(errorOf(bad),
            "AMDGPU code object: the program header table (offset 4160, 1 x 56 "
            "bytes) lies outside the file (" +
                std::to_string(good.size()) + " bytes)");
  bad = good;
  bad[54] = 32; // e_phentsize
  EXPECT_EQ(errorOf(bad), "AMDGPU code object: program header entries of 32 "
                          "bytes (expected 56)");
  bad = good;
  bad[64 + 33] += 1; // p_filesz 256 bytes past the end
  EXPECT_NE(errorOf(bad).find("PT_NOTE segment 0 (offset 120, "),
            std::string::npos);
  bad = good;
  bad[120] = 0xff; // the note's name size
  EXPECT_NE(errorOf(bad).find("note at offset 120 in PT_NOTE segment 0 is "
                              "truncated"),
            std::string::npos);
  EXPECT_EQ(errorOf(elfWithNotes({{"GNU", 3, {1, 2, 3, 4}}})),
            "AMDGPU code object: no NT_AMDGPU_METADATA note (owner \"AMDGPU\", "
            "type 32; code object v3 or newer)");
  EXPECT_EQ(
      errorOf(elfWithNotes({{"AMDGPU", 32, metadataDocument({KernelSpec{}})}},
                           false, false)),
      "AMDGPU code object: no NT_AMDGPU_METADATA note (owner \"AMDGPU\", "
      "type 32; code object v3 or newer)");
}

TEST(AmdgpuMetadataTest, BadMessagePack) {
  auto withDocument = [](std::vector<uint8_t> document) {
    return errorOf(elfWithMetadata(document));
  };
  EXPECT_EQ(withDocument({0xc7, 1, 0, 0}),
            "AMDGPU code object: metadata: unsupported MessagePack type 0xc7 "
            "(ext) at byte 0");
  EXPECT_EQ(withDocument({0x81, 0xa1, 'x', 0xd4, 0, 0}),
            "AMDGPU code object: metadata: unsupported MessagePack type 0xd4 "
            "(fixext) at byte 3");
  EXPECT_EQ(withDocument({0xc1}),
            "AMDGPU code object: metadata: unsupported MessagePack type 0xc1 "
            "(never used) at byte 0");
  EXPECT_EQ(withDocument({0x81, 0xa3, 'a', 'b'}),
            "AMDGPU code object: metadata: MessagePack data truncated in a "
            "fixstr at byte 2");
  EXPECT_EQ(withDocument({0xdf, 0xff, 0xff, 0xff, 0xff}),
            "AMDGPU code object: metadata: MessagePack data truncated in a map "
            "at byte 5");
  EXPECT_EQ(withDocument({0xdd, 0x7f, 0xff, 0xff, 0xff, 0xc0}),
            "AMDGPU code object: metadata: MessagePack data truncated in an "
            "array at byte 5");
  EXPECT_EQ(withDocument({0xcf, 1, 2}),
            "AMDGPU code object: metadata: MessagePack data truncated in a "
            "uint64 at byte 1");
  EXPECT_EQ(withDocument({0x81, 0x01, 0xc0}),
            "AMDGPU code object: metadata: map key at byte 1 is an integer, "
            "expected a string");
  EXPECT_EQ(withDocument({0x80, 0xc0}),
            "AMDGPU code object: metadata: 1 bytes after the MessagePack "
            "document");
  EXPECT_EQ(withDocument({0x93, 1, 2, 3}),
            "AMDGPU code object: metadata is an array, expected a map");
  std::vector<uint8_t> deep(100, 0x91);
  deep.push_back(0xc0);
  EXPECT_EQ(withDocument(deep),
            "AMDGPU code object: metadata: MessagePack nesting deeper than 64 "
            "at byte 65");
  EXPECT_EQ(withDocument({0x80}),
            "AMDGPU code object: the metadata has no 'amdhsa.version'");
}

TEST(AmdgpuMetadataTest, MissingKeysAndWrongTypes) {
  auto kernelError = [](KernelSpec spec) {
    return errorOf(elfWithMetadata(metadataDocument({spec})));
  };
  for (const char *key :
       {".symbol", ".kernarg_segment_size", ".kernarg_segment_align",
        ".group_segment_fixed_size", ".private_segment_fixed_size",
        ".wavefront_size", ".sgpr_count", ".vgpr_count",
        ".max_flat_workgroup_size", ".uses_dynamic_stack"}) {
    KernelSpec spec;
    spec.skip = key;
    EXPECT_EQ(kernelError(spec), "AMDGPU code object: kernel 'k' has no '" +
                                     std::string(key) + "'");
  }
  KernelSpec spec;
  spec.skip = ".name";
  EXPECT_EQ(kernelError(spec), "AMDGPU code object: kernel 0 has no '.name'");

  spec = {};
  spec.overrideKey = ".wavefront_size";
  spec.overrideValue = [](MsgPack &p) { p.str("64"); };
  EXPECT_EQ(kernelError(spec),
            "AMDGPU code object: '.wavefront_size' of kernel 'k' is a string, "
            "expected a non-negative integer");
  spec.overrideValue = [](MsgPack &p) { p.sint(-1, 1); };
  EXPECT_EQ(kernelError(spec),
            "AMDGPU code object: '.wavefront_size' of kernel 'k' is -1, "
            "expected a non-negative integer");
  spec.overrideValue = [](MsgPack &p) { p.raw({0xca}).be(0x42800000, 4); };
  EXPECT_EQ(kernelError(spec),
            "AMDGPU code object: '.wavefront_size' of kernel 'k' is a float, "
            "expected a non-negative integer");
  spec.overrideKey = ".uses_dynamic_stack";
  spec.overrideValue = [](MsgPack &p) { p.uint(0); };
  EXPECT_EQ(kernelError(spec),
            "AMDGPU code object: '.uses_dynamic_stack' of kernel 'k' is an "
            "integer, expected a boolean");
  spec.overrideKey = ".symbol";
  spec.overrideValue = [](MsgPack &p) { p.raw({0xc4, 1, 'x'}); };
  EXPECT_EQ(kernelError(spec),
            "AMDGPU code object: '.symbol' of kernel 'k' is binary data, "
            "expected a string");
  spec.overrideKey = ".args";
  spec.overrideValue = [](MsgPack &p) { p.map(0); };
  EXPECT_EQ(kernelError(spec),
            "AMDGPU code object: '.args' of kernel 'k' is a map, expected an "
            "array");
  spec.overrideValue = [](MsgPack &p) { p.array(1).uint(3); };
  EXPECT_EQ(kernelError(spec),
            "AMDGPU code object: kernel 'k' arg 0 is an integer, expected a "
            "map");
  spec.overrideValue = [](MsgPack &p) {
    p.array(1).map(2).str(".offset").uint(0).str(".value_kind").str("x");
  };
  EXPECT_EQ(kernelError(spec),
            "AMDGPU code object: kernel 'k' arg 0 has no '.size'");
  spec.overrideKey = ".name";
  spec.overrideValue = [](MsgPack &p) { p.raw({0xc0}); };
  EXPECT_EQ(kernelError(spec),
            "AMDGPU code object: '.name' of kernel 0 is nil, expected a "
            "string");

  MsgPack document;
  document.map(3).str("amdhsa.version").array(2).uint(1).uint(2);
  document.str("amdhsa.target").str("amdgcn-amd-amdhsa--gfx942");
  document.str("amdhsa.kernels").array(1).uint(7);
  EXPECT_EQ(errorOf(elfWithMetadata(document.out)),
            "AMDGPU code object: kernel 0 is an integer, expected a map");
  MsgPack noKernels;
  noKernels.map(2).str("amdhsa.version").array(1).raw({0xc3});
  noKernels.str("amdhsa.target").str("amdgcn-amd-amdhsa--gfx942");
  EXPECT_EQ(errorOf(elfWithMetadata(noKernels.out)),
            "AMDGPU code object: 'amdhsa.version' of the metadata is a "
            "boolean, expected a non-negative integer");
}

TEST(AmdgpuMetadataTest, TruncationsOfTheRealObjectFailCleanly) {
  std::vector<uint8_t> object = fixtureObject();
  // The metadata note ends at 0x200 + 0x14b4 (llvm-readelf -l): shorter
  // prefixes lose it, longer ones (section table gone) still parse.
  const size_t noteEnd = 0x200 + 0x14b4;
  ASSERT_LT(noteEnd, object.size());
  for (size_t size = 0; size < object.size(); ++size) {
    std::vector<uint8_t> prefix(object.begin(), object.begin() + size);
    prefix.shrink_to_fit();
    Expected<AmdgpuMetadata> parsed = parse(prefix);
    ASSERT_EQ(parsed.ok(), size >= noteEnd) << size;
    if (!parsed.ok()) {
      ASSERT_EQ(parsed.status().message().rfind("AMDGPU code object: ", 0), 0u);
    }
  }
}

TEST(AmdgpuMetadataTest, CorruptedBytesNeverCrash) {
  std::vector<uint8_t> object = fixtureObject();
  // Every byte of the headers and the note, flipped; then random damage.
  size_t failures = 0, parsed = 0;
  for (size_t i = 0; i < 0x200 + 0x14b4; ++i)
    for (uint8_t mask : {uint8_t{0xff}, uint8_t{0x01}, uint8_t{0x80}}) {
      std::vector<uint8_t> copy = object;
      copy[i] ^= mask;
      Expected<AmdgpuMetadata> result = parse(copy);
      (result.ok() ? parsed : failures) += 1;
    }
  std::mt19937 random(1234);
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> copy = object;
    for (int n = 0; n < 8; ++n)
      copy[0x200 + random() % 0x14b4] = static_cast<uint8_t>(random());
    copy.resize(random() % (copy.size() + 1));
    Expected<AmdgpuMetadata> result = parse(copy);
    (result.ok() ? parsed : failures) += 1;
  }
  EXPECT_GT(failures, 0u);
  EXPECT_GT(parsed, 0u); // e.g. flips inside a string value
}

//===----------------------------------------------------------------------===//
// Target IDs
//===----------------------------------------------------------------------===//

TEST(AmdgpuMetadataTest, ProcessorsAndTargetCompatibility) {
  EXPECT_EQ(amdgpuProcessor("amdgcn-amd-amdhsa--gfx942"), "gfx942");
  EXPECT_EQ(amdgpuProcessor("gfx942:sramecc+:xnack-"), "gfx942");
  EXPECT_EQ(amdgpuProcessor("gfx90a"), "gfx90a");
  EXPECT_EQ(amdgpuProcessor(""), "");

  EXPECT_TRUE(
      amdgpuTargetRuns("amdgcn-amd-amdhsa--gfx942", "gfx942:sramecc+:xnack-"));
  EXPECT_TRUE(amdgpuTargetRuns("gfx942", "gfx942"));
  EXPECT_TRUE(amdgpuTargetRuns("amdgcn-amd-amdhsa--gfx90a:xnack-",
                               "gfx90a:sramecc-:xnack-"));
  EXPECT_FALSE(amdgpuTargetRuns("amdgcn-amd-amdhsa--gfx90a:xnack+",
                                "gfx90a:sramecc-:xnack-"));
  EXPECT_TRUE(amdgpuTargetRuns("gfx90a:xnack+", "gfx90a"));
  EXPECT_FALSE(amdgpuTargetRuns("amdgcn-amd-amdhsa--gfx942", "gfx950"));
  EXPECT_FALSE(amdgpuTargetRuns("amdgcn-amd-amdhsa--gfx94", "gfx942"));
  EXPECT_FALSE(amdgpuTargetRuns("", ""));
}

//===----------------------------------------------------------------------===//
// Kernarg layout and packing (what the HIP backend hands to the runtime)
//===----------------------------------------------------------------------===//

TEST(KernargLayoutTest, NaturalAlignmentOfTheMemrefAbi) {
  std::vector<LaunchParam> params = {
      {true, DType::F32, 2, "'x'"},   {false, DType::F32, 0, "'a'"},
      {false, DType::BF16, 0, "'b'"}, {true, DType::I32, 0, "workspace 5"},
      {false, DType::I64, 0, "'n'"},  {false, DType::F16, 0, "'h'"}};
  std::vector<KernargSlot> layout = kernargLayout(params);
  // x: 7 x 8 bytes at 0..56; a at 56; b at 60; workspace (rank 0) at 64,
  // 72, 80; n at 88; h at 96.
  std::vector<size_t> offsets = {0,  8,  16, 24, 32, 40, 48,
                                 56, 60, 64, 72, 80, 88, 96};
  ASSERT_EQ(layout.size(), offsets.size());
  for (size_t i = 0; i < layout.size(); ++i)
    EXPECT_EQ(layout[i].offset, offsets[i]) << i;
  EXPECT_TRUE(layout[0].isPointer);
  EXPECT_TRUE(layout[1].isPointer);
  EXPECT_FALSE(layout[2].isPointer);
  EXPECT_EQ(layout[3].part, KernargPart::Size);
  EXPECT_EQ(layout[6].part, KernargPart::Stride);
  EXPECT_EQ(layout[6].dim, 1);
  EXPECT_EQ(layout[8].size, 2u);
  EXPECT_EQ(kernargBufferBytes(layout), 104u);
  EXPECT_EQ(kernargBufferBytes({}), 0u);
  EXPECT_EQ(describeKernargSlot(layout, 1, params),
            "kernel argument 1 (the aligned pointer of 'x')");
  EXPECT_EQ(describeKernargSlot(layout, 0, params),
            "kernel argument 0 (the allocated pointer of 'x')");
  EXPECT_EQ(describeKernargSlot(layout, 2, params),
            "kernel argument 2 (the offset of 'x')");
  EXPECT_EQ(describeKernargSlot(layout, 6, params),
            "kernel argument 6 (stride 1 of 'x')");
  EXPECT_EQ(describeKernargSlot(layout, 8, params),
            "kernel argument 8 (scalar 'b', bf16)");
  EXPECT_EQ(describeKernargSlot(layout, 10, params),
            "kernel argument 10 (the aligned pointer of workspace 5)");
  EXPECT_EQ(describeKernargSlot(layout, 99, params), "kernel argument 99");
}

TEST(KernargLayoutTest, LaunchParamsFromTheManifest) {
  Manifest manifest = *parseManifest(fixtureManifest());
  const TargetSpec &target = manifest.targets[0];
  std::vector<LaunchParam> params =
      launchParams(manifest, target, target.launches[0]); // 3,0,4,2,1,7,8
  ASSERT_EQ(params.size(), 7u);
  EXPECT_EQ(params[0].name, "'seq_lens'");
  EXPECT_EQ(params[0].rank, 1);
  EXPECT_EQ(params[0].dtype, DType::I32);
  EXPECT_FALSE(params[2].isTensor);
  EXPECT_EQ(params[2].dtype, DType::F32);
  EXPECT_EQ(params[5].name, "workspace 7");
  EXPECT_EQ(params[5].rank, 5);
  EXPECT_TRUE(params[5].isTensor);
}

TEST(KernargLayoutTest, PacksTheBufferAtTheSlots) {
  alignas(64) float x[6];
  ArgValue tensor = TensorView{x, DType::F32, {2, 3}};
  ArgValue scale = Scalar::f32(0.5f);
  ArgValue half = Scalar::bf16(1.0f);
  KernelParams params;
  packKernelParams({&tensor, &scale, &half}, params);
  std::vector<KernargSlot> layout =
      kernargLayout({{true, DType::F32, 2, "'x'"},
                     {false, DType::F32, 0, "'s'"},
                     {false, DType::BF16, 0, "'h'"}});
  std::vector<uint8_t> buffer(3, 0xee);
  size_t bytes = kernargBufferBytes(layout);
  ASSERT_EQ(bytes, 64u);
  Status status = packKernargBuffer(params, layout, bytes, buffer);
  ASSERT_TRUE(status.ok()) << status.toString();
  ASSERT_EQ(buffer.size(), 64u);
  uint64_t words[7];
  std::memcpy(words, buffer.data(), 56);
  uint64_t address = reinterpret_cast<uintptr_t>(x);
  EXPECT_EQ(words[0], address);
  EXPECT_EQ(words[1], address);
  EXPECT_EQ(words[2], 0u);
  EXPECT_EQ(words[3], 2u);
  EXPECT_EQ(words[4], 3u);
  EXPECT_EQ(words[5], 3u);
  EXPECT_EQ(words[6], 1u);
  float s;
  std::memcpy(&s, buffer.data() + 56, 4);
  EXPECT_EQ(s, 0.5f);
  EXPECT_EQ(buffer[60], 0x80); // bf16 1.0 = 0x3f80
  EXPECT_EQ(buffer[61], 0x3f);
  EXPECT_EQ(buffer[62], 0);
  EXPECT_EQ(buffer[63], 0);

  // Reuse keeps the storage.
  const uint8_t *storage = buffer.data();
  ASSERT_TRUE(packKernargBuffer(params, layout, bytes, buffer).ok());
  EXPECT_EQ(buffer.data(), storage);

  std::vector<KernargSlot> shorter(layout.begin(), layout.end() - 1);
  EXPECT_EQ(packKernargBuffer(params, shorter, bytes, buffer).message(),
            "the launch has 9 kernel arguments, the kernel takes 8");
  std::vector<KernargSlot> wider = layout;
  wider[7].size = 8;
  EXPECT_EQ(packKernargBuffer(params, wider, bytes, buffer).message(),
            "kernel argument 7 has 4 bytes, the kernel takes 8");
  EXPECT_TRUE(packKernargBuffer(params, layout, 62, buffer).ok());
  EXPECT_EQ(packKernargBuffer(params, layout, 61, buffer).message(),
            "kernel argument 8 ends past the 61-byte kernarg buffer");
}
