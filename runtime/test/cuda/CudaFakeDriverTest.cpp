//===- CudaFakeDriverTest.cpp - Driver-level checks on the fake driver ----===//
//
// What only the fake driver can observe: the kernel parameters and launch
// configuration the backend hands to cuLaunchKernel, when attributes are
// set, that the launch path neither allocates nor synchronizes, that every
// handle is released, and the errors of drivers and devices this machine
// does not have.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtils.h"
#include "FakeCudaDriver.h"

#include <gtest/gtest.h>

#include <cstring>
#include <dlfcn.h>
#include <filesystem>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

void *fakeSymbol(const char *path, const char *name) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(handle, nullptr) << dlerror();
  return handle ? dlsym(handle, name) : nullptr;
}

MlaFakeCudaStats stats() {
  MlaFakeCudaStats result;
  auto get = reinterpret_cast<MlaFakeCudaGetStatsFn>(
      fakeSymbol(MLA_TEST_CUDA_DRIVER, "mlaFakeCudaGetStats"));
  if (get)
    get(&result);
  return result;
}

/// A private copy of a fake driver library (a fresh driver instance)
/// configured with `config`.
std::string configuredCopy(const TempDir &dir, const char *library,
                           const std::string &name,
                           const MlaFakeCudaConfig &config) {
  std::string path = dir.file(name);
  std::filesystem::copy_file(library, path);
  auto configure = reinterpret_cast<MlaFakeCudaConfigureFn>(
      fakeSymbol(path.c_str(), "mlaFakeCudaConfigure"));
  if (configure)
    configure(&config);
  return path;
}

Expected<std::shared_ptr<Backend>> openWith(const std::string &path,
                                            int ordinal = 0) {
  CudaBackendOptions options;
  options.driverPath = path;
  options.ordinal = ordinal;
  return createCudaBackend(options);
}

const char *const kScaleManifest = R"(mla-manifest 1
kernel scale
function scale
arg 0 x memref f32 ?,?
arg 1 factor scalar f32
arg 2 y memref f32 ?,?
target sm_80 code.sm_80
workspace 3 f32 arg0.0,arg0.1
launch mla_test_scale args 0,3,1 grid arg0.0,1,1 block 96,1,1 shared 65536
launch mla_test_scale args 3,2,1 grid arg0.0,1,1 block 64,2,1
end-target
)";

/// The scale package's tensors: x = 1 (3 x 10) and y, with the kernel's
/// workspace reserved for (x, 0.25, y).
struct ScaleTensors {
  DeviceTensor x, y;
  std::vector<ArgValue> args() const {
    return {x.view(), Scalar::f32(0.25f), y.view()};
  }
};

void prepareScale(const Device &device, Kernel &kernel, ScaleTensors &out) {
  std::vector<float> values(3 * 10, 1.0f);
  auto x = DeviceTensor::upload(device, {values.data(), DType::F32, {3, 10}});
  auto y = DeviceTensor::allocate(device, DType::F32, {3, 10});
  ASSERT_TRUE(x.ok() && y.ok());
  out.x = std::move(*x);
  out.y = std::move(*y);
  ASSERT_TRUE(kernel.reserveWorkspace(*kernel.workspaceBytes(out.args())).ok());
}

/// y after the two launches: x · 0.25 · 0.25.
void expectScaled(const DeviceTensor &y) {
  std::vector<float> out(30);
  ASSERT_TRUE(y.copyToHost(out.data()).ok());
  EXPECT_EQ(out, std::vector<float>(30, 0.0625f));
}

} // namespace

TEST(CudaFakeDriverTest, ParamsConfigAndAttributesReachTheDriver) {
  MlaFakeCudaStats before = stats();
  {
    Device device = *openTestCudaDevice();
    Expected<Kernel> kernel =
        device.loadKernel(ptxPackage(kScaleManifest, kScalePtx));
    ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
    MlaFakeCudaStats loaded = stats();
    // Set once, at load, for the launch above 48 KiB only.
    EXPECT_EQ(loaded.setSharedAttributeCalls,
              before.setSharedAttributeCalls + 1);
    EXPECT_EQ(loaded.lastDynamicSharedLimit, 65536);
    EXPECT_TRUE(loaded.lastLoadHadLogBuffers);

    ScaleTensors t;
    ASSERT_NO_FATAL_FAILURE(prepareScale(device, *kernel, t));
    auto stream = device.getBackend().createStream();
    ASSERT_TRUE(stream.ok());
    LaunchOptions options;
    options.stream = (*stream)->handle();
    int allocations = stats().allocations;
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(kernel->launch(t.args(), options).ok());
    MlaFakeCudaStats launched = stats();
    EXPECT_EQ(launched.allocations, allocations) << "a launch allocated";
    EXPECT_EQ(launched.launches, loaded.launches + 10);
    EXPECT_EQ(launched.setSharedAttributeCalls, loaded.setSharedAttributeCalls);

    // The last launch: (workspace, y, factor) with block 64,2,1.
    EXPECT_EQ(launched.lastGrid[0], 3u);
    EXPECT_EQ(launched.lastGrid[1], 1u);
    EXPECT_EQ(launched.lastBlock[0], 64u);
    EXPECT_EQ(launched.lastBlock[1], 2u);
    EXPECT_EQ(launched.lastSharedBytes, 0u);
    EXPECT_EQ(launched.lastStream, options.stream);
    ASSERT_EQ(launched.lastParamCount, 15);
    uint64_t yAddress = reinterpret_cast<uintptr_t>(t.y.data());
    EXPECT_EQ(launched.lastParams[7], yAddress); // allocated
    EXPECT_EQ(launched.lastParams[8], yAddress); // aligned
    EXPECT_EQ(launched.lastParams[9], 0u);       // offset
    EXPECT_EQ(launched.lastParams[10], 3u);      // sizes
    EXPECT_EQ(launched.lastParams[11], 10u);
    EXPECT_EQ(launched.lastParams[12], 10u); // strides
    EXPECT_EQ(launched.lastParams[13], 1u);
    EXPECT_EQ(launched.lastParamSizes[14], 4);
    float factor;
    std::memcpy(&factor, &launched.lastParams[14], 4);
    EXPECT_EQ(factor, 0.25f);
    // The workspace is the first memref of the last launch.
    EXPECT_NE(launched.lastParams[1], yAddress);
    EXPECT_EQ(launched.lastParams[1] % 256, 0u);

    ASSERT_TRUE(device.getBackend().synchronize(options.stream).ok());
    expectScaled(t.y);
  }
  MlaFakeCudaStats after = stats();
  EXPECT_EQ(after.contextErrors, before.contextErrors);
  EXPECT_EQ(after.liveAllocations, before.liveAllocations);
  EXPECT_EQ(after.liveModules, before.liveModules);
  EXPECT_EQ(after.liveStreams, before.liveStreams);
  EXPECT_EQ(after.primaryRetains, before.primaryRetains);
}

// A `dependent` launch goes through cuLaunchKernelEx with programmatic
// stream serialization; the others through cuLaunchKernel; the results are
// those of plain launches.
TEST(CudaFakeDriverTest, DependentLaunchesAreProgrammatic) {
  std::string manifest = kScaleManifest;
  const std::string second = "block 64,2,1\n";
  manifest.replace(manifest.find(second), second.size(),
                   "block 64,2,1 shared 0 dependent\n");
  Device device = *openTestCudaDevice();
  Expected<Kernel> kernel = device.loadKernel(ptxPackage(manifest, kScalePtx));
  ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
  ScaleTensors t;
  ASSERT_NO_FATAL_FAILURE(prepareScale(device, *kernel, t));
  MlaFakeCudaStats before = stats();
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(kernel->launch(t.args()).ok());
  MlaFakeCudaStats after = stats();
  EXPECT_EQ(after.launches, before.launches + 6);
  EXPECT_EQ(after.programmaticLaunches, before.programmaticLaunches + 3);
  ASSERT_TRUE(device.getBackend().synchronize(nullptr).ok());
  expectScaled(t.y);
}

TEST(CudaFakeDriverTest, EverythingIsReleased) {
  MlaFakeCudaStats before = stats();
  {
    Device device = *openTestCudaDevice();
    EXPECT_EQ(stats().primaryRetains, before.primaryRetains + 1);
    Backend &backend = device.getBackend();
    auto stream = backend.createStream();
    auto timer = backend.createTimer();
    auto buffer = backend.allocate(1000);
    auto empty = backend.allocate(0);
    ASSERT_TRUE(stream.ok() && timer.ok() && buffer.ok() && empty.ok());
    EXPECT_EQ((*empty)->data(), nullptr);
    Expected<Kernel> kernel =
        device.loadKernel(ptxPackage(kScaleManifest, kScalePtx));
    ASSERT_TRUE(kernel.ok());
    ASSERT_TRUE(kernel->reserveWorkspace(4096).ok());
    auto graph = backend.captureGraph((*stream)->handle(),
                                      [] { return Status::success(); });
    ASSERT_TRUE(graph.ok()) << graph.status().toString();
    MlaFakeCudaStats during = stats();
    EXPECT_EQ(during.liveStreams, before.liveStreams + 1);
    EXPECT_EQ(during.liveEvents, before.liveEvents + 2);
    EXPECT_EQ(during.liveAllocations, before.liveAllocations + 2);
    EXPECT_EQ(during.liveModules, before.liveModules + 1);
    EXPECT_EQ(during.liveGraphs, before.liveGraphs + 2);
  }
  MlaFakeCudaStats after = stats();
  EXPECT_EQ(after.liveStreams, before.liveStreams);
  EXPECT_EQ(after.liveEvents, before.liveEvents);
  EXPECT_EQ(after.liveAllocations, before.liveAllocations);
  EXPECT_EQ(after.liveModules, before.liveModules);
  EXPECT_EQ(after.liveGraphs, before.liveGraphs);
  EXPECT_EQ(after.primaryRetains, before.primaryRetains);
  EXPECT_EQ(after.contextErrors, before.contextErrors);
}

TEST(CudaFakeDriverTest, CaptureFailsOnAllocationInside) {
  Device device = *openTestCudaDevice();
  Backend &backend = device.getBackend();
  auto stream = backend.createStream();
  ASSERT_TRUE(stream.ok());
  auto graph = backend.captureGraph(
      (*stream)->handle(), [&] { return backend.allocate(64).status(); });
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().message(),
            "during graph capture: cuda: cuMemAlloc failed: "
            "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
  // The capture ended: the stream and the thread are usable again.
  EXPECT_TRUE(backend.allocate(64).ok());
  EXPECT_TRUE(backend.synchronize((*stream)->handle()).ok());
}

TEST(CudaFakeDriverTest, ContextIsRestoredForTheCaller) {
  // A thread with another context current gets it back after each call.
  auto push = reinterpret_cast<int (*)(void *)>(
      fakeSymbol(MLA_TEST_CUDA_DRIVER, "cuCtxPushCurrent_v2"));
  auto pop = reinterpret_cast<int (*)(void **)>(
      fakeSymbol(MLA_TEST_CUDA_DRIVER, "cuCtxPopCurrent_v2"));
  auto current = reinterpret_cast<int (*)(void **)>(
      fakeSymbol(MLA_TEST_CUDA_DRIVER, "cuCtxGetCurrent"));
  ASSERT_TRUE(push && pop && current);
  int other = 0;
  ASSERT_EQ(push(&other), 0);
  Device device = *openTestCudaDevice();
  EXPECT_TRUE(device.getBackend().allocate(16).ok());
  void *now = nullptr;
  ASSERT_EQ(current(&now), 0);
  EXPECT_EQ(now, &other);
  void *popped = nullptr;
  ASSERT_EQ(pop(&popped), 0);
  EXPECT_EQ(popped, &other);
}

TEST(CudaFakeDriverTest, OpenErrorsAreOneLine) {
  TempDir dir;
  struct Case {
    const char *file;
    MlaFakeCudaConfig config;
    int ordinal;
    std::string message;
  };
  MlaFakeCudaConfig noDevices;
  noDevices.deviceCount = 0;
  MlaFakeCudaConfig initNoDevice;
  initNoDevice.initResult = 100;
  MlaFakeCudaConfig stub;
  stub.initResult = 34;
  MlaFakeCudaConfig broken;
  broken.initResult = 999;
  MlaFakeCudaConfig normal;
  std::string stubPath = dir.file("stub.so");
  std::string brokenPath = dir.file("broken.so");
  Case cases[] = {
      {"none.so", noDevices, 0, "cuda: no CUDA device"},
      {"init.so", initNoDevice, 0, "cuda: no CUDA device"},
      {"stub.so", stub, 0,
       "cuda: " + stubPath +
           " is the CUDA toolkit's stub library (no NVIDIA driver on this "
           "machine)"},
      {"broken.so", broken, 0,
       "cuda: cuInit failed: CUDA_ERROR_UNKNOWN (unknown error with a second "
       "line)"},
      {"one.so", normal, 3, "cuda: no CUDA device 3 (this machine has 1)"},
  };
  for (const Case &c : cases) {
    std::string path =
        configuredCopy(dir, MLA_TEST_CUDA_DRIVER, c.file, c.config);
    Expected<std::shared_ptr<Backend>> backend = openWith(path, c.ordinal);
    ASSERT_FALSE(backend.ok()) << c.file;
    EXPECT_EQ(backend.status().message(), c.message);
    // The outcome is kept: a second open answers the same.
    EXPECT_EQ(openWith(path, c.ordinal).status().message(), c.message);
  }

  std::string missing = dir.file("libcuda-missing.so.1");
  EXPECT_EQ(openWith(missing).status().message(),
            "cuda: " + missing +
                " not found (no NVIDIA driver on this machine)");
  EXPECT_EQ(openWith(missing).status().code(), ErrorCode::Unsupported);

  std::string noAlloc =
      configuredCopy(dir, MLA_TEST_FAKE_CUDA_NOALLOC, "noalloc.so", normal);
  EXPECT_EQ(openWith(noAlloc).status().message(),
            "cuda: the NVIDIA driver is too old (" + noAlloc +
                " has no cuMemAlloc_v2)");
}

TEST(CudaFakeDriverTest, OldDriverWithoutGraphs) {
  TempDir dir;
  std::string path = configuredCopy(dir, MLA_TEST_FAKE_CUDA_NOGRAPHS,
                                    "nographs.so", MlaFakeCudaConfig{});
  Expected<std::shared_ptr<Backend>> backend = openWith(path);
  ASSERT_TRUE(backend.ok()) << backend.status().toString();
  auto stream = (*backend)->createStream();
  ASSERT_TRUE(stream.ok());
  auto graph = (*backend)->captureGraph((*stream)->handle(),
                                        [] { return Status::success(); });
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), ErrorCode::Unsupported);
  EXPECT_EQ(graph.status().message(),
            "cuda: the NVIDIA driver has no graph API "
            "(cuGraphInstantiateWithFlags)");
}

TEST(CudaFakeDriverTest, TargetSelectionFollowsTheComputeCapability) {
  TempDir dir;
  std::string manifest = kScaleManifest;
  manifest += "target sm_90a code.sm_90a\nlaunch mla_test_scale args 0,2,1 "
              "grid arg0.0,1,1\nend-target\n";
  struct Case {
    int major, minor;
    const char *target; // nullptr: no target
  };
  for (Case c : {Case{9, 0, "sm_90a"}, Case{8, 0, "sm_80"}, Case{8, 9, "sm_80"},
                 Case{10, 0, "sm_80"}, Case{7, 5, nullptr}}) {
    MlaFakeCudaConfig config;
    config.ccMajor = c.major;
    config.ccMinor = c.minor;
    std::string path = configuredCopy(dir, MLA_TEST_CUDA_DRIVER,
                                      "cc" + std::to_string(c.major) +
                                          std::to_string(c.minor) + ".so",
                                      config);
    Expected<std::shared_ptr<Backend>> backend = openWith(path);
    ASSERT_TRUE(backend.ok()) << backend.status().toString();
    Device device(backend.take());
    Expected<Kernel> kernel =
        device.loadKernel(ptxPackage(manifest, kScalePtx));
    if (!c.target) {
      ASSERT_FALSE(kernel.ok());
      EXPECT_EQ(kernel.status().message(),
                "device 'cuda:0' (Fake CUDA Device): the package has no "
                "target for CUDA compute capability 7.5 (its targets: sm_80, "
                "sm_90a; the CUDA backend needs compute capability 8.0 or "
                "newer)");
      continue;
    }
    ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
    EXPECT_EQ(kernel->getTarget().name, c.target);
  }
}
