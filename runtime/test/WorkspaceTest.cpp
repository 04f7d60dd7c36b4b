//===- WorkspaceTest.cpp - Workspace sizing, reservation, caller buffers --===//
//
// Host device: the workspace rules are the Kernel's, shared by every backend.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

size_t roundUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

class WorkspaceTest : public ::testing::Test {
protected:
  void SetUp() override {
    Expected<Kernel> loaded =
        Device::open("host", {2})->loadKernel(decodePackage(shape));
    ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
    kernel = loaded.take();
    data = makeDecodeData(shape, {10, 64, 0}, 4, 7);
    std::fill_n(data.lse.dataAs<float>(), data.lse.numElements(), 42.0f);
  }

  /// The reference kernel's workspaces: [B, Sq, H, splits, latent] and
  /// [B, Sq, H, splits] f32.
  size_t expectedBytes(int64_t batch) const {
    size_t rows = batch * shape.qLen * shape.heads * shape.kvSplits;
    return roundUp(rows * shape.latentDim * 4) + roundUp(rows * 4);
  }

  bool launched() const { return data.lse.dataAs<float>()[0] != 42.0f; }

  /// A 256-byte aligned pointer into `storage` with `bytes` after it.
  static void *aligned(std::vector<uint8_t> &storage, size_t bytes) {
    storage.assign(bytes + 256, 0);
    auto address = reinterpret_cast<uintptr_t>(storage.data());
    return storage.data() + (256 - address % 256) % 256;
  }

  DecodeShape shape;
  std::optional<Kernel> kernel;
  DecodeData data;
};

} // namespace

TEST_F(WorkspaceTest, BytesAreTheSumOfAlignedWorkspaces) {
  Expected<size_t> bytes = kernel->workspaceBytes(data.args());
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  EXPECT_EQ(*bytes, expectedBytes(3));
  EXPECT_EQ(*bytes % kWorkspaceAlignment, 0u);

  // Only shapes matter: null data is fine.
  DecodeArgs shapesOnly = data.args();
  shapesOnly.q.data = shapesOnly.kv.data = shapesOnly.o.data = nullptr;
  shapesOnly.q.shape[0] = 1000;
  bytes = kernel->workspaceBytes(shapesOnly);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, expectedBytes(1000));
}

TEST_F(WorkspaceTest, BytesNeedWellFormedArguments) {
  DecodeArgs bad = data.args();
  bad.q.shape.pop_back();
  Expected<size_t> bytes = kernel->workspaceBytes(bad);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().message(), "q: expected rank 4, got 3");
}

TEST_F(WorkspaceTest, CallerWorkspaceIsUsed) {
  std::vector<uint8_t> storage;
  size_t bytes = expectedBytes(3);
  LaunchOptions options;
  options.workspace = aligned(storage, bytes);
  options.workspaceBytes = bytes;
  Status status = kernel->launchDecode(data.args(), options);
  ASSERT_TRUE(status.ok()) << status.toString();
  expectMatchesReference(shape, data);
  // The partial results went to the caller's buffer.
  size_t written = 0;
  for (size_t i = 0; i < bytes; ++i)
    written += static_cast<uint8_t *>(options.workspace)[i] != 0;
  EXPECT_GT(written, 0u);
}

TEST_F(WorkspaceTest, TooSmallCallerWorkspaceLaunchesNothing) {
  std::vector<uint8_t> storage;
  LaunchOptions options;
  options.workspace = aligned(storage, 4096);
  options.workspaceBytes = expectedBytes(3) - 1;
  Status status = kernel->launchDecode(data.args(), options);
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(status.message(), "workspace too small: this launch needs " +
                                  std::to_string(expectedBytes(3)) +
                                  " bytes, LaunchOptions::workspace has " +
                                  std::to_string(expectedBytes(3) - 1));
  EXPECT_FALSE(launched());
}

TEST_F(WorkspaceTest, MisalignedCallerWorkspaceLaunchesNothing) {
  std::vector<uint8_t> storage;
  LaunchOptions options;
  options.workspace = static_cast<uint8_t *>(aligned(storage, 8192)) + 64;
  options.workspaceBytes = 8000;
  Status status = kernel->launchDecode(data.args(), options);
  EXPECT_EQ(status.message(),
            "LaunchOptions::workspace must be 256-byte aligned");
  EXPECT_FALSE(launched());
}

TEST_F(WorkspaceTest, ReservedWorkspaceOnTheHost) {
  EXPECT_TRUE(kernel->reserveWorkspace(0).ok());
  Status status = kernel->reserveWorkspace(expectedBytes(3));
  ASSERT_TRUE(status.ok()) << status.toString();
  ASSERT_TRUE(kernel->reserveWorkspace(expectedBytes(3)).ok());
  status = kernel->launchDecode(data.args());
  ASSERT_TRUE(status.ok()) << status.toString();
  expectMatchesReference(shape, data);
}

TEST_F(WorkspaceTest, EmptyBatchNeedsNoWorkspace) {
  DecodeData empty = makeDecodeData(shape, {}, 4, 7);
  Expected<size_t> bytes = kernel->workspaceBytes(empty.args());
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  EXPECT_EQ(*bytes, 0u);
  // No workspace needed: a too-small caller buffer is never looked at.
  LaunchOptions options;
  options.workspace = reinterpret_cast<void *>(uintptr_t{1});
  EXPECT_TRUE(kernel->launchDecode(empty.args(), options).ok());
}

TEST_F(WorkspaceTest, HostIgnoresHostCopiesAndStream) {
  // The host reads the tensors themselves; host copies cannot hide a bad
  // length.
  std::vector<int32_t> goodLens = {1, 1, 1};
  data.seqLens.dataAs<int32_t>()[1] = 5000;
  LaunchOptions options;
  options.hostSeqLens = goodLens.data();
  Status status = kernel->launchDecode(data.args(), options);
  EXPECT_EQ(status.message(), "seq_lens[1] = 5000 exceeds the block table's "
                              "capacity (4 pages x 16 = 64 tokens)");
  data.seqLens.dataAs<int32_t>()[1] = 64;
  options = {};
  options.stream = reinterpret_cast<void *>(uintptr_t{0x1234});
  EXPECT_TRUE(kernel->launchDecode(data.args(), options).ok());
  expectMatchesReference(shape, data);
}

TEST(DeviceTensorTest, HostRoundTrip) {
  Expected<Device> device = Device::open("host");
  ASSERT_TRUE(device.ok());
  std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  TensorView host{values.data(), DType::F32, {2, 3}};
  Expected<DeviceTensor> tensor = DeviceTensor::upload(*device, host);
  ASSERT_TRUE(tensor.ok()) << tensor.status().toString();
  EXPECT_EQ(tensor->getShape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tensor->sizeInBytes(), 24u);
  EXPECT_NE(tensor->view().data, values.data());
  Expected<HostTensor> back = tensor->download();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::memcmp(back->data(), values.data(), 24), 0);
  ASSERT_TRUE(tensor->fillBytes(0).ok());
  std::vector<float> zeros(6, 1.0f);
  ASSERT_TRUE(tensor->copyToHost(zeros.data()).ok());
  EXPECT_EQ(zeros, std::vector<float>(6, 0.0f));

  Expected<DeviceTensor> empty =
      DeviceTensor::allocate(*device, DType::BF16, {0, 4});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->copyFromHost(nullptr).ok());
  EXPECT_TRUE(empty->download().ok());

  Expected<DeviceTensor> negative =
      DeviceTensor::allocate(*device, DType::F32, {2, -1});
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(),
            "cannot allocate a device tensor of shape [2, -1]");
}

TEST(DeviceTensorTest, OutlivesItsDevice) {
  Expected<DeviceTensor> tensor = [] {
    Expected<Device> device = Device::open("host", {1});
    return DeviceTensor::allocate(*device, DType::I32, {4});
  }();
  ASSERT_TRUE(tensor.ok());
  EXPECT_TRUE(tensor->fillBytes(0xff).ok());
  Expected<HostTensor> back = tensor->download();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->dataAs<int32_t>()[3], -1);
}

TEST(HostBackendDefaultsTest, StreamsTimersGraphsAndMemory) {
  Expected<Device> device = Device::open("host", {1});
  ASSERT_TRUE(device.ok());
  Backend &backend = device->getBackend();
  EXPECT_TRUE(backend.usesHostMemory());
  EXPECT_FALSE(backend.isAsynchronous());
  EXPECT_EQ(backend.getDescription(), "host");

  Expected<std::unique_ptr<Stream>> stream = backend.createStream();
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ((*stream)->handle(), nullptr);
  EXPECT_TRUE(backend.synchronize((*stream)->handle()).ok());
  EXPECT_TRUE(backend.synchronize().ok());

  Expected<std::unique_ptr<Timer>> timer = backend.createTimer();
  ASSERT_TRUE(timer.ok());
  EXPECT_FALSE((*timer)->elapsedMs().ok());
  EXPECT_FALSE((*timer)->stop(nullptr).ok());
  ASSERT_TRUE((*timer)->start(nullptr).ok());
  ASSERT_TRUE((*timer)->stop(nullptr).ok());
  Expected<double> ms = (*timer)->elapsedMs();
  ASSERT_TRUE(ms.ok());
  EXPECT_GE(*ms, 0.0);

  bool ran = false;
  Expected<std::unique_ptr<Graph>> graph = backend.captureGraph(nullptr, [&] {
    ran = true;
    return Status::success();
  });
  ASSERT_FALSE(graph.ok());
  EXPECT_FALSE(ran);
  EXPECT_EQ(graph.status().code(), ErrorCode::Unsupported);
  EXPECT_EQ(graph.status().message(), "device 'host' cannot capture graphs");

  Expected<MemoryInfo> memory = backend.getMemoryInfo();
  ASSERT_TRUE(memory.ok()) << memory.status().toString();
  EXPECT_GT(memory->totalBytes, 0u);
  EXPECT_LE(memory->freeBytes, memory->totalBytes);
}

TEST(HostBackendDefaultsTest, HostIgnoresBlockAndShared) {
  DecodeShape shape;
  std::string manifest = decodeManifest(shape);
  const std::string k1Grid = "grid arg0.0,arg0.1,arg0.2";
  size_t grid = manifest.find(k1Grid);
  ASSERT_NE(grid, std::string::npos);
  manifest.insert(grid + k1Grid.size(), " block 256,1,1 shared 200000");
  Expected<std::vector<uint8_t>> bytes =
      encodePackage(manifest, {{"code.host-x86_64", testKernelCode()}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  Expected<Package> package = parsePackage(bytes->data(), bytes->size());
  ASSERT_TRUE(package.ok()) << package.status().toString();
  EXPECT_EQ(package->manifest.targets[0].launches[1].sharedBytes, 200000);
  Expected<Kernel> kernel = Device::open("host", {1})->loadKernel(*package);
  ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
  DecodeData data = makeDecodeData(shape, {5, 17}, 2, 3);
  ASSERT_TRUE(kernel->launchDecode(data.args()).ok());
  expectMatchesReference(shape, data);
}
