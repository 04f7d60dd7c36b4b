//===- HipDeviceTest.cpp - The HIP backend on a device --------------------===//
//
// Runs on the real HIP runtime (skipping without ROCm or an AMD GPU) and on
// the fake one; see HipTestUtils.h. The kernel is the checked-in gfx942
// decode object: on a real gfx942 device its results are compared with the
// float64 reference, on other devices the tests that need it skip, and on
// the fake runtime (which does not execute AMD code) only the launch path
// runs.
//
//===----------------------------------------------------------------------===//

#include "HipTestUtils.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

/// Skips unless the device runs the fixture (gfx942).
#define MLA_SKIP_UNLESS_GFX942(DEVICE)                                         \
  if (!(DEVICE).getBackend().supportsTarget("gfx942"))                         \
  GTEST_SKIP() << (DEVICE).getBackend().getDescription()                       \
               << " does not run the gfx942 test object"

class HipDeviceTest : public ::testing::Test {
protected:
  /// Host data for `lengths` (max 2 pages per sequence) and device copies;
  /// outputs filled with 0xff (NaN) so that unwritten ones show.
  void prepare(const Device &device, const std::vector<int32_t> &lengths) {
    host = makeDecodeData(shape, lengths, 2, 7);
    Expected<DeviceDecodeData> uploaded = uploadDecodeData(device, host);
    ASSERT_TRUE(uploaded.ok()) << uploaded.status().toString();
    data = uploaded.take();
    ASSERT_TRUE(data.o.fillBytes(0xff).ok());
    ASSERT_TRUE(data.lse.fillBytes(0xff).ok());
  }

  LaunchOptions options(void *stream) const {
    LaunchOptions o;
    o.stream = stream;
    o.hostBlockTable = host.blockTable.data();
    o.hostSeqLens = host.seqLens.data();
    return o;
  }

  /// On a real device, the outputs against the reference.
  void checkOutputs(const Device &device, void *stream) {
    ASSERT_TRUE(device.getBackend().synchronize(stream).ok());
    if (usingFakeHip())
      return; // the fake runtime does not execute AMD code
    ASSERT_TRUE(downloadOutputs(data, host).ok());
    expectMatchesReference(shape, host);
  }

  DecodeShape shape = fixtureShape();
  DecodeData host;
  DeviceDecodeData data;
};

} // namespace

TEST_F(HipDeviceTest, OpensTheDevice) {
  MLA_HIP_DEVICE_OR_SKIP(device);
  EXPECT_EQ(device.getName(), "hip:0");
  Backend &backend = device.getBackend();
  EXPECT_FALSE(backend.usesHostMemory());
  EXPECT_TRUE(backend.isAsynchronous());
  std::string description = backend.getDescription();
  EXPECT_EQ(description.rfind("hip:0 (", 0), 0u) << description;
  EXPECT_NE(description.find(", gfx"), std::string::npos) << description;
  EXPECT_NE(description.find("compute units)"), std::string::npos)
      << description;
  EXPECT_EQ(description.find('\n'), std::string::npos);
  Expected<MemoryInfo> memory = backend.getMemoryInfo();
  ASSERT_TRUE(memory.ok()) << memory.status().toString();
  EXPECT_GT(memory->totalBytes, 0u);
  EXPECT_LE(memory->freeBytes, memory->totalBytes);
  EXPECT_TRUE(backend.synchronize().ok());
  EXPECT_FALSE(backend.supportsTarget("sm_90a"));
  EXPECT_FALSE(backend.supportsTarget("host-x86_64"));
}

TEST_F(HipDeviceTest, CopiesAndFills) {
  MLA_HIP_DEVICE_OR_SKIP(device);
  std::vector<int32_t> values(1000);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<int32_t>(i * 7 - 300);
  Expected<DeviceTensor> tensor =
      DeviceTensor::upload(device, {values.data(), DType::I32, {10, 100}});
  ASSERT_TRUE(tensor.ok()) << tensor.status().toString();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tensor->data()) % 256, 0u);
  Expected<HostTensor> back = tensor->download();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::memcmp(back->data(), values.data(), 4000), 0);
  ASSERT_TRUE(tensor->fillBytes(0x01).ok());
  back = tensor->download();
  EXPECT_EQ(back->dataAs<int32_t>()[999], 0x01010101);
  Expected<std::unique_ptr<DeviceBuffer>> empty =
      device.getBackend().allocate(0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->data(), nullptr);
  EXPECT_EQ((*empty)->size(), 0u);
}

TEST_F(HipDeviceTest, StreamsAndTimers) {
  MLA_HIP_DEVICE_OR_SKIP(device);
  Backend &backend = device.getBackend();
  Expected<std::unique_ptr<Stream>> stream = backend.createStream();
  ASSERT_TRUE(stream.ok()) << stream.status().toString();
  EXPECT_NE((*stream)->handle(), nullptr);
  Expected<std::unique_ptr<Timer>> timer = backend.createTimer();
  ASSERT_TRUE(timer.ok()) << timer.status().toString();
  void *s = (*stream)->handle();
  ASSERT_TRUE((*timer)->start(s).ok());
  ASSERT_TRUE((*timer)->stop(s).ok());
  Expected<double> ms = (*timer)->elapsedMs();
  ASSERT_TRUE(ms.ok()) << ms.status().toString();
  EXPECT_GE(*ms, 0.0);
  EXPECT_TRUE(backend.synchronize(s).ok());
}

TEST_F(HipDeviceTest, DecodeOnAStreamWithAReservedWorkspace) {
  MLA_HIP_DEVICE_OR_SKIP(device);
  MLA_SKIP_UNLESS_GFX942(device);
  Expected<Kernel> kernel = device.loadKernel(fixturePackage());
  ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
  EXPECT_EQ(kernel->getTarget().name, "gfx942");
  prepare(device, {1, 70, 0, 128, 33});
  Expected<size_t> bytes = kernel->workspaceBytes(data.args());
  ASSERT_TRUE(bytes.ok());
  // f32 [5, 1, 1, 4, 16] and [5, 1, 1, 4], each rounded up to 256.
  EXPECT_EQ(*bytes, 1280u + 256u);
  ASSERT_TRUE(kernel->reserveWorkspace(*bytes).ok());
  Expected<std::unique_ptr<Stream>> stream = device.getBackend().createStream();
  ASSERT_TRUE(stream.ok());
  void *s = (*stream)->handle();
  Status status = kernel->launchDecode(data.args(), options(s));
  ASSERT_TRUE(status.ok()) << status.toString();
  checkOutputs(device, s);
}

TEST_F(HipDeviceTest, CallerWorkspaceOnTheDefaultStream) {
  MLA_HIP_DEVICE_OR_SKIP(device);
  MLA_SKIP_UNLESS_GFX942(device);
  Kernel kernel = *device.loadKernel(fixturePackage());
  prepare(device, {64, 65});
  size_t bytes = *kernel.workspaceBytes(data.args());
  Status status = kernel.launchDecode(data.args(), options(nullptr));
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(status.message(),
            "workspace too small: this launch needs " + std::to_string(bytes) +
                " bytes, the kernel has 0 reserved (call "
                "Kernel::reserveWorkspace or pass LaunchOptions::workspace)");
  Expected<std::unique_ptr<DeviceBuffer>> workspace =
      device.getBackend().allocate(bytes);
  ASSERT_TRUE(workspace.ok());
  LaunchOptions o = options(nullptr);
  o.workspace = (*workspace)->data();
  o.workspaceBytes = bytes;
  status = kernel.launchDecode(data.args(), o);
  ASSERT_TRUE(status.ok()) << status.toString();
  checkOutputs(device, nullptr);
}

TEST_F(HipDeviceTest, GraphReplayWithChangedLengths) {
  MLA_HIP_DEVICE_OR_SKIP(device);
  MLA_SKIP_UNLESS_GFX942(device);
  Kernel kernel = *device.loadKernel(fixturePackage());
  prepare(device, {64, 3, 100, 0});
  ASSERT_TRUE(
      kernel.reserveWorkspace(*kernel.workspaceBytes(data.args())).ok());
  Backend &backend = device.getBackend();
  Expected<std::unique_ptr<Stream>> stream = backend.createStream();
  ASSERT_TRUE(stream.ok());
  void *s = (*stream)->handle();
  Expected<std::unique_ptr<Graph>> graph =
      captureDecode(device, kernel, data.args(), options(s));
  if (!graph.ok() && graph.status().code() == ErrorCode::Unsupported)
    GTEST_SKIP() << graph.status().message();
  ASSERT_TRUE(graph.ok()) << graph.status().toString();
  ASSERT_TRUE((*graph)->launch(s).ok());
  checkOutputs(device, s);

  std::vector<int32_t> lengths = {128, 1, 0, 65};
  std::copy(lengths.begin(), lengths.end(), host.seqLens.dataAs<int32_t>());
  int32_t *table = host.blockTable.dataAs<int32_t>();
  std::reverse(table, table + host.blockTable.numElements());
  ASSERT_TRUE(data.seqLens.copyFromHost(host.seqLens.data()).ok());
  ASSERT_TRUE(data.blockTable.copyFromHost(host.blockTable.data()).ok());
  ASSERT_TRUE(
      kernel.validate(*kernel.bindDecode(data.args()), options(s)).ok());
  ASSERT_TRUE((*graph)->launch(s).ok());
  checkOutputs(device, s);
}

TEST_F(HipDeviceTest, MaxBytesOfTheLoadedTarget) {
  MLA_HIP_DEVICE_OR_SKIP(device);
  MLA_SKIP_UNLESS_GFX942(device);
  // kv of 2 x 2 pages of [64, 32] bf16: 16384 bytes.
  Kernel kernel = *device.loadKernel(
      fixturePackage("max-bytes 1 4294963199", "max-bytes 1 16383"));
  prepare(device, {10, 20});
  ASSERT_TRUE(
      kernel.reserveWorkspace(*kernel.workspaceBytes(data.args())).ok());
  Status status = kernel.launchDecode(data.args(), options(nullptr));
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(status.message(),
            "kv: 16384 bytes exceed the 16383-byte limit of the gfx942 code "
            "object (32-bit buffer offsets)");
}

TEST_F(HipDeviceTest, PackagesWithoutATargetForTheDevice) {
  MLA_HIP_DEVICE_OR_SKIP(device);
  std::string description = device.getBackend().getDescription();
  std::string deviceName = description.substr(
      7, description.find(", gfx") - 7); // "hip:0 (NAME, gfx..."
  std::string processor = description.substr(
      description.find(", gfx") + 2,
      description.find_first_of(":,", description.find(", gfx") + 2) -
          description.find(", gfx") - 2);
  Expected<Kernel> kernel = device.loadKernel(decodePackage(DecodeShape{}));
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), ErrorCode::Unsupported);
  EXPECT_EQ(kernel.status().message(), "device 'hip:0' (" + deviceName +
                                           "): the package has no target for " +
                                           processor +
                                           " (its targets: host-x86_64)");
}

TEST_F(HipDeviceTest, MetadataMismatchIsRejectedBeforeLoading) {
  MLA_HIP_DEVICE_OR_SKIP(device);
  MLA_SKIP_UNLESS_GFX942(device);
  // decode_k1 takes (workspace 8, workspace 7, o, lse): swap o and lse.
  Expected<Kernel> kernel =
      device.loadKernel(fixturePackage("args 8,7,5,6", "args 8,7,6,5"));
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), ErrorCode::InvalidPackage);
  EXPECT_EQ(kernel.status().message(),
            "target 'gfx942': kernel 'decode_k1': kernel argument 33 (the "
            "allocated pointer of 'o') is at offset 264 (8 bytes, by_value) in "
            "the code object, the runtime packs it at offset 264 (8 bytes, "
            "global_buffer)");

  std::vector<uint8_t> ptx = {'.', 'v', 'e', 'r', 's', 'i', 'o',
                              'n', ' ', '7', '.', '0', '\n'};
  kernel = device.loadKernel(codePackage(fixtureManifest(), ptx));
  EXPECT_EQ(kernel.status().code(), ErrorCode::InvalidPackage);
  EXPECT_EQ(kernel.status().message(),
            "target 'gfx942': AMDGPU code object: not an ELF file (bad "
            "magic)");
}
