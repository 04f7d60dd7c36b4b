//===- AmdgpuMetadataErrorsTest.cpp - broken code objects, kernargs ------===//
//
// The metadata reader on broken inputs (bad ELF files and MessagePack,
// missing keys; truncations and byte flips of the checked-in object must
// fail cleanly, never crash), processor compatibility and the kernarg
// layout.
//
//===----------------------------------------------------------------------===//

#include "AmdgpuTestObjects.h"
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
