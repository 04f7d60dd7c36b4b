//===- HipFakeRuntimeTest.cpp - Runtime-level checks on the fake HIP ------===//
//
// What only the fake libamdhip64 can observe: the kernarg buffers and launch
// configuration the backend hands to hipModuleLaunchKernel, that the launch
// path neither allocates nor synchronizes, that the caller's current device
// is restored, that every handle is released; the metadata and device-limit
// checks that reject a package before anything is loaded; and the errors of
// runtimes and devices this machine does not have.
//
//===----------------------------------------------------------------------===//

#include "FakeHipRuntime.h"
#include "HipTestUtils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

void *fakeSymbol(const std::string &path, const char *name) {
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(handle, nullptr) << dlerror();
  return handle ? dlsym(handle, name) : nullptr;
}

MlaFakeHipStats stats(const std::string &path = MLA_TEST_HIP_LIBRARY) {
  MlaFakeHipStats result;
  auto get = reinterpret_cast<MlaFakeHipGetStatsFn>(
      fakeSymbol(path, "mlaFakeHipGetStats"));
  if (get)
    get(&result);
  return result;
}

/// A private copy of a fake library (a fresh runtime instance) configured
/// with `config`.
std::string configuredCopy(const TempDir &dir, const char *library,
                           const std::string &name,
                           const MlaFakeHipConfig &config) {
  std::string path = dir.file(name);
  std::filesystem::copy_file(library, path);
  auto configure = reinterpret_cast<MlaFakeHipConfigureFn>(
      fakeSymbol(path, "mlaFakeHipConfigure"));
  if (configure)
    configure(&config);
  return path;
}

Expected<std::shared_ptr<Backend>>
openWith(const std::string &path, int ordinal = 0, bool allowScratch = false) {
  HipBackendOptions options;
  options.libraryPath = path;
  options.ordinal = ordinal;
  options.allowScratch = allowScratch;
  return createHipBackend(options);
}

MlaFakeHipConfig withArch(const char *arch) {
  MlaFakeHipConfig config;
  std::snprintf(config.arch, sizeof(config.arch), "%s", arch);
  return config;
}

uint64_t word(const uint8_t *bytes, size_t offset) {
  uint64_t value;
  std::memcpy(&value, bytes + offset, 8);
  return value;
}

uint64_t address(const DeviceTensor &tensor) {
  return reinterpret_cast<uintptr_t>(tensor.data());
}

/// The fixture object with the first `from` replaced by `to` (same size).
std::vector<uint8_t> patchedObject(const std::string &from,
                                   const std::string &to) {
  std::vector<uint8_t> code = fixtureCodeObject();
  std::vector<uint8_t> pattern(from.begin(), from.end());
  auto it =
      std::search(code.begin(), code.end(), pattern.begin(), pattern.end());
  EXPECT_NE(it, code.end()) << from;
  if (it != code.end())
    std::copy(to.begin(), to.end(), it);
  return code;
}

class HipFakeRuntimeTest : public ::testing::Test {
protected:
  void SetUp() override {
    Expected<Device> opened = openTestHipDevice();
    ASSERT_TRUE(opened.ok()) << opened.status().toString();
    device = opened.take();
  }

  /// Device decode data for `lengths` (2 pages per sequence).
  void prepare(const std::vector<int32_t> &lengths) {
    host = makeDecodeData(fixtureShape(), lengths, 2, 3);
    Expected<DeviceDecodeData> uploaded = uploadDecodeData(*device, host);
    ASSERT_TRUE(uploaded.ok()) << uploaded.status().toString();
    data = uploaded.take();
  }

  LaunchOptions options(void *stream) const {
    LaunchOptions o;
    o.stream = stream;
    o.hostBlockTable = host.blockTable.data();
    o.hostSeqLens = host.seqLens.data();
    return o;
  }

  std::optional<Device> device;
  DecodeData host;
  DeviceDecodeData data;
};

} // namespace

TEST_F(HipFakeRuntimeTest, KernargBuffersReachTheRuntime) {
  Expected<Kernel> kernel = device->loadKernel(fixturePackage());
  ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
  prepare({5, 70, 0});
  size_t bytes = *kernel->workspaceBytes(data.args());
  ASSERT_TRUE(kernel->reserveWorkspace(bytes).ok());
  Expected<std::unique_ptr<Stream>> stream =
      device->getBackend().createStream();
  ASSERT_TRUE(stream.ok());
  void *s = (*stream)->handle();

  MlaFakeHipStats before = stats();
  for (int i = 0; i < 3; ++i) {
    Status status = kernel->launchDecode(data.args(), options(s));
    ASSERT_TRUE(status.ok()) << status.toString();
  }
  MlaFakeHipStats after = stats();
  EXPECT_EQ(after.launches, before.launches + 6);
  EXPECT_EQ(after.allocations, before.allocations) << "a launch allocated";
  EXPECT_EQ(after.synchronizations, before.synchronizations)
      << "a launch waited for the device";
  EXPECT_EQ(after.kernargErrors, 0);
  EXPECT_EQ(after.deviceErrors, before.deviceErrors);
  EXPECT_EQ(after.moduleLoads, before.moduleLoads);

  // decode_k1 last: grid lse.0 (the batch), block 256, no dynamic LDS.
  EXPECT_STREQ(after.lastKernel, "decode_k1");
  EXPECT_EQ(after.lastGrid[0], 3u);
  EXPECT_EQ(after.lastGrid[1], 1u);
  EXPECT_EQ(after.lastGrid[2], 1u);
  EXPECT_EQ(after.lastBlock[0], 256u);
  EXPECT_EQ(after.lastSharedBytes, 0u);
  EXPECT_EQ(after.lastStream, s);

  // decode_k0 (args seq_lens, q, scale, block_table, kv, workspaces 7, 8):
  // 456 bytes, as its kernel descriptor says; offsets from llvm-readelf.
  EXPECT_STREQ(after.previousKernel, "decode_k0");
  ASSERT_EQ(after.previousKernargBytes, 456u);
  const uint8_t *k0 = after.previousKernargs;
  EXPECT_EQ(word(k0, 0), address(data.seqLens));
  EXPECT_EQ(word(k0, 8), address(data.seqLens));
  EXPECT_EQ(word(k0, 16), 0u); // offset
  EXPECT_EQ(word(k0, 24), 3u); // size
  EXPECT_EQ(word(k0, 32), 1u); // stride
  EXPECT_EQ(word(k0, 48), address(data.q));
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(word(k0, 64 + 8 * d),
              static_cast<uint64_t>(data.q.getShape()[d]));
    EXPECT_EQ(word(k0, 96 + 8 * d), (std::vector<uint64_t>{32, 32, 32, 1})[d]);
  }
  float scale;
  std::memcpy(&scale, k0 + 128, 4);
  EXPECT_EQ(scale, host.scale);
  EXPECT_EQ(word(k0, 144), address(data.blockTable));
  EXPECT_EQ(word(k0, 160), 3u);
  EXPECT_EQ(word(k0, 168), 2u);
  EXPECT_EQ(word(k0, 200), address(data.kv));
  EXPECT_EQ(word(k0, 216), 6u); // pages
  EXPECT_EQ(word(k0, 240), 2048u);
  uint64_t workspace = word(k0, 272);
  EXPECT_EQ(workspace % 256, 0u);
  EXPECT_EQ(word(k0, 264), workspace);
  EXPECT_EQ(word(k0, 376), workspace + 768); // f32 [3, 1, 1, 4, 16] first
  EXPECT_EQ(word(k0, 448), 1u);              // last stride of workspace 8

  // decode_k1 (workspaces 8, 7, o, lse): 352 bytes.
  ASSERT_EQ(after.lastKernargBytes, 352u);
  const uint8_t *k1 = after.lastKernargs;
  EXPECT_EQ(word(k1, 8), workspace + 768);
  EXPECT_EQ(word(k1, 96), workspace);
  EXPECT_EQ(word(k1, 200), address(data.o));
  EXPECT_EQ(word(k1, 240), 16u); // o's last size
  EXPECT_EQ(word(k1, 288), address(data.lse));
  EXPECT_EQ(word(k1, 304), 3u);
  EXPECT_EQ(word(k1, 344), 1u);
}

TEST_F(HipFakeRuntimeTest, TheCallersCurrentDeviceIsRestored) {
  TempDir dir;
  MlaFakeHipConfig two;
  two.deviceCount = 2;
  std::string path = configuredCopy(dir, MLA_TEST_HIP_LIBRARY, "two.so", two);
  auto setDevice =
      reinterpret_cast<int (*)(int)>(fakeSymbol(path, "hipSetDevice"));
  auto getDevice =
      reinterpret_cast<int (*)(int *)>(fakeSymbol(path, "hipGetDevice"));
  ASSERT_TRUE(setDevice && getDevice);
  Expected<std::shared_ptr<Backend>> backend = openWith(path);
  ASSERT_TRUE(backend.ok()) << backend.status().toString();
  Device hip0(backend.take());
  ASSERT_EQ(setDevice(1), 0);
  Expected<Kernel> kernel = hip0.loadKernel(fixturePackage());
  ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
  Expected<DeviceTensor> tensor =
      DeviceTensor::allocate(hip0, DType::F32, {1000});
  ASSERT_TRUE(tensor.ok());
  int current = -1;
  ASSERT_EQ(getDevice(&current), 0);
  EXPECT_EQ(current, 1);
  MlaFakeHipStats s = stats(path);
  EXPECT_EQ(s.deviceErrors, 0);
  EXPECT_GT(s.setDeviceCalls, 2);

  Expected<std::shared_ptr<Backend>> second = openWith(path, 1);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)->getName(), "hip:1");
  EXPECT_EQ((*second)->getDescription(),
            "hip:1 (Fake AMD GPU 1, gfx942:sramecc+:xnack-, 304 compute "
            "units)");
}

TEST_F(HipFakeRuntimeTest, OpenErrorsAreOneLine) {
  TempDir dir;
  struct Case {
    const char *file;
    MlaFakeHipConfig config;
    int ordinal;
    std::string message;
    ErrorCode code = ErrorCode::Unsupported;
  };
  MlaFakeHipConfig noDevices;
  noDevices.deviceCount = 0;
  MlaFakeHipConfig initNoDevice;
  initNoDevice.initResult = 100;
  MlaFakeHipConfig oldDriver;
  oldDriver.initResult = 35;
  MlaFakeHipConfig broken;
  broken.initResult = 999;
  MlaFakeHipConfig noWarp;
  noWarp.warpSize = 0;
  Case cases[] = {
      {"none.so", noDevices, 0, "hip: no AMD GPU"},
      {"init.so", initNoDevice, 0, "hip: no AMD GPU"},
      {"old.so", oldDriver, 0,
       "hip: the AMD GPU driver cannot be used: hipErrorInsufficientDriver"},
      {"broken.so", broken, 0,
       "hip: hipInit failed: hipErrorUnknown (unknown error with a second "
       "line)",
       ErrorCode::BackendError},
      {"one.so", MlaFakeHipConfig{}, 3,
       "hip: no AMD GPU 3 (this machine has 1)"},
      {"sm.so", withArch("sm_90a"), 0,
       "hip: cannot read the device's architecture name (gcnArchName of "
       "hipGetDevicePropertiesR0600 is not 'gfx...'; the hipDeviceProp_t "
       "layouts of ROCm 5.x to 7.x are assumed)"},
      {"empty.so", withArch(""), 0,
       "hip: cannot read the device's architecture name (gcnArchName of "
       "hipGetDevicePropertiesR0600 is not 'gfx...'; the hipDeviceProp_t "
       "layouts of ROCm 5.x to 7.x are assumed)"},
      {"nowarp.so", noWarp, 0,
       "hip: unexpected device attributes (warp size 0, 65536 bytes of LDS "
       "per block): the HIP runtime's attribute numbering is not ROCm 5.0 or "
       "newer"},
  };
  for (const Case &c : cases) {
    std::string path =
        configuredCopy(dir, MLA_TEST_HIP_LIBRARY, c.file, c.config);
    Expected<std::shared_ptr<Backend>> backend = openWith(path, c.ordinal);
    ASSERT_FALSE(backend.ok()) << c.file;
    EXPECT_EQ(backend.status().code(), c.code) << c.file;
    EXPECT_EQ(backend.status().message(), c.message);
    // The outcome is kept: a second open answers the same.
    EXPECT_EQ(openWith(path, c.ordinal).status().message(), c.message);
  }

  std::string missing = dir.file("libamdhip64-missing.so");
  EXPECT_EQ(openWith(missing).status().message(),
            "hip: " + missing + " not found (no ROCm on this machine)");
  EXPECT_EQ(openWith(missing).status().code(), ErrorCode::Unsupported);
  std::string notElf = dir.file("not-a-library.so");
  writeBytes(notElf, {'h', 'i', 'p'});
  std::string message = openWith(notElf).status().message();
  EXPECT_EQ(message.rfind("hip: cannot load " + notElf + ": ", 0), 0u)
      << message;

  std::string noMalloc = configuredCopy(dir, MLA_TEST_FAKE_HIP_NOMALLOC,
                                        "nomalloc.so", MlaFakeHipConfig{});
  EXPECT_EQ(openWith(noMalloc).status().message(),
            "hip: the HIP runtime is too old (" + noMalloc +
                " has no hipMalloc)");
}

TEST_F(HipFakeRuntimeTest, Rocm5PropertiesLayout) {
  TempDir dir;
  std::string path = configuredCopy(dir, MLA_TEST_FAKE_HIP_ROCM5, "rocm5.so",
                                    withArch("gfx90a:sramecc-:xnack-"));
  Expected<std::shared_ptr<Backend>> backend = openWith(path);
  ASSERT_TRUE(backend.ok()) << backend.status().toString();
  EXPECT_EQ((*backend)->getDescription(),
            "hip:0 (Fake AMD GPU 0, gfx90a:sramecc-:xnack-, 304 compute "
            "units)");
  auto calls = reinterpret_cast<void (*)(int *, int *)>(
      fakeSymbol(path, "mlaFakeHipPropertiesCalls"));
  int r0600 = -1, r0000 = -1;
  calls(&r0600, &r0000);
  EXPECT_EQ(r0600, 0);
  EXPECT_EQ(r0000, 1);
  Expected<Kernel> kernel = Device(backend.take()).loadKernel(fixturePackage());
  EXPECT_EQ(kernel.status().message(),
            "device 'hip:0' (Fake AMD GPU 0): the package has no target for "
            "gfx90a (its targets: gfx942)");

  // ROCm 6 and newer: the R0600 layout, never the legacy one.
  calls = reinterpret_cast<void (*)(int *, int *)>(
      fakeSymbol(MLA_TEST_HIP_LIBRARY, "mlaFakeHipPropertiesCalls"));
  calls(&r0600, &r0000);
  EXPECT_GE(r0600, 1);
  EXPECT_EQ(r0000, 0);
}

TEST_F(HipFakeRuntimeTest, DeviceLimitsAreCheckedBeforeLoading) {
  TempDir dir;
  MlaFakeHipConfig wave32;
  wave32.warpSize = 32;
  MlaFakeHipConfig smallLds;
  smallLds.ldsBytes = 4096;
  MlaFakeHipConfig fewThreads;
  fewThreads.maxThreadsPerBlock = 128;
  struct Case {
    const char *file;
    MlaFakeHipConfig config;
    ErrorCode code;
    std::string message;
    int moduleLoads;
  };
  Case cases[] = {
      {"wave32.so", wave32, ErrorCode::Unsupported,
       "target 'gfx942': launch 'decode_k0': the kernel runs in wavefronts of "
       "64 lanes, the device's are 32",
       0},
      {"lds.so", smallLds, ErrorCode::Unsupported,
       "target 'gfx942': launch 'decode_k0': 5792 bytes of dynamic LDS "
       "(shared) plus 0 static exceed the device's 4096 bytes per workgroup",
       0},
      // Past the metadata check (the kernel allows 256): the device's limit,
      // after loading.
      {"threads.so", fewThreads, ErrorCode::BackendError,
       "target 'gfx942': launch 'decode_k0': hip: block 256,1,1 has 256 "
       "threads, the entry allows at most 128",
       1},
  };
  for (const Case &c : cases) {
    std::string path =
        configuredCopy(dir, MLA_TEST_HIP_LIBRARY, c.file, c.config);
    Expected<std::shared_ptr<Backend>> backend = openWith(path);
    ASSERT_TRUE(backend.ok()) << backend.status().toString();
    Expected<Kernel> kernel =
        Device(backend.take()).loadKernel(fixturePackage());
    ASSERT_FALSE(kernel.ok()) << c.file;
    EXPECT_EQ(kernel.status().code(), c.code) << c.file;
    EXPECT_EQ(kernel.status().message(), c.message);
    MlaFakeHipStats s = stats(path);
    EXPECT_EQ(s.moduleLoads, c.moduleLoads) << c.file;
    EXPECT_EQ(s.liveModules, 0) << c.file;
  }
}

TEST_F(HipFakeRuntimeTest, CodeObjectsForAnotherProcessor) {
  // The fixture relabelled: its metadata says gfx90a.
  std::vector<uint8_t> gfx90a =
      patchedObject("amdgcn-amd-amdhsa--gfx942", "amdgcn-amd-amdhsa--gfx90a");
  MlaFakeHipStats before = stats();
  Expected<Kernel> kernel =
      device->loadKernel(codePackage(fixtureManifest(), gfx90a));
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), ErrorCode::Unsupported);
  EXPECT_EQ(kernel.status().message(),
            "target 'gfx942': hip: the code object is for "
            "amdgcn-amd-amdhsa--gfx90a, device 'hip:0' is "
            "gfx942:sramecc+:xnack-");
  EXPECT_EQ(stats().moduleLoads, before.moduleLoads);

  // A gfx950 device and a package that claims gfx950 for a gfx942 object.
  TempDir dir;
  std::string path = configuredCopy(dir, MLA_TEST_HIP_LIBRARY, "gfx950.so",
                                    withArch("gfx950:sramecc+:xnack-"));
  Device gfx950(*openWith(path));
  std::string manifest = fixtureManifest();
  manifest.replace(manifest.find("target gfx942 code.gfx942"), 25,
                   "target gfx950 code.gfx950");
  kernel = gfx950.loadKernel(codePackage(manifest, fixtureCodeObject()));
  EXPECT_EQ(kernel.status().message(),
            "target 'gfx950': hip: the code object is for "
            "amdgcn-amd-amdhsa--gfx942, device 'hip:0' is "
            "gfx950:sramecc+:xnack-");
  kernel = gfx950.loadKernel(fixturePackage(), "gfx942");
  EXPECT_EQ(kernel.status().message(),
            "device 'hip:0' cannot run target 'gfx942'");
}

TEST_F(HipFakeRuntimeTest, ScratchIsRejectedUnlessAllowed) {
  // decode_k0's `.private_segment_fixed_size 0` patched to 48.
  std::vector<uint8_t> spilling =
      patchedObject(std::string("\xbb.private_segment_fixed_size\x00", 29),
                    std::string("\xbb.private_segment_fixed_size\x30", 29));
  Package package = codePackage(fixtureManifest(), spilling);
  Expected<Kernel> kernel = device->loadKernel(package);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), ErrorCode::Unsupported);
  EXPECT_EQ(kernel.status().message(),
            "target 'gfx942': launch 'decode_k0': the kernel uses scratch "
            "memory (48 private bytes per work-item): register spills the "
            "runtime does not accept");
  Expected<std::shared_ptr<Backend>> lenient =
      openWith(MLA_TEST_HIP_LIBRARY, 0, /*allowScratch=*/true);
  ASSERT_TRUE(lenient.ok());
  kernel = Device(lenient.take()).loadKernel(package);
  EXPECT_TRUE(kernel.ok()) << kernel.status().toString();
}

TEST_F(HipFakeRuntimeTest, LoaderFailures) {
  TempDir dir;
  MlaFakeHipConfig noBinary;
  noBinary.loadResult = 209;
  std::string path =
      configuredCopy(dir, MLA_TEST_HIP_LIBRARY, "nobin.so", noBinary);
  Expected<Kernel> kernel =
      Device(*openWith(path)).loadKernel(fixturePackage());
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), ErrorCode::BackendError);
  EXPECT_EQ(kernel.status().message(),
            "target 'gfx942': hip: loading the code object failed: "
            "hipErrorNoBinaryForGpu (no kernel image is available for "
            "execution on the device)");
  EXPECT_EQ(stats(path).liveModules, 0);

  // An entry the metadata does not declare, asked of the backend directly.
  Expected<std::unique_ptr<Module>> module =
      device->getBackend().loadModule(fixtureCodeObject(), {"decode_k2"});
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().message(),
            "hip: the code object has no entry 'decode_k2'");
}

TEST_F(HipFakeRuntimeTest, LaunchArgumentsAndLimits) {
  Backend &backend = device->getBackend();
  Expected<std::unique_ptr<Module>> module =
      backend.loadModule(fixtureCodeObject(), {"decode_k1"});
  ASSERT_TRUE(module.ok()) << module.status().toString();
  // decode_k1(workspace 8 [B,1,1,4], workspace 7 [B,1,1,4,16], o, lse).
  ArgValue ws8 = TensorView{nullptr, DType::F32, {2, 1, 1, 4}};
  ArgValue ws7 = TensorView{nullptr, DType::F32, {2, 1, 1, 4, 16}};
  ArgValue o = TensorView{nullptr, DType::BF16, {2, 1, 1, 16}};
  ArgValue lse = TensorView{nullptr, DType::F32, {2, 1, 1}};
  LaunchConfig config;
  config.grid = {2, 1, 1};
  config.block = {256, 1, 1};
  MlaFakeHipStats before = stats();
  Status status = backend.launch(**module, 0, config, {&ws8, &ws7, &o, &lse});
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_EQ(stats().launches, before.launches + 1);

  status = backend.launch(**module, 0, config, {&ws8, &ws7, &o});
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(status.message(), "'decode_k1': the launch has 35 kernel "
                              "arguments, the kernel takes 44");
  ArgValue scalar = Scalar::f32(1.0f);
  status = backend.launch(**module, 0, config, {&ws8, &ws7, &o, &lse, &scalar});
  EXPECT_EQ(status.message(), "'decode_k1': the launch has 45 kernel "
                              "arguments, the kernel takes 44");
  ArgValue lse2 = TensorView{nullptr, DType::F32, {2, 1}};
  ArgValue half = Scalar::bf16(1.0f);
  status = backend.launch(**module, 0, config,
                          {&ws8, &ws7, &o, &lse2, &scalar, &half});
  EXPECT_EQ(status.message(), "'decode_k1': kernel argument 42 has 4 bytes, "
                              "the kernel takes 8");

  config.grid = {0, 1, 1};
  EXPECT_TRUE(backend.launch(**module, 0, config, {&ws8, &ws7, &o, &lse}).ok());
  config.grid = {-1, 1, 1};
  EXPECT_EQ(
      backend.launch(**module, 0, config, {&ws8, &ws7, &o, &lse}).message(),
      "invalid grid [-1, 1, 1]");
  config.grid = {int64_t{1} << 24, 1, 1};
  EXPECT_EQ(
      backend.launch(**module, 0, config, {&ws8, &ws7, &o, &lse}).message(),
      "grid [16777216, 1, 1] with block [256, 1, 1] exceeds HIP's limits "
      "(grid x block < 2^32 work-items per dimension)");
  config.grid = {1, 1, 1};
  config.block = {0, 1, 1};
  EXPECT_EQ(
      backend.launch(**module, 0, config, {&ws8, &ws7, &o, &lse}).message(),
      "invalid block [0, 1, 1] or shared bytes 0");
  config.block = {256, 1, 1};
  EXPECT_EQ(backend.launch(**module, 3, config, {}).message(),
            "hip: entry index 3 is out of range");
  EXPECT_EQ(stats().launches, before.launches + 1);
  EXPECT_EQ(stats().kernargErrors, 0);

  config.sharedBytes = 65537;
  EXPECT_EQ(backend.prepareLaunch(**module, 0, config).message(),
            "hip: shared 65537 bytes (plus 0 static) exceed the device's "
            "65536 bytes of LDS per workgroup");
  config.sharedBytes = 65536;
  EXPECT_TRUE(backend.prepareLaunch(**module, 0, config).ok());
  EXPECT_EQ(backend.prepareLaunch(**module, 1, config).message(),
            "hip: prepareLaunch: not an entry of this device");

  Device other = *openTestHipDevice();
  EXPECT_EQ(other.getBackend()
                .launch(**module, 0, config, {&ws8, &ws7, &o, &lse})
                .message(),
            "hip: module was loaded by another backend");
}

TEST_F(HipFakeRuntimeTest, GraphsReplayTheCapturedKernargs) {
  Kernel kernel = *device->loadKernel(fixturePackage());
  prepare({64, 1});
  Backend &backend = device->getBackend();
  auto stream = backend.createStream();
  ASSERT_TRUE(stream.ok());
  void *s = (*stream)->handle();

  // Without a reserved workspace the capture fails cleanly, nothing
  // allocated.
  MlaFakeHipStats before = stats();
  Expected<std::unique_ptr<Graph>> graph =
      captureDecode(*device, kernel, data.args(), options(s));
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().message().rfind(
                "during graph capture: workspace too small: ", 0),
            0u)
      << graph.status().message();
  EXPECT_EQ(stats().allocations, before.allocations);

  ASSERT_TRUE(
      kernel.reserveWorkspace(*kernel.workspaceBytes(data.args())).ok());
  graph = captureDecode(*device, kernel, data.args(), options(s));
  ASSERT_TRUE(graph.ok()) << graph.status().toString();
  MlaFakeHipStats captured = stats();
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE((*graph)->launch(s).ok());
  MlaFakeHipStats replayed = stats();
  EXPECT_EQ(replayed.graphLaunches, captured.graphLaunches + 2);
  EXPECT_EQ(replayed.launches, captured.launches + 4);
  EXPECT_EQ(std::memcmp(replayed.lastKernargs, captured.lastKernargs, 352), 0);
  EXPECT_STREQ(replayed.previousKernel, "decode_k0");

  // A capture that allocates or synchronizes fails, and ends.
  graph =
      backend.captureGraph(s, [&] { return backend.allocate(64).status(); });
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().message(),
            "during graph capture: hip: hipMalloc failed: "
            "hipErrorStreamCaptureUnsupported");
  EXPECT_TRUE(backend.allocate(64).ok());
  graph = backend.captureGraph(nullptr, [] { return Status::success(); });
  EXPECT_EQ(graph.status().message(),
            "graph capture needs a stream (the default stream cannot be "
            "captured)");
}

TEST_F(HipFakeRuntimeTest, RuntimeWithoutGraphs) {
  TempDir dir;
  std::string path = configuredCopy(dir, MLA_TEST_FAKE_HIP_NOGRAPHS,
                                    "nographs.so", MlaFakeHipConfig{});
  Expected<std::shared_ptr<Backend>> backend = openWith(path);
  ASSERT_TRUE(backend.ok()) << backend.status().toString();
  auto stream = (*backend)->createStream();
  ASSERT_TRUE(stream.ok());
  auto graph = (*backend)->captureGraph((*stream)->handle(),
                                        [] { return Status::success(); });
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), ErrorCode::Unsupported);
  EXPECT_EQ(graph.status().message(), "hip: the HIP runtime has no graph API "
                                      "(hipGraphInstantiateWithFlags)");
}

TEST_F(HipFakeRuntimeTest, EverythingIsReleased) {
  MlaFakeHipStats before = stats();
  {
    Device local = *openTestHipDevice();
    Backend &backend = local.getBackend();
    auto stream = backend.createStream();
    auto timer = backend.createTimer();
    auto buffer = backend.allocate(1000);
    ASSERT_TRUE(stream.ok() && timer.ok() && buffer.ok());
    Expected<Kernel> kernel = local.loadKernel(fixturePackage());
    ASSERT_TRUE(kernel.ok());
    ASSERT_TRUE(kernel->reserveWorkspace(4096).ok());
    auto graph = backend.captureGraph((*stream)->handle(),
                                      [] { return Status::success(); });
    ASSERT_TRUE(graph.ok()) << graph.status().toString();
    MlaFakeHipStats during = stats();
    EXPECT_EQ(during.liveStreams, before.liveStreams + 1);
    EXPECT_EQ(during.liveEvents, before.liveEvents + 2);
    EXPECT_EQ(during.liveAllocations, before.liveAllocations + 2);
    EXPECT_EQ(during.liveModules, before.liveModules + 1);
    EXPECT_EQ(during.liveGraphs, before.liveGraphs + 2);
  }
  MlaFakeHipStats after = stats();
  EXPECT_EQ(after.liveStreams, before.liveStreams);
  EXPECT_EQ(after.liveEvents, before.liveEvents);
  EXPECT_EQ(after.liveAllocations, before.liveAllocations);
  EXPECT_EQ(after.liveModules, before.liveModules);
  EXPECT_EQ(after.liveGraphs, before.liveGraphs);
  EXPECT_EQ(after.deviceErrors, before.deviceErrors);
}
