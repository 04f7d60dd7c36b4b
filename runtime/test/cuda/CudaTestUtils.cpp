//===- CudaTestUtils.cpp --------------------------------------------------===//

#include "CudaTestUtils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <sstream>

using namespace mla::rt;
using namespace mla::rt::test;

const char *mla::rt::test::testCudaDriverPath() { return MLA_TEST_CUDA_DRIVER; }

bool mla::rt::test::usingFakeCudaDriver() {
  return std::strcmp(MLA_TEST_CUDA_DRIVER, "libcuda.so.1") != 0;
}

Expected<Device> mla::rt::test::openTestCudaDevice(int ordinal) {
  CudaBackendOptions options;
  options.ordinal = ordinal;
  options.driverPath = testCudaDriverPath();
  Expected<std::shared_ptr<Backend>> backend = createCudaBackend(options);
  if (!backend.ok())
    return backend.status();
  return Device(backend.take());
}

const char *const mla::rt::test::kScalePtx = R"ptx(//
// mla_test_scale(memref<?x?xf32> src, memref<?x?xf32> dst, f32 factor)
// in MLIR's default memref lowering: each memref is (allocated, aligned,
// offset, size0, size1, stride0, stride1). Block x handles row x; its
// threads stride over the columns: dst[r][c] = src[r][c] * factor.
//
.version 7.0
.target sm_80
.address_size 64

.visible .entry mla_test_scale(
    .param .u64 src_allocated, .param .u64 src_aligned, .param .u64 src_offset,
    .param .u64 src_size0, .param .u64 src_size1,
    .param .u64 src_stride0, .param .u64 src_stride1,
    .param .u64 dst_allocated, .param .u64 dst_aligned, .param .u64 dst_offset,
    .param .u64 dst_size0, .param .u64 dst_size1,
    .param .u64 dst_stride0, .param .u64 dst_stride1,
    .param .f32 factor)
{
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<20>;
    .reg .f32 %f<4>;

    ld.param.u64 %rd1, [src_aligned];
    ld.param.u64 %rd2, [src_offset];
    ld.param.u64 %rd3, [src_size0];
    ld.param.u64 %rd4, [src_size1];
    ld.param.u64 %rd5, [src_stride0];
    ld.param.u64 %rd6, [src_stride1];
    ld.param.u64 %rd7, [dst_aligned];
    ld.param.u64 %rd8, [dst_offset];
    ld.param.u64 %rd9, [dst_stride0];
    ld.param.u64 %rd10, [dst_stride1];
    ld.param.f32 %f1, [factor];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd7, %rd7;
    mov.u32 %r1, %ctaid.x;
    cvt.u64.u32 %rd11, %r1;
    setp.ge.s64 %p1, %rd11, %rd3;
    @%p1 bra DONE;
    mov.u32 %r2, %tid.x;
    cvt.u64.u32 %rd12, %r2;
    mov.u32 %r3, %ntid.x;
    cvt.u64.u32 %rd13, %r3;
LOOP:
    setp.ge.s64 %p2, %rd12, %rd4;
    @%p2 bra DONE;
    mad.lo.s64 %rd14, %rd11, %rd5, %rd2;
    mad.lo.s64 %rd14, %rd12, %rd6, %rd14;
    shl.b64 %rd14, %rd14, 2;
    add.s64 %rd14, %rd1, %rd14;
    ld.global.f32 %f2, [%rd14];
    mul.rn.f32 %f3, %f2, %f1;
    mad.lo.s64 %rd15, %rd11, %rd9, %rd8;
    mad.lo.s64 %rd15, %rd12, %rd10, %rd15;
    shl.b64 %rd15, %rd15, 2;
    add.s64 %rd15, %rd7, %rd15;
    st.global.f32 [%rd15], %f3;
    add.s64 %rd12, %rd12, %rd13;
    bra.uni LOOP;
DONE:
    ret;
}
)ptx";

std::string mla::rt::test::sm80Manifest(const std::string &hostManifest) {
  std::string text = hostManifest;
  const std::string host = "target host-x86_64 code.host-x86_64";
  size_t at = text.find(host);
  EXPECT_NE(at, std::string::npos);
  if (at == std::string::npos)
    return text;
  text.replace(at, host.size(), "target sm_80 code.sm_80");
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    out += line + (line.rfind("launch ", 0) == 0 ? " block 32,1,1\n" : "\n");
  return out;
}

std::string mla::rt::test::noopTargetPtx(const Manifest &manifest,
                                         const TargetSpec &target) {
  std::string ptx = ".version 7.0\n.target sm_80\n.address_size 64\n";
  std::vector<std::string> done;
  for (const LaunchSpec &launch : target.launches) {
    if (std::find(done.begin(), done.end(), launch.entry) != done.end())
      continue;
    done.push_back(launch.entry);
    std::string params;
    int count = 0;
    auto add = [&](const char *type) {
      params += std::string(count ? ",\n    " : "    ") + ".param " + type +
                " p" + std::to_string(count);
      ++count;
    };
    for (const LaunchParam &param : launchParams(manifest, target, launch)) {
      if (!param.isTensor) {
        size_t bytes = dtypeSize(param.dtype);
        add(bytes == 2 ? ".b16" : bytes == 4 ? ".b32" : ".b64");
        continue;
      }
      for (int i = 0; i < 3 + 2 * param.rank; ++i)
        add(".u64");
    }
    ptx += "\n.visible .entry " + launch.entry + "(\n" + params +
           ")\n{\n    ret;\n}\n";
  }
  return ptx;
}

Package mla::rt::test::ptxPackage(const std::string &manifest,
                                  const std::string &ptx, bool trailingNul) {
  Expected<Manifest> parsed = parseManifest(manifest);
  EXPECT_TRUE(parsed.ok()) << parsed.status().toString();
  if (!parsed.ok())
    return {};
  std::vector<uint8_t> code(ptx.begin(), ptx.end());
  if (trailingNul)
    code.push_back(0);
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
