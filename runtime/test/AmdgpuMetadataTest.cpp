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
