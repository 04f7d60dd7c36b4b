//===- CudaDeviceTest.cpp - The CUDA backend on a device ------------------===//
//
// Runs on the real driver (skipping without one) and on the fake driver; see
// CudaTestUtils.h. Kernels come from hand-written PTX (kScalePtx,
// noopTargetPtx) loaded through packages and manifests like compiled ones.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtils.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

/// y = x * factor over a [rows, cols] f32 matrix, one launch.
const char *const kScaleManifest = R"(mla-manifest 1
kernel scale
function scale
arg 0 x memref f32 ?,?
arg 1 factor scalar f32
arg 2 y memref f32 ?,?
target sm_80 code.sm_80
launch mla_test_scale args 0,2,1 grid arg0.0,1,1 block 64,1,1
end-target
)";

/// y = (x * factor) * factor through a workspace, two launches.
const char *const kTwoStepManifest = R"(mla-manifest 1
kernel scale
function scale_twice
arg 0 x memref f32 ?,?
arg 1 factor scalar f32
arg 2 y memref f32 ?,?
target sm_80 code.sm_80
workspace 3 f32 arg0.0,arg0.1
launch mla_test_scale args 0,3,1 grid arg0.0,1,1 block 32,1,1
launch mla_test_scale args 3,2,1 grid arg0.0,1,1 block 128,1,1
end-target
)";

std::string withLaunchSuffix(const std::string &manifest,
                             const std::string &suffix) {
  std::string text = manifest;
  size_t end = text.find('\n', text.find("launch "));
  return text.insert(end, suffix);
}

class CudaDeviceTest : public ::testing::Test {
protected:
  Kernel load(const Device &device, const std::string &manifest,
              const std::string &ptx = kScalePtx) {
    Expected<Kernel> kernel = device.loadKernel(ptxPackage(manifest, ptx));
    EXPECT_TRUE(kernel.ok()) << kernel.status().toString();
    return kernel.ok() ? kernel.take() : Kernel(*loadHost());
  }

  /// A stand-in so that load() can return after a failed expectation.
  static Expected<Kernel> loadHost() {
    return Device::open("host")->loadKernel(decodePackage(DecodeShape{}));
  }

  /// x[r][c] = r * 100 + c + 0.5 (never 0), y filled with a pattern.
  void makeMatrices(const Device &device, int64_t rows, int64_t cols) {
    hostX.assign(rows * cols, 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        hostX[r * cols + c] = static_cast<float>(r * 100 + c) + 0.5f;
    Expected<DeviceTensor> dx =
        DeviceTensor::upload(device, {hostX.data(), DType::F32, {rows, cols}});
    ASSERT_TRUE(dx.ok()) << dx.status().toString();
    x = dx.take();
    Expected<DeviceTensor> dy =
        DeviceTensor::allocate(device, DType::F32, {rows, cols});
    ASSERT_TRUE(dy.ok()) << dy.status().toString();
    y = dy.take();
    ASSERT_TRUE(y.fillBytes(0x7f).ok()); // a large positive float pattern
  }

  std::vector<ArgValue> args(float factor) const {
    return {x.view(), Scalar::f32(factor), y.view()};
  }

  std::vector<float> readY() const {
    std::vector<float> values(y.view().numElements());
    Status status = y.copyToHost(values.data());
    EXPECT_TRUE(status.ok()) << status.toString();
    return values;
  }

  /// Expects y == x * factor (times factor again when `twice`).
  void expectScaled(float factor, bool twice = false) const {
    std::vector<float> values = readY();
    ASSERT_EQ(values.size(), hostX.size());
    for (size_t i = 0; i < values.size(); ++i) {
      float expected = hostX[i] * factor;
      if (twice)
        expected = expected * factor;
      ASSERT_EQ(values[i], expected) << "element " << i;
    }
  }

  void expectUntouched() const {
    std::vector<float> values = readY();
    uint32_t pattern = 0x7f7f7f7f;
    float untouched;
    std::memcpy(&untouched, &pattern, 4);
    for (size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(values[i], untouched) << "element " << i << " was written";
  }

  std::vector<float> hostX;
  DeviceTensor x, y;
};

} // namespace

TEST_F(CudaDeviceTest, OpensTheDevice) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  EXPECT_EQ(device.getName(), "cuda:0");
  Backend &backend = device.getBackend();
  EXPECT_FALSE(backend.usesHostMemory());
  EXPECT_TRUE(backend.isAsynchronous());
  EXPECT_NE(backend.getDescription().find("compute capability"),
            std::string::npos)
      << backend.getDescription();
  EXPECT_EQ(backend.getDescription().find('\n'), std::string::npos);
  Expected<MemoryInfo> memory = backend.getMemoryInfo();
  ASSERT_TRUE(memory.ok()) << memory.status().toString();
  EXPECT_GT(memory->totalBytes, 0u);
  EXPECT_LE(memory->freeBytes, memory->totalBytes);
  EXPECT_TRUE(backend.synchronize().ok());
}

TEST_F(CudaDeviceTest, ScalesThroughTheManifestPath) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  Kernel kernel = load(device, kScaleManifest);
  EXPECT_EQ(kernel.getTarget().name, "sm_80");
  makeMatrices(device, 5, 100);
  Expected<size_t> workspace = kernel.workspaceBytes(args(1.5f));
  ASSERT_TRUE(workspace.ok());
  EXPECT_EQ(*workspace, 0u);
  Status status = kernel.launch(args(1.5f));
  ASSERT_TRUE(status.ok()) << status.toString();
  ASSERT_TRUE(device.getBackend().synchronize().ok());
  expectScaled(1.5f);
}

TEST_F(CudaDeviceTest, PtxWithTrailingNulAndBothTargets) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  std::string manifest = kScaleManifest;
  manifest += "target sm_90a code.sm_90a\nlaunch mla_test_scale args 0,2,1 "
              "grid arg0.0,1,1 block 256,1,1\nend-target\n";
  Expected<Kernel> kernel =
      device.loadKernel(ptxPackage(manifest, kScalePtx, /*trailingNul=*/true));
  ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
  // A 9.0 device prefers sm_90a (PTX for sm_80 JIT-compiles there too).
  Expected<Kernel> sm80 = device.loadKernel(
      ptxPackage(manifest, kScalePtx, /*trailingNul=*/true), "sm_80");
  ASSERT_TRUE(sm80.ok()) << sm80.status().toString();
  makeMatrices(device, 3, 300);
  ASSERT_TRUE(kernel->launch(args(-2.0f)).ok());
  ASSERT_TRUE(device.getBackend().synchronize().ok());
  expectScaled(-2.0f);
}

TEST_F(CudaDeviceTest, EmptyGridLaunchesNothing) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  Kernel kernel = load(device, kScaleManifest);
  makeMatrices(device, 0, 8);
  Status status = kernel.launch(args(3.0f));
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_TRUE(device.getBackend().synchronize().ok());
}

TEST_F(CudaDeviceTest, WorkspaceMustBeReservedOrPassed) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  Kernel kernel = load(device, kTwoStepManifest);
  makeMatrices(device, 7, 33);
  Expected<size_t> bytes = kernel.workspaceBytes(args(2.0f));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, (7 * 33 * 4 + 255) / 256 * 256);

  Status status = kernel.launch(args(2.0f));
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(status.message(),
            "workspace too small: this launch needs " + std::to_string(*bytes) +
                " bytes, the kernel has 0 reserved (call "
                "Kernel::reserveWorkspace or pass LaunchOptions::workspace)");
  ASSERT_TRUE(device.getBackend().synchronize().ok());
  expectUntouched();

  ASSERT_TRUE(kernel.reserveWorkspace(*bytes - 256).ok());
  status = kernel.launch(args(2.0f));
  EXPECT_EQ(status.message(),
            "workspace too small: this launch needs " + std::to_string(*bytes) +
                " bytes, the kernel has " + std::to_string(*bytes - 256) +
                " reserved (call Kernel::reserveWorkspace or pass "
                "LaunchOptions::workspace)");
  ASSERT_TRUE(device.getBackend().synchronize().ok());
  expectUntouched();

  ASSERT_TRUE(kernel.reserveWorkspace(*bytes).ok());
  status = kernel.launch(args(2.0f));
  ASSERT_TRUE(status.ok()) << status.toString();
  ASSERT_TRUE(device.getBackend().synchronize().ok());
  expectScaled(2.0f, /*twice=*/true);
}

TEST_F(CudaDeviceTest, CallerWorkspace) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  Kernel kernel = load(device, kTwoStepManifest);
  makeMatrices(device, 4, 70);
  size_t bytes = *kernel.workspaceBytes(args(0.5f));
  Expected<DeviceTensor> workspace =
      DeviceTensor::allocate(device, DType::I32, {int64_t(bytes / 4)});
  ASSERT_TRUE(workspace.ok());

  LaunchOptions small;
  small.workspace = workspace->data();
  small.workspaceBytes = bytes - 4;
  Status status = kernel.launch(args(0.5f), small);
  EXPECT_EQ(status.message(), "workspace too small: this launch needs " +
                                  std::to_string(bytes) +
                                  " bytes, LaunchOptions::workspace has " +
                                  std::to_string(bytes - 4));
  ASSERT_TRUE(device.getBackend().synchronize().ok());
  expectUntouched();

  LaunchOptions options;
  options.workspace = workspace->data();
  options.workspaceBytes = bytes;
  status = kernel.launch(args(0.5f), options);
  ASSERT_TRUE(status.ok()) << status.toString();
  ASSERT_TRUE(device.getBackend().synchronize().ok());
  expectScaled(0.5f, /*twice=*/true);
}

TEST_F(CudaDeviceTest, DynamicSharedMemoryAbove48KiB) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  Kernel kernel =
      load(device, withLaunchSuffix(kScaleManifest, " shared 65536"));
  EXPECT_EQ(kernel.getTarget().launches[0].sharedBytes, 65536);
  makeMatrices(device, 2, 64);
  Status status = kernel.launch(args(4.0f));
  ASSERT_TRUE(status.ok()) << status.toString();
  ASSERT_TRUE(device.getBackend().synchronize().ok());
  expectScaled(4.0f);
}

TEST_F(CudaDeviceTest, SharedMemoryBeyondTheDeviceFailsAtLoad) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  Expected<Kernel> kernel = device.loadKernel(ptxPackage(
      withLaunchSuffix(kScaleManifest, " shared 2000000000"), kScalePtx));
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), ErrorCode::BackendError);
  EXPECT_NE(kernel.status().message().find(
                "target 'sm_80': launch 'mla_test_scale': cuda: shared "
                "2000000000 bytes (plus 0 static) exceed the device's limit"),
            std::string::npos)
      << kernel.status().message();
}

TEST_F(CudaDeviceTest, StreamsAndTimers) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  Backend &backend = device.getBackend();
  Kernel kernel = load(device, kScaleManifest);
  makeMatrices(device, 16, 512);
  Expected<std::unique_ptr<Stream>> stream = backend.createStream();
  ASSERT_TRUE(stream.ok()) << stream.status().toString();
  EXPECT_NE((*stream)->handle(), nullptr);
  Expected<std::unique_ptr<Timer>> timer = backend.createTimer();
  ASSERT_TRUE(timer.ok()) << timer.status().toString();
  LaunchOptions options;
  options.stream = (*stream)->handle();
  ASSERT_TRUE((*timer)->start(options.stream).ok());
  ASSERT_TRUE(kernel.launch(args(3.0f), options).ok());
  ASSERT_TRUE((*timer)->stop(options.stream).ok());
  Expected<double> ms = (*timer)->elapsedMs();
  ASSERT_TRUE(ms.ok()) << ms.status().toString();
  EXPECT_GE(*ms, 0.0);
  ASSERT_TRUE(backend.synchronize(options.stream).ok());
  expectScaled(3.0f);
}

TEST_F(CudaDeviceTest, GraphCaptureAndReplayWithNewContents) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  Backend &backend = device.getBackend();
  Kernel kernel = load(device, kTwoStepManifest);
  makeMatrices(device, 6, 40);
  ASSERT_TRUE(kernel.reserveWorkspace(*kernel.workspaceBytes(args(2.0f))).ok());
  Expected<std::unique_ptr<Stream>> stream = backend.createStream();
  ASSERT_TRUE(stream.ok());
  LaunchOptions options;
  options.stream = (*stream)->handle();

  Expected<std::unique_ptr<Graph>> graph =
      captureLaunch(device, kernel, args(2.0f), options);
  ASSERT_TRUE(graph.ok()) << graph.status().toString();
  ASSERT_TRUE(backend.synchronize(options.stream).ok());
  expectUntouched(); // capturing runs nothing

  ASSERT_TRUE((*graph)->launch(options.stream).ok());
  ASSERT_TRUE(backend.synchronize(options.stream).ok());
  expectScaled(2.0f, /*twice=*/true);

  // New input contents, same buffers: the replay reads them.
  for (float &value : hostX)
    value = -value * 0.25f;
  ASSERT_TRUE(x.copyFromHost(hostX.data()).ok());
  ASSERT_TRUE((*graph)->launch(options.stream).ok());
  ASSERT_TRUE((*graph)->launch(options.stream).ok());
  ASSERT_TRUE(backend.synchronize(options.stream).ok());
  expectScaled(2.0f, /*twice=*/true);
}

TEST_F(CudaDeviceTest, GraphCaptureReportsLaunchErrors) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  Backend &backend = device.getBackend();
  Kernel kernel = load(device, kTwoStepManifest);
  makeMatrices(device, 2, 8);
  Expected<std::unique_ptr<Stream>> stream = backend.createStream();
  ASSERT_TRUE(stream.ok());
  LaunchOptions options;
  options.stream = (*stream)->handle();
  // No workspace: the launch fails inside the capture, which still ends.
  Expected<std::unique_ptr<Graph>> graph =
      captureLaunch(device, kernel, args(2.0f), options);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().message().rfind("during graph capture: workspace "
                                           "too small",
                                           0),
            0u)
      << graph.status().message();
  // The stream works afterwards.
  ASSERT_TRUE(kernel.reserveWorkspace(256).ok());
  ASSERT_TRUE(kernel.launch(args(2.0f), options).ok());
  ASSERT_TRUE(backend.synchronize(options.stream).ok());
  expectScaled(2.0f, /*twice=*/true);

  Expected<std::unique_ptr<Graph>> noStream =
      backend.captureGraph(nullptr, [] { return Status::success(); });
  ASSERT_FALSE(noStream.ok());
  EXPECT_EQ(noStream.status().message(),
            "graph capture needs a stream (the default stream cannot be "
            "captured)");
}

TEST_F(CudaDeviceTest, ConcurrentLaunchesFromThreads) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  Kernel kernel = load(device, kTwoStepManifest);
  size_t bytes = *kernel.workspaceBytes(
      {TensorView{nullptr, DType::F32, {3, 50}}, Scalar::f32(1),
       TensorView{nullptr, DType::F32, {3, 50}}});
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Each thread: its own stream, buffers and workspace.
      Backend &backend = device.getBackend();
      std::vector<float> in(150, static_cast<float>(t + 1));
      auto dx = DeviceTensor::upload(device, {in.data(), DType::F32, {3, 50}});
      auto dy = DeviceTensor::allocate(device, DType::F32, {3, 50});
      auto ws = DeviceTensor::allocate(device, DType::I32,
                                       {static_cast<int64_t>(bytes / 4)});
      auto stream = backend.createStream();
      if (!dx.ok() || !dy.ok() || !ws.ok() || !stream.ok()) {
        ++failures;
        return;
      }
      LaunchOptions options;
      options.stream = (*stream)->handle();
      options.workspace = ws->data();
      options.workspaceBytes = bytes;
      for (int i = 0; i < 20; ++i)
        if (!kernel.launch({dx->view(), Scalar::f32(2.0f), dy->view()}, options)
                 .ok())
          ++failures;
      if (!backend.synchronize(options.stream).ok())
        ++failures;
      std::vector<float> out(150);
      if (!dy->copyToHost(out.data()).ok() ||
          out != std::vector<float>(150, (t + 1) * 4.0f))
        ++failures;
    });
  }
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(CudaDeviceTest, CodeObjectErrors) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  std::string badPtx = kScalePtx;
  badPtx.replace(badPtx.find("ret;"), 4, "INVALID_PTX_FOR_TEST %rd1;");
  Expected<Kernel> kernel =
      device.loadKernel(ptxPackage(kScaleManifest, badPtx));
  ASSERT_FALSE(kernel.ok());
  const std::string &message = kernel.status().message();
  EXPECT_EQ(message.rfind("target 'sm_80': cuda: loading the code object "
                          "failed: CUDA_ERROR_INVALID_PTX",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find("INVALID_PTX_FOR_TEST"), std::string::npos)
      << "the JIT log is missing: " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;

  std::string manifest = kScaleManifest;
  manifest.replace(manifest.find("launch mla_test_scale"), 21,
                   "launch mla_test_nope");
  kernel = device.loadKernel(ptxPackage(manifest, kScalePtx));
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().message(),
            "target 'sm_80': cuda: the code object has no entry "
            "'mla_test_nope'");

  kernel = device.loadKernel(ptxPackage(kScaleManifest, "\x80\x01 binary"));
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().message(),
            "target 'sm_80': cuda: the code object is neither PTX text nor a "
            "cubin (byte 0 is not ASCII)");
}

TEST_F(CudaDeviceTest, NoTargetForTheDevice) {
  MLA_CUDA_DEVICE_OR_SKIP(device);
  Expected<Kernel> kernel = device.loadKernel(decodePackage(DecodeShape{}));
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), ErrorCode::Unsupported);
  const std::string &message = kernel.status().message();
  EXPECT_EQ(message.rfind("device 'cuda:0' (", 0), 0u) << message;
  EXPECT_NE(message.find("the package has no target for CUDA compute "
                         "capability"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("(its targets: host-x86_64; "), std::string::npos)
      << message;
}

TEST_F(CudaDeviceTest, BuffersOutliveTheirDevice) {
  Expected<DeviceTensor> tensor = []() -> Expected<DeviceTensor> {
    Expected<Device> device = openTestCudaDevice();
    if (!device.ok())
      return device.status();
    return DeviceTensor::allocate(*device, DType::F32, {3});
  }();
  if (!tensor.ok())
    GTEST_SKIP() << tensor.status().message();
  std::vector<float> values = {1, 2, 3}, back(3);
  ASSERT_TRUE(tensor->copyFromHost(values.data()).ok());
  ASSERT_TRUE(tensor->copyToHost(back.data()).ok());
  EXPECT_EQ(values, back);
}

namespace {

/// A decode kernel whose entry does nothing: validation runs on the device
/// exactly as for a compiled one.
class CudaValidationTest : public ::testing::Test {
protected:
  void SetUp() override {
    Expected<Device> opened = openTestCudaDevice();
    if (!opened.ok())
      GTEST_SKIP() << opened.status().message();
    device = opened.take();
    std::string manifest = sm80Manifest(decodeManifest(shape));
    Expected<Manifest> parsed = parseManifest(manifest);
    ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
    Expected<Kernel> loaded = device->loadKernel(
        ptxPackage(manifest, noopTargetPtx(*parsed, parsed->targets[0])));
    ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
    kernel = loaded.take();
    host = makeDecodeData(shape, {10, 64, 0, 33}, 4, 5);
    Expected<DeviceDecodeData> uploaded = uploadDecodeData(*device, host);
    ASSERT_TRUE(uploaded.ok()) << uploaded.status().toString();
    data = uploaded.take();
    // The decode plan's two workspaces.
    Expected<size_t> bytes = kernel->workspaceBytes(data.args());
    ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
    ASSERT_TRUE(kernel->reserveWorkspace(*bytes).ok());
  }

  LaunchOptions withHostCopies() const {
    LaunchOptions options;
    options.hostBlockTable = host.blockTable.data();
    options.hostSeqLens = host.seqLens.data();
    return options;
  }

  DecodeShape shape;
  std::optional<Device> device;
  std::optional<Kernel> kernel;
  DecodeData host;
  DeviceDecodeData data;
};

} // namespace

TEST_F(CudaValidationTest, ValidArgumentsLaunch) {
  EXPECT_TRUE(kernel->launchDecode(data.args()).ok());
  Status status = kernel->launchDecode(data.args(), withHostCopies());
  EXPECT_TRUE(status.ok()) << status.toString();
  EXPECT_TRUE(device->getBackend().synchronize().ok());
}

TEST_F(CudaValidationTest, ShapeChecksNeedNoHostCopies) {
  DecodeArgs args = data.args();
  args.o.shape[3] = 16;
  Status status = kernel->launchDecode(args);
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(status.message(), "o: dim 3 is 16, expected 32");
  args = data.args();
  args.blockTable.shape[0] = 3;
  EXPECT_EQ(kernel->launchDecode(args).message(),
            "block_table: dim 0 is 3, expected 4 (the batch size, q dim 0)");
  args = data.args();
  args.lse.data = nullptr;
  EXPECT_EQ(kernel->launchDecode(args).message(), "lse: data is null");
}

TEST_F(CudaValidationTest, ContentChecksUseHostCopies) {
  host.seqLens.dataAs<int32_t>()[1] = 5000;
  ASSERT_TRUE(data.seqLens.copyFromHost(host.seqLens.data()).ok());
  // Without host copies the device contents cannot be checked.
  EXPECT_TRUE(kernel->validate(*kernel->bindDecode(data.args())).ok());
  Status status = kernel->launchDecode(data.args(), withHostCopies());
  EXPECT_EQ(status.message(), "seq_lens[1] = 5000 exceeds the block table's "
                              "capacity (4 pages x 16 = 64 tokens)");
  EXPECT_EQ(kernel->validate(*kernel->bindDecode(data.args()), withHostCopies())
                .message(),
            status.message());

  host.seqLens.dataAs<int32_t>()[1] = 64;
  host.blockTable.dataAs<int32_t>()[3 * 4 + 2] = 912;
  status = kernel->launchDecode(data.args(), withHostCopies());
  EXPECT_EQ(status.message(), "block_table[3][2] = 912 is outside the page "
                              "pool (kv has 16 pages)");
  // Lengths alone are checked when only they are given.
  LaunchOptions lensOnly;
  lensOnly.hostSeqLens = host.seqLens.data();
  EXPECT_TRUE(kernel->launchDecode(data.args(), lensOnly).ok());
  EXPECT_TRUE(device->getBackend().synchronize().ok());
}
