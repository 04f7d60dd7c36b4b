//===- CudaUnitTest.cpp - CUDA backend logic that needs no GPU ------------===//
//
// Kernel parameter packing, target selection, device names and the errors of
// Device::open("cuda") on a machine without a usable driver. The backend on
// a (real or fake) device is tested in test/cuda/.
//
//===----------------------------------------------------------------------===//

#include "mla/runtime/CudaBackend.h"
#include "mla/runtime/Device.h"
#include "mla/runtime/KernelParams.h"

#include <gtest/gtest.h>

#include <cstring>
#include <unistd.h>

using namespace mla::rt;

namespace {

float asFloat(uint64_t bits) {
  float value;
  uint32_t low = static_cast<uint32_t>(bits);
  std::memcpy(&value, &low, 4);
  return value;
}

} // namespace

TEST(KernelParamsTest, MemrefsExpandAndScalarsPassByValue) {
  alignas(64) float a[6];
  alignas(64) int32_t b[24];
  ArgValue matrix = TensorView{a, DType::F32, {2, 3}};
  ArgValue factor = Scalar::f32(0.125f);
  ArgValue cube = TensorView{b, DType::I32, {2, 3, 4}};
  KernelParams params;
  packKernelParams({&matrix, &factor, &cube}, params);

  // 2-D memref: 3 + 2*2 = 7, f32: 1, 3-D memref: 3 + 2*3 = 9.
  ASSERT_EQ(params.size(), 17u);
  uint64_t addressA = reinterpret_cast<uintptr_t>(a);
  uint64_t addressB = reinterpret_cast<uintptr_t>(b);
  std::vector<uint64_t> expected = {addressA, addressA, 0, 2, 3, 3, 1, // a
                                    0, // factor (below)
                                    addressB, addressB, 0, 2, 3, 4, 12,
                                    4,        1}; // b
  for (size_t i = 0; i < params.size(); ++i) {
    if (i == 7)
      continue;
    EXPECT_EQ(params.rawValue(i), expected[i]) << "parameter " << i;
    EXPECT_EQ(params.sizeOf(i), 8u) << "parameter " << i;
  }
  EXPECT_EQ(params.sizeOf(7), 4u);
  EXPECT_EQ(asFloat(params.rawValue(7)), 0.125f);

  // data()[i] points at each value, in its low bytes.
  void **pointers = params.data();
  EXPECT_EQ(*static_cast<float *>(pointers[7]), 0.125f);
  EXPECT_EQ(*static_cast<void **>(pointers[0]), static_cast<void *>(a));
  EXPECT_EQ(*static_cast<void **>(pointers[9]), static_cast<void *>(b));
  EXPECT_EQ(*static_cast<int64_t *>(pointers[14]), 12);
}

TEST(KernelParamsTest, ScalarTypesRankZeroAndReuse) {
  int64_t scalarMemory = 0;
  ArgValue rank0 = TensorView{&scalarMemory, DType::I64, {}};
  ArgValue bf16 = Scalar::bf16(1.0f);
  ArgValue i32 = Scalar::i32(-7);
  ArgValue i64 = Scalar::i64(int64_t{1} << 40);
  ArgValue empty = TensorView{nullptr, DType::F16, {0, 5}};
  KernelParams params;
  packKernelParams({&rank0, &bf16, &i32, &i64, &empty}, params);
  ASSERT_EQ(params.size(), 3u + 3u + 7u);
  EXPECT_EQ(params.rawValue(0), reinterpret_cast<uintptr_t>(&scalarMemory));
  EXPECT_EQ(params.sizeOf(3), 2u);
  EXPECT_EQ(params.rawValue(3), 0x3f80u); // bf16 1.0
  EXPECT_EQ(params.sizeOf(4), 4u);
  EXPECT_EQ(*static_cast<int32_t *>(params.data()[4]), -7);
  EXPECT_EQ(params.sizeOf(5), 8u);
  EXPECT_EQ(params.rawValue(5), uint64_t{1} << 40);
  EXPECT_EQ(params.rawValue(6), 0u); // null data
  EXPECT_EQ(params.rawValue(9), 0u); // size 0
  EXPECT_EQ(params.rawValue(10), 5u);
  EXPECT_EQ(params.rawValue(11), 5u); // stride of dim 0
  EXPECT_EQ(params.rawValue(12), 1u);

  // Reuse with fewer parameters; the pointers follow the storage.
  packKernelParams({&i32}, params);
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(*static_cast<int32_t *>(params.data()[0]), -7);
  KernelParams moved = std::move(params);
  EXPECT_EQ(*static_cast<int32_t *>(moved.data()[0]), -7);
  packKernelParams({}, moved);
  EXPECT_EQ(moved.size(), 0u);
}

TEST(CudaTargetTest, WhichTargetsRun) {
  EXPECT_TRUE(cudaTargetRuns(9, 0, "sm_90a"));
  EXPECT_TRUE(cudaTargetRuns(9, 0, "sm_80"));
  EXPECT_TRUE(cudaTargetRuns(8, 0, "sm_80"));
  EXPECT_TRUE(cudaTargetRuns(8, 6, "sm_80"));
  EXPECT_TRUE(cudaTargetRuns(10, 0, "sm_80"));
  EXPECT_TRUE(cudaTargetRuns(12, 0, "sm_80"));
  EXPECT_FALSE(cudaTargetRuns(10, 0, "sm_90a"));
  EXPECT_FALSE(cudaTargetRuns(9, 1, "sm_90a"));
  EXPECT_FALSE(cudaTargetRuns(8, 9, "sm_90a"));
  EXPECT_FALSE(cudaTargetRuns(7, 5, "sm_80"));
  EXPECT_FALSE(cudaTargetRuns(9, 0, "host-x86_64"));
  EXPECT_FALSE(cudaTargetRuns(9, 0, "sm_90"));
  EXPECT_FALSE(cudaTargetRuns(9, 0, "gfx942"));
}

TEST(CudaTargetTest, SelectionPrefersSm90aOnHopper) {
  std::vector<std::string> both = {"host-x86_64", "sm_80", "sm_90a"};
  EXPECT_EQ(*selectCudaTarget(9, 0, both), "sm_90a");
  EXPECT_EQ(*selectCudaTarget(8, 0, both), "sm_80");
  EXPECT_EQ(*selectCudaTarget(8, 9, both), "sm_80");
  EXPECT_EQ(*selectCudaTarget(10, 0, both), "sm_80");
  EXPECT_EQ(*selectCudaTarget(9, 0, {"sm_80"}), "sm_80");
  EXPECT_EQ(*selectCudaTarget(9, 0, {"sm_90a", "sm_80"}), "sm_90a");
}

TEST(CudaTargetTest, NoMatchingTargetNamesCcAndTargets) {
  Expected<std::string> none = selectCudaTarget(9, 0, {"host-x86_64"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::Unsupported);
  EXPECT_EQ(none.status().message(),
            "the package has no target for CUDA compute capability 9.0 (its "
            "targets: host-x86_64; this device runs sm_90a or sm_80)");
  EXPECT_EQ(selectCudaTarget(8, 6, {"sm_90a", "gfx942"}).status().message(),
            "the package has no target for CUDA compute capability 8.6 (its "
            "targets: sm_90a, gfx942; this device runs sm_80)");
  EXPECT_EQ(selectCudaTarget(7, 5, {"sm_80"}).status().message(),
            "the package has no target for CUDA compute capability 7.5 (its "
            "targets: sm_80; the CUDA backend needs compute capability 8.0 or "
            "newer)");
}

TEST(CudaDeviceNameTest, Parses) {
  EXPECT_EQ(parseCudaDeviceName("cuda"), 0);
  EXPECT_EQ(parseCudaDeviceName("cuda:0"), 0);
  EXPECT_EQ(parseCudaDeviceName("cuda:7"), 7);
  EXPECT_EQ(parseCudaDeviceName("cuda:12"), 12);
  EXPECT_EQ(parseCudaDeviceName("cuda:"), std::nullopt);
  EXPECT_EQ(parseCudaDeviceName("cuda:-1"), std::nullopt);
  EXPECT_EQ(parseCudaDeviceName("cuda:1x"), std::nullopt);
  EXPECT_EQ(parseCudaDeviceName("cuda:99999999"), std::nullopt);
  EXPECT_EQ(parseCudaDeviceName("cuda0"), std::nullopt);
  EXPECT_EQ(parseCudaDeviceName("CUDA"), std::nullopt);
  EXPECT_EQ(parseCudaDeviceName("host"), std::nullopt);
}

TEST(CudaOpenTest, OneLineErrorOrADevice) {
  // Here: no driver (or no device), one line. On a GPU machine: device 0.
  Expected<Device> device = Device::open("cuda");
  if (device.ok()) {
    EXPECT_EQ(device->getName(), "cuda:0");
    return;
  }
  const std::string &message = device.status().message();
  EXPECT_EQ(message.rfind("cuda: ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(device.status().code(), ErrorCode::Unsupported) << message;
  // The outcome is stable, and "cuda:N" answers alike.
  EXPECT_EQ(Device::open("cuda").status().message(), message);
  EXPECT_EQ(Device::open("cuda:1").status().message().rfind("cuda: ", 0), 0u);
}

TEST(CudaOpenTest, MissingDriverMessage) {
  CudaBackendOptions options;
  options.driverPath = "libcuda-that-does-not-exist.so.1";
  Expected<std::shared_ptr<Backend>> backend = createCudaBackend(options);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().message(),
            "cuda: libcuda-that-does-not-exist.so.1 not found (no NVIDIA "
            "driver on this machine)");
}

TEST(CudaOpenTest, ToolkitStubLibrary) {
  // The toolkit's link-time stub exports every symbol but has no driver.
  const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (access(stub, R_OK) != 0)
    GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  CudaBackendOptions options;
  options.driverPath = stub;
  Expected<std::shared_ptr<Backend>> backend = createCudaBackend(options);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().message(),
            std::string("cuda: ") + stub +
                " is the CUDA toolkit's stub library (no NVIDIA driver on "
                "this machine)");
}

TEST(CudaOpenTest, AutoFallsBackToTheHost) {
  Expected<Device> device = Device::open("auto", {1});
  ASSERT_TRUE(device.ok()) << device.status().toString();
  if (Device::open("cuda").ok())
    EXPECT_EQ(device->getName(), "cuda:0");
  else
    EXPECT_EQ(device->getName(), "host");
}
