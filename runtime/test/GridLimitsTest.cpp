//===- GridLimitsTest.cpp - Launch-time grids against the target's limits -===//
//
// Grids computed at launch from argument shapes are checked against the
// limits of the loaded target's kind of code (GridLimits.h: CUDA, HSA, the
// host) before the first launch runs: one error naming the launch, the grid
// dim, where its size comes from and the limit, and nothing launched (a
// recording backend sees every launch that would reach a device).
//
//===----------------------------------------------------------------------===//

#include "mla/runtime/GridLimits.h"
#include "mla/runtime/Runtime.h"

#include <gtest/gtest.h>

using namespace mla::rt;

namespace {

/// Runs nothing: records the grid of every launch that reaches it.
class RecordingBackend : public Backend {
public:
  struct FakeModule : Module {
    explicit FakeModule(const Backend &backend) : Module(backend) {}
  };

  RecordingBackend() : host(createHostBackend({1})) {}
  std::string_view getName() const override { return "recorder"; }
  bool supportsTarget(std::string_view) const override { return true; }
  bool usesHostMemory() const override { return true; }
  bool isAsynchronous() const override { return false; }
  Expected<std::unique_ptr<Module>>
  loadModule(const std::vector<uint8_t> &,
             const std::vector<std::string> &) override {
    return std::unique_ptr<Module>(std::make_unique<FakeModule>(*this));
  }
  Expected<std::unique_ptr<DeviceBuffer>> allocate(size_t bytes) override {
    return host->allocate(bytes);
  }
  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    return host->copyToHost(dst, src, bytes);
  }
  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    return host->copyToDevice(dst, src, bytes);
  }
  Status fillBytes(void *dst, uint8_t value, size_t bytes) override {
    return host->fillBytes(dst, value, bytes);
  }
  Status launch(const Module &, size_t, const LaunchConfig &config,
                const std::vector<const ArgValue *> &) override {
    grids.push_back(config.grid);
    return Status::success();
  }
  Status synchronize(void *) override { return Status::success(); }

  std::vector<Grid> grids;

private:
  std::shared_ptr<Backend> host;
};

/// A kind without rules (only the generic checks), two launches per GPU
/// target: the first has a constant grid, the second one from x's shape.
const char *const kManifest = R"(mla-manifest 1
kernel custom
function f
arg 0 x memref f32 ?,?
target sm_90a code.sm_90a
launch first args 0 grid 1,1,1 block 32,1,1 shared 0
launch second args 0 grid arg0.0,arg0.1,1 block 32,1,1 shared 0
end-target
target gfx942 code.gfx942
launch first args 0 grid 1,1,1 block 256,1,1 shared 0
launch second args 0 grid arg0.0,arg0.1+1/2,1 block 256,1,1 shared 0
end-target
)";

class GridLimitsTest : public ::testing::Test {
protected:
  Kernel load(const char *target) {
    Expected<std::vector<uint8_t>> bytes =
        encodePackage(kManifest, {{"code.sm_90a", {1}}, {"code.gfx942", {2}}});
    EXPECT_TRUE(bytes.ok()) << bytes.status().toString();
    Expected<Package> package = parsePackage(bytes->data(), bytes->size());
    EXPECT_TRUE(package.ok()) << package.status().toString();
    Expected<Kernel> kernel = Device(backend).loadKernel(*package, target);
    EXPECT_TRUE(kernel.ok()) << kernel.status().toString();
    return kernel.take();
  }

  /// x with `shape` (never read: only the grid sizes come from it).
  std::vector<ArgValue> args(std::vector<int64_t> shape) {
    return {TensorView{storage, DType::F32, std::move(shape)}};
  }

  std::shared_ptr<RecordingBackend> backend =
      std::make_shared<RecordingBackend>();
  alignas(64) float storage[16] = {};
};

} // namespace

TEST(GridLimitsTableTest, TargetsAndLimits) {
  EXPECT_EQ(gridLimitsOf("sm_90a"), &kCudaGridLimits);
  EXPECT_EQ(gridLimitsOf("sm_80"), &kCudaGridLimits);
  EXPECT_EQ(gridLimitsOf("gfx942"), &kHsaGridLimits);
  EXPECT_EQ(gridLimitsOf("gfx950-emu"), &kHsaGridLimits);
  EXPECT_EQ(gridLimitsOf("host-x86_64"), &kHostGridLimits);
  EXPECT_EQ(gridLimitsOf("host"), &kHostGridLimits);
  EXPECT_EQ(gridLimitsOf("tpu"), nullptr);
  EXPECT_EQ(kCudaGridLimits.maxAlong(0, 1024), (int64_t{1} << 31) - 1);
  EXPECT_EQ(kCudaGridLimits.maxAlong(1, 1), 65535);
  EXPECT_EQ(kHsaGridLimits.maxAlong(0, 256), 16777215);
  EXPECT_EQ(kHsaGridLimits.maxAlong(2, 1), (int64_t{1} << 32) - 1);
}

TEST_F(GridLimitsTest, CudaGridYAndZStopAt65535) {
  Kernel kernel = load("sm_90a");
  ASSERT_TRUE(kernel.launch(args({3, 65535})).ok());
  EXPECT_EQ(backend->grids, (std::vector<Grid>{{1, 1, 1}, {3, 65535, 1}}));
  backend->grids.clear();

  const char *message = "launch 'second': grid y is 65536 (x dim 1), more "
                        "than the 65535 workgroups target 'sm_90a' can "
                        "launch (CUDA: x < 2^31, y and z <= 65535); nothing "
                        "was launched";
  EXPECT_EQ(kernel.launch(args({3, 65536})).message(), message);
  EXPECT_EQ(kernel.validate(args({3, 65536})).message(), message);
  // Checked without validation too: the launch would fail or run wrong.
  LaunchOptions unchecked;
  unchecked.validate = false;
  EXPECT_EQ(kernel.launch(args({3, 65536}), unchecked).message(), message);
  // Nothing reached the device, not even the first launch.
  EXPECT_TRUE(backend->grids.empty());
}

TEST_F(GridLimitsTest, CudaGridXBelow2To31) {
  Kernel kernel = load("sm_90a");
  ASSERT_TRUE(kernel.launch(args({(int64_t{1} << 31) - 1, 1})).ok());
  EXPECT_EQ(kernel.launch(args({int64_t{1} << 31, 1})).message(),
            "launch 'second': grid x is 2147483648 (x dim 0), more than the "
            "2147483647 workgroups target 'sm_90a' can launch (CUDA: x < "
            "2^31, y and z <= 65535); nothing was launched");
}

TEST_F(GridLimitsTest, HsaCountsWorkItems) {
  Kernel kernel = load("gfx942");
  // 16777215 workgroups of 256 work-items are 2^32 - 256 work-items.
  ASSERT_TRUE(kernel.launch(args({16777215, 1})).ok());
  EXPECT_EQ(kernel.launch(args({16777216, 1})).message(),
            "launch 'second': grid x is 16777216 (x dim 0), more than the "
            "16777215 workgroups of 256 work-items target 'gfx942' can launch "
            "(HSA: grid x block < 2^32 work-items per dim); nothing was "
            "launched");
  int64_t big = (int64_t{1} << 33) + 5;
  EXPECT_EQ(kernel.launch(args({1, big})).message(),
            "launch 'second': grid y is 4294967299 (ceil((x dim 1 + 1) / 2)), "
            "more than the 4294967295 workgroups target 'gfx942' can launch "
            "(HSA: grid x block < 2^32 work-items per dim); nothing was "
            "launched");
}

// A compiled prefill's grid z is the number of requests: 65536 of them are
// too many for one CUDA launch.
TEST(GridLimitsPrefillTest, CudaRequestsPerLaunch) {
  std::string manifest = R"(mla-manifest 1
kernel prefill
function prefill
causal 1
dtype f32
heads 1
qk_dim 16
v_dim 16
arg 0 q memref f32 ?,1,16
arg 1 k memref f32 ?,1,16
arg 2 v memref f32 ?,1,16
arg 3 cu_seqlens_q memref i32 ?
arg 4 cu_seqlens_k memref i32 ?
arg 5 scale scalar f32
arg 6 o memref f32 ?,1,16
arg 7 lse memref f32 1,?
target sm_90a code.sm_90a
config tile_q=64
launch prefill_k0 args 0,3,4,5,1,2,6,7 grid arg0.0/64,1,arg3.0-1 block 128,1,1 shared 0
end-target
)";
  Expected<std::vector<uint8_t>> bytes =
      encodePackage(manifest, {{"code.sm_90a", {1}}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  Expected<Package> package = parsePackage(bytes->data(), bytes->size());
  ASSERT_TRUE(package.ok()) << package.status().toString();
  auto backend = std::make_shared<RecordingBackend>();
  Expected<Kernel> kernel = Device(backend).loadKernel(*package, "sm_90a");
  ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
  // 65536 empty requests (every offset 0), no rows.
  std::vector<int32_t> offsets(65537, 0);
  float none[4] = {};
  std::map<std::string, ArgValue> args = {
      {"q", TensorView{none, DType::F32, {0, 1, 16}}},
      {"k", TensorView{none, DType::F32, {0, 1, 16}}},
      {"v", TensorView{none, DType::F32, {0, 1, 16}}},
      {"cu_seqlens_q", TensorView{offsets.data(), DType::I32, {65537}}},
      {"cu_seqlens_k", TensorView{offsets.data(), DType::I32, {65537}}},
      {"scale", Scalar::f32(0.25f)},
      {"o", TensorView{none, DType::F32, {0, 1, 16}}},
      {"lse", TensorView{none, DType::F32, {1, 0}}}};
  EXPECT_EQ(kernel->launchByRole(args).message(),
            "launch 'prefill_k0': grid z is 65536 (cu_seqlens_q dim 0 - 1), "
            "more than the 65535 workgroups target 'sm_90a' can launch (CUDA: "
            "x < 2^31, y and z <= 65535); nothing was launched");
  EXPECT_TRUE(backend->grids.empty());
}
