//===- HostBackendTest.cpp - Host loading, numerics and threading ---------===//

#include "TestUtils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

Kernel loadDecode(const DecodeShape &shape, unsigned threads = 0) {
  Expected<Device> device = Device::open("host", {threads});
  EXPECT_TRUE(device.ok()) << device.status().toString();
  Expected<Kernel> kernel = device->loadKernel(decodePackage(shape));
  EXPECT_TRUE(kernel.ok()) << kernel.status().toString();
  return kernel.take();
}

struct NumericsCase {
  const char *name;
  DecodeShape shape;
  std::vector<int32_t> lengths;
  int64_t maxPages;
  unsigned threads;
};

void PrintTo(const NumericsCase &c, std::ostream *os) { *os << c.name; }

class DecodeNumericsTest : public ::testing::TestWithParam<NumericsCase> {};

} // namespace

TEST_P(DecodeNumericsTest, MatchesFloat64Reference) {
  const NumericsCase &c = GetParam();
  Kernel kernel = loadDecode(c.shape, c.threads);
  DecodeData data = makeDecodeData(c.shape, c.lengths, c.maxPages, 1234);
  Status status = kernel.launchDecode(data.args());
  ASSERT_TRUE(status.ok()) << status.toString();
  expectMatchesReference(c.shape, data);
}

static DecodeShape shapeWith(DType dtype, int64_t pageSize, int64_t heads = 4,
                             int64_t latent = 32, int64_t rope = 8,
                             int64_t qLen = 1, int64_t splits = 3) {
  DecodeShape shape;
  shape.dtype = dtype;
  shape.pageSize = pageSize;
  shape.heads = heads;
  shape.latentDim = latent;
  shape.ropeDim = rope;
  shape.qLen = qLen;
  shape.kvSplits = splits;
  return shape;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DecodeNumericsTest,
    ::testing::Values(
        NumericsCase{
            "bf16_page1", shapeWith(DType::BF16, 1), {5, 0, 17}, 20, 3},
        NumericsCase{
            "bf16_page3", shapeWith(DType::BF16, 3), {1, 10, 29, 7}, 12, 2},
        NumericsCase{
            "bf16_page16", shapeWith(DType::BF16, 16), {33, 100, 16}, 7, 4},
        NumericsCase{"f32_page3_qlen2",
                     shapeWith(DType::F32, 3, 2, 16, 16, 2, 4),
                     {8, 2},
                     4,
                     1},
        NumericsCase{
            "f32_dynamic_page_size", shapeWith(DType::F32, 0), {40, 3}, 3, 2},
        NumericsCase{"bf16_deepseek_dims",
                     shapeWith(DType::BF16, 64, 16, 512, 64, 1, 4),
                     {130, 64},
                     3,
                     0}),
    [](const ::testing::TestParamInfo<NumericsCase> &info) {
      return std::string(info.param.name);
    });

TEST(HostBackendTest, ConcurrentLaunchesFromEightThreads) {
  DecodeShape shape = shapeWith(DType::BF16, 3);
  Kernel kernel = loadDecode(shape, 4);
  constexpr int kThreads = 8, kLaunches = 5;
  // Each thread has its own data (and so its own batch size); the expected
  // outputs come from a sequential launch of the same data.
  std::vector<DecodeData> data, expected;
  for (int t = 0; t < kThreads; ++t) {
    std::vector<int32_t> lengths(1 + t % 3, 9 + 5 * t);
    data.push_back(makeDecodeData(shape, lengths, 20, 100 + t));
    expected.push_back(makeDecodeData(shape, lengths, 20, 100 + t));
    ASSERT_TRUE(kernel.launchDecode(expected.back().args()).ok());
  }
  std::vector<Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kLaunches && results[t].ok(); ++i)
        results[t] = kernel.launchDecode(data[t].args());
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(results[t].ok()) << results[t].toString();
    EXPECT_EQ(std::memcmp(data[t].o.data(), expected[t].o.data(),
                          data[t].o.sizeInBytes()),
              0)
        << "thread " << t;
    EXPECT_EQ(std::memcmp(data[t].lse.data(), expected[t].lse.data(),
                          data[t].lse.sizeInBytes()),
              0)
        << "thread " << t;
  }
}

TEST(HostBackendTest, WorkspacesFollowTheBatchSize) {
  DecodeShape shape = shapeWith(DType::F32, 16);
  Kernel kernel = loadDecode(shape, 2);
  for (std::vector<int32_t> lengths :
       {std::vector<int32_t>{4}, {30, 31, 32, 1, 2}, {7, 8}}) {
    DecodeData data = makeDecodeData(shape, lengths, 2, 7);
    ASSERT_TRUE(kernel.launchDecode(data.args()).ok());
    expectMatchesReference(shape, data);
  }
}

TEST(HostBackendTest, KernelOutlivesDeviceAndPackage) {
  DecodeShape shape = shapeWith(DType::F32, 16);
  std::optional<Kernel> kernel;
  {
    Expected<Device> device = Device::open("host", {2});
    ASSERT_TRUE(device.ok());
    Package package = decodePackage(shape);
    Expected<Kernel> loaded = device->loadKernel(package);
    ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
    kernel = loaded.take();
  }
  DecodeData data = makeDecodeData(shape, {20}, 2, 3);
  ASSERT_TRUE(kernel->launchDecode(data.args()).ok());
  expectMatchesReference(shape, data);
}

TEST(HostBackendTest, TwoKernelsFromDifferentCodeObjects) {
  // Two code objects loaded at once must not be confused by the loader.
  Expected<Device> device = Device::open("host");
  ASSERT_TRUE(device.ok());
  DecodeShape bf16 = shapeWith(DType::BF16, 3), f32 = shapeWith(DType::F32, 3);
  Expected<Kernel> first = device->loadKernel(decodePackage(bf16));
  Expected<Kernel> second = device->loadKernel(decodePackage(f32));
  ASSERT_TRUE(first.ok() && second.ok());
  DecodeData a = makeDecodeData(bf16, {11}, 4, 1);
  DecodeData b = makeDecodeData(f32, {11}, 4, 1);
  ASSERT_TRUE(first->launchDecode(a.args()).ok());
  ASSERT_TRUE(second->launchDecode(b.args()).ok());
  expectMatchesReference(bf16, a);
  expectMatchesReference(f32, b);
}

TEST(HostBackendTest, RejectsCodeThatIsNotAnElfSharedObject) {
  DecodeShape shape;
  Expected<std::vector<uint8_t>> bytes = encodePackage(
      decodeManifest(shape), {{"code.host-x86_64", {'n', 'o', 't'}}});
  ASSERT_TRUE(bytes.ok());
  Expected<Package> package = parsePackage(bytes->data(), bytes->size());
  ASSERT_TRUE(package.ok());
  Expected<Kernel> kernel = Device::open("host")->loadKernel(*package);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), ErrorCode::BackendError);
  EXPECT_EQ(kernel.status().message(),
            "target 'host-x86_64': host code object is not an ELF file");
}

TEST(HostBackendTest, ReportsAMissingEntry) {
  DecodeShape shape;
  std::string manifest = decodeManifest(shape);
  manifest.replace(manifest.find("mla_decode_k1"), 13, "mla_decode_k9");
  Expected<std::vector<uint8_t>> bytes =
      encodePackage(manifest, {{"code.host-x86_64", testKernelCode()}});
  ASSERT_TRUE(bytes.ok());
  Expected<Kernel> kernel = Device::open("host")->loadKernel(
      *parsePackage(bytes->data(), bytes->size()));
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().message(),
            "target 'host-x86_64': the host code object has no entry "
            "'mla_decode_k9'");
}

TEST(HostBackendTest, PicksTheTargetTheDeviceRuns) {
  DecodeShape shape;
  std::string manifest = decodeManifest(shape);
  std::string hostBlock = manifest.substr(manifest.find("target "));
  std::string gpuBlock = hostBlock;
  gpuBlock.replace(gpuBlock.find("host-x86_64 code.host-x86_64"), 28,
                   "gfx942 code.gfx942");
  manifest =
      manifest.substr(0, manifest.find("target ")) + gpuBlock + hostBlock;
  Expected<std::vector<uint8_t>> bytes =
      encodePackage(manifest, {{"code.gfx942", {1, 2, 3}},
                               {"code.host-x86_64", testKernelCode()}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  Expected<Package> package = parsePackage(bytes->data(), bytes->size());
  ASSERT_TRUE(package.ok());
  Expected<Device> device = Device::open("host");
  Expected<Kernel> kernel = device->loadKernel(*package);
  ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
  EXPECT_EQ(kernel->getTarget().name, hostTargetName());
  EXPECT_EQ(kernel->getManifest().targets.size(), 2u);
  EXPECT_EQ(device->getName(), "host");
  EXPECT_TRUE(device->getBackend().supportsTarget("host-x86_64"));

  Expected<Kernel> gpu = device->loadKernel(*package, "gfx942");
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().message(), "device 'host' cannot run target 'gfx942'");
}

TEST(HostBackendTest, UnknownDevice) {
  Expected<Device> device = Device::open("gfx942");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), ErrorCode::Unsupported);
  EXPECT_EQ(device.status().message(),
            "device 'gfx942' is not available in this build (available: "
            "host, cuda, cuda:N, hip, hip:N, emu, emu:reverse, "
            "emu:random[:SEED], emu:check-orders[:SEED], auto)");
}
