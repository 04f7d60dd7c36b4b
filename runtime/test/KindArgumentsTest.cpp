//===- KindArgumentsTest.cpp - launch-argument checks of the kinds --------===//
//
// One test per launch-argument check of `kernel prefill`, `kernel merge` and
// `kernel append_kv` (each breaks one argument of a valid launch, expects the
// exact message and that nothing was launched). A backend that runs on host
// memory but presents itself as a GPU (usesHostMemory() false) checks the GPU
// rules: content checks from LaunchOptions::hostData only, 16-byte alignment.
//
//===----------------------------------------------------------------------===//

#include "KindTestUtils.h"
#include "KindValidationUtils.h"
#include "TestUtils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

using namespace mla::rt;
using namespace mla::rt::test;

// ---- prefill launch validation -------------------------------------------

namespace {

/// A valid bf16 prefill launch: 3 requests, 10 query rows, 14 key rows.
class PrefillValidationTest : public ::testing::Test {
protected:
  void SetUp() override {
    kernel = loadKindKernel(prefillManifest(shape));
    data = makePrefillData(shape, {3, 0, 7}, {5, 2, 7}, 1);
    fillSentinel(data.lse);
    views = tensorsOf(data.byRole());
  }

  void expectError(const std::string &message,
                   const LaunchOptions &options = {}) {
    EXPECT_EQ(launchError(*kernel, args(), options).message(), message);
    expectUntouched(data.lse);
  }

  TensorView &view(const char *role) { return views.at(role); }
  std::map<std::string, ArgValue> args() const {
    return withTensors(data.byRole(), views);
  }
  int32_t *cuQ() { return data.cuSeqlensQ.dataAs<int32_t>(); }
  int32_t *cuK() { return data.cuSeqlensK.dataAs<int32_t>(); }

  PrefillShape shape;
  std::optional<Kernel> kernel;
  PrefillData data;
  std::map<std::string, TensorView> views;
};

} // namespace

TEST_F(PrefillValidationTest, ValidArgumentsLaunch) {
  Status status = kernel->launchByRole(args());
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_NE(data.lse.dataAs<float>()[0], kSentinel);
}

TEST_F(PrefillValidationTest, ScaleMustBeFinite) {
  std::map<std::string, ArgValue> bad = args();
  bad.at("scale") = Scalar::f32(-std::numeric_limits<float>::infinity());
  EXPECT_EQ(launchError(*kernel, bad).message(),
            "scale: -inf is not a finite number (the softmax scale)");
  expectUntouched(data.lse);
}

TEST_F(PrefillValidationTest, StaticHeadDim) {
  view("k").shape[2] = 16;
  expectError("k: dim 2 is 16, expected 24");
}

TEST_F(PrefillValidationTest, OffsetsDType) {
  HostTensor wide = converted(data.cuSeqlensQ, DType::I64);
  views.at("cu_seqlens_q") = wide.view();
  expectError("cu_seqlens_q: expected dtype i32, got i64");
}

TEST_F(PrefillValidationTest, OutputRows) {
  view("o").shape[0] = 9;
  expectError("o: dim 0 is 9, expected 10 (query rows, q dim 0)");
}

TEST_F(PrefillValidationTest, LseRows) {
  view("lse").shape[1] = 11;
  expectError("lse: dim 1 is 11, expected 10 (query rows, q dim 0)");
}

TEST_F(PrefillValidationTest, ValueRows) {
  view("v").shape[0] = 13;
  expectError("v: dim 0 is 13, expected 14 (key rows, k dim 0)");
}

TEST_F(PrefillValidationTest, TooFewOffsets) {
  view("cu_seqlens_q").shape[0] = 1;
  view("cu_seqlens_k").shape[0] = 1;
  expectError("cu_seqlens_q: dim 0 is 1, expected at least 2 (batch + 1 "
              "offsets, batch >= 1)");
}

TEST_F(PrefillValidationTest, OffsetCountsDiffer) {
  view("cu_seqlens_k").shape[0] = 3;
  expectError("cu_seqlens_k: dim 0 is 3, expected 4 (batch + 1, "
              "cu_seqlens_q dim 0)");
}

TEST_F(PrefillValidationTest, FirstOffsetNotZero) {
  cuQ()[0] = 1;
  expectError("cu_seqlens_q[0] = 1, expected 0 (the first offset)");
}

TEST_F(PrefillValidationTest, DecreasingOffsets) {
  cuK()[2] = 4; // {0, 5, 4, 14}
  expectError("cu_seqlens_k[2] = 4 is less than cu_seqlens_k[1] = 5 "
              "(offsets must not decrease)");
}

TEST_F(PrefillValidationTest, NegativeOffset) {
  cuQ()[1] = -3;
  expectError("cu_seqlens_q[1] = -3 is less than cu_seqlens_q[0] = 0 "
              "(offsets must not decrease)");
}

TEST_F(PrefillValidationTest, LastQueryOffset) {
  cuQ()[3] = 11;
  expectError("cu_seqlens_q[3] = 11, expected 10 (the last offset is the "
              "number of query rows, q dim 0)");
}

TEST_F(PrefillValidationTest, LastKeyOffset) {
  cuK()[3] = 12;
  expectError("cu_seqlens_k[3] = 12, expected 14 (the last offset is the "
              "number of key rows, k dim 0)");
}

TEST_F(PrefillValidationTest, HeaderDimsOfDynamicManifestDims) {
  // A manifest with '?' for heads and head dims: the header still fixes them.
  PrefillShape dynamic = shape;
  dynamic.dynamicDims = true;
  kernel = loadKindKernel(prefillManifest(dynamic));
  view("q").shape[1] = 3;
  expectError("q: dim 1 is 3, expected 2 (heads)");
  view("q").shape[1] = 2;
  view("k").shape[2] = 20;
  expectError("k: dim 2 is 20, expected 24 (qk_dim)");
  view("k").shape[2] = 24;
  view("o").shape[2] = 24;
  expectError("o: dim 2 is 24, expected 16 (v_dim)");
  view("o").shape[2] = 16;
  view("lse").shape[0] = 1;
  expectError("lse: dim 0 is 1, expected 2 (heads)");
  view("lse").shape[0] = 2;
  Status status = kernel->launchByRole(args());
  EXPECT_TRUE(status.ok()) << status.toString();
}

TEST_F(PrefillValidationTest, ValidationOffSkipsContentChecksOnly) {
  // Content checks are skipped: a last offset one short is not noticed (the
  // kernel just leaves the last row alone).
  cuQ()[3] = 9;
  LaunchOptions off;
  off.validate = false;
  Status status = kernel->launchByRole(args(), off);
  EXPECT_TRUE(status.ok()) << status.toString();
  // What the runtime relies on is still refused: dtype, rank, count.
  fillSentinel(data.lse);
  HostTensor f32 = HostTensor::allocate(DType::F32, {10, 2, 24}).take();
  views.at("q") = f32.view();
  expectError("q: expected dtype bf16, got f32", off);
  views.at("q") = data.q.view();
  view("lse").shape = {20};
  expectError("lse: expected rank 2, got 1", off);
}

// ---- merge launch validation ---------------------------------------------

namespace {

/// A valid merge launch: 3 parts of 6 rows, bf16 o.
class MergeValidationTest : public ::testing::Test {
protected:
  void SetUp() override {
    kernel = loadKindKernel(mergeManifest(shape));
    data = makeMergeData(shape, 6, 2);
    fillSentinel(data.lse);
    views = tensorsOf(data.byRole());
  }

  void expectError(const std::string &message) {
    EXPECT_EQ(launchError(*kernel, args()).message(), message);
    expectUntouched(data.lse);
  }

  TensorView &view(const char *role) { return views.at(role); }
  std::map<std::string, ArgValue> args() const {
    return withTensors(data.byRole(), views);
  }

  MergeShape shape;
  std::optional<Kernel> kernel;
  MergeData data;
  std::map<std::string, TensorView> views;
};

} // namespace

TEST_F(MergeValidationTest, ValidArgumentsLaunch) {
  Status status = kernel->launchByRole(args());
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_NE(data.lse.dataAs<float>()[0], kSentinel);
}

TEST_F(MergeValidationTest, PartsCount) {
  view("o_parts").shape[0] = 2;
  expectError("o_parts: dim 0 is 2, expected 3");
}

TEST_F(MergeValidationTest, LsePartsRows) {
  view("lse_parts").shape[2] = 5;
  expectError("lse_parts: dim 2 is 5, expected 6 (query rows, o_parts dim 1)");
}

TEST_F(MergeValidationTest, OutputRows) {
  view("o").shape[0] = 7;
  expectError("o: dim 0 is 7, expected 6 (query rows, o_parts dim 1)");
}

TEST_F(MergeValidationTest, LseRows) {
  view("lse").shape[1] = 4;
  expectError("lse: dim 1 is 4, expected 6 (query rows, o_parts dim 1)");
}

TEST_F(MergeValidationTest, OutputDType) {
  HostTensor f32 = HostTensor::allocate(DType::F32, {6, 2, 16}).take();
  views.at("o") = f32.view();
  expectError("o: expected dtype bf16, got f32");
}

TEST_F(MergeValidationTest, HeaderDimsOfDynamicManifestDims) {
  std::string text = mergeManifest(shape);
  for (auto [from, to] :
       {std::pair<std::string, std::string>{"f32 3,?,2,16", "f32 ?,?,?,?"},
        {"f32 3,2,?", "f32 ?,?,?"},
        {"bf16 ?,2,16", "bf16 ?,?,?"},
        {"f32 2,?", "f32 ?,?"}})
    text.replace(text.find(from), from.size(), to);
  kernel = loadKindKernel(text);
  view("o_parts").shape[0] = 4;
  expectError("o_parts: dim 0 is 4, expected 3 (parts)");
  view("o_parts").shape[0] = 3;
  view("lse_parts").shape[1] = 1;
  expectError("lse_parts: dim 1 is 1, expected 2 (heads)");
  view("lse_parts").shape[1] = 2;
  view("o").shape[2] = 8;
  expectError("o: dim 2 is 8, expected 16 (v_dim)");
  view("o").shape[2] = 16;
  Status status = kernel->launchByRole(args());
  EXPECT_TRUE(status.ok()) << status.toString();
}

// ---- append_kv launch validation -----------------------------------------

namespace {

/// A valid append: 5 tokens (one padding) into a pool of 6 pages of 4.
class AppendKvValidationTest : public ::testing::Test {
protected:
  void SetUp() override {
    kernel = loadKindKernel(appendKvManifest(shape));
    data = makeAppendKvData(shape, {3, -1, 23, 0, 9}, 6, 8);
    before = toFloats(data.kv);
    views = tensorsOf(data.byRole());
  }

  void expectError(const std::string &message,
                   const LaunchOptions &options = {}) {
    EXPECT_EQ(launchError(*kernel, args(), options).message(), message);
    EXPECT_EQ(toFloats(data.kv), before) << "a kernel ran";
  }

  TensorView &view(const char *role) { return views.at(role); }
  std::map<std::string, ArgValue> args() const {
    return withTensors(data.byRole(), views);
  }
  int32_t *slots() { return data.slotMapping.dataAs<int32_t>(); }

  AppendKvShape shape;
  std::optional<Kernel> kernel;
  AppendKvData data;
  std::vector<float> before;
  std::map<std::string, TensorView> views;
};

} // namespace

TEST_F(AppendKvValidationTest, ValidArgumentsLaunch) {
  std::vector<float> expected = referenceAppendKv(data);
  Status status = kernel->launchByRole(args());
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_EQ(toFloats(data.kv), expected);
}

TEST_F(AppendKvValidationTest, RowWidth) {
  view("kv_new").shape[1] = 24;
  expectError("kv_new: dim 1 is 24, expected 32");
}

TEST_F(AppendKvValidationTest, SlotMappingLength) {
  view("slot_mapping").shape[0] = 4;
  expectError(
      "slot_mapping: dim 0 is 4, expected 5 (new tokens, kv_new dim 0)");
}

TEST_F(AppendKvValidationTest, PageSize) {
  view("kv").shape[1] = 8;
  expectError("kv: dim 1 is 8, expected 4");
}

TEST_F(AppendKvValidationTest, EmptyPagePool) {
  view("kv").shape[0] = 0;
  expectError("kv: the page pool is empty (dim 0 is 0)");
}

TEST_F(AppendKvValidationTest, ZeroDynamicPageSize) {
  AppendKvShape dynamic = shape;
  dynamic.pageSize = 0;
  kernel = loadKindKernel(appendKvManifest(dynamic));
  view("kv").shape[1] = 0;
  expectError("kv: the page size (dim 1) is 0");
}

TEST_F(AppendKvValidationTest, DynamicRowWidth) {
  std::string text = appendKvManifest(shape);
  text.replace(text.find("bf16 ?,32"), 9, "bf16 ?,?");
  kernel = loadKindKernel(text);
  view("kv_new").shape[1] = 30;
  expectError("kv_new: dim 1 is 30, expected 32 (latent_dim + rope_dim)");
}

TEST_F(AppendKvValidationTest, SlotOutsideThePool) {
  slots()[2] = 24;
  expectError("slot_mapping[2] = 24 is outside the page pool (kv has 6 pages "
              "x 4 = 24 slots)");
}

TEST_F(AppendKvValidationTest, NegativeSlot) {
  slots()[4] = -2;
  expectError("slot_mapping[4] = -2 is negative (only -1, a padding token, "
              "may be)");
}

TEST_F(AppendKvValidationTest, EveryTokenPadding) {
  for (int t = 0; t < 5; ++t)
    slots()[t] = -1;
  Status status = kernel->launchByRole(args());
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_EQ(toFloats(data.kv), before);
}

// ---- the GPU rules (host memory behind a GPU-like backend) ---------------

TEST(GpuRulesTest, PrefillContentChecksUseHostData) {
  PrefillShape shape;
  Kernel kernel = loadOnGpuLike(prefillManifest(shape));
  PrefillData data = makePrefillData(shape, {3, 7}, {3, 9}, 4);
  data.cuSeqlensK.dataAs<int32_t>()[2] = 8; // Tk is 12
  // Without host copies the device's offsets cannot be read: not checked.
  EXPECT_TRUE(kernel.validate(*kernel.bindByRole(data.byRole())).ok());
  LaunchOptions options;
  HostTensor copy = converted(data.cuSeqlensK, DType::I32);
  options.hostData["cu_seqlens_k"] = copy.data();
  Status status = kernel.launchByRole(data.byRole(), options);
  EXPECT_EQ(status.message(), "cu_seqlens_k[2] = 8, expected 12 (the last "
                              "offset is the number of key rows, k dim 0)");
  // Each copy is checked on its own.
  copy.dataAs<int32_t>()[2] = 12;
  HostTensor queries = converted(data.cuSeqlensQ, DType::I32);
  queries.dataAs<int32_t>()[0] = 2;
  options.hostData["cu_seqlens_q"] = queries.data();
  status = kernel.launchByRole(data.byRole(), options);
  EXPECT_EQ(status.message(),
            "cu_seqlens_q[0] = 2, expected 0 (the first offset)");
  queries.dataAs<int32_t>()[0] = 0;
  // Roles the kernel does not have are ignored.
  options.hostData["block_table"] = nullptr;
  EXPECT_TRUE(kernel.validate(*kernel.bindByRole(data.byRole()), options).ok());
}

TEST(GpuRulesTest, AppendKvSlotsFromHostData) {
  AppendKvShape shape;
  Kernel kernel = loadOnGpuLike(appendKvManifest(shape));
  AppendKvData data = makeAppendKvData(shape, {1, 2, 99}, 3, 1);
  std::vector<ArgValue> args = *kernel.bindByRole(data.byRole());
  EXPECT_TRUE(kernel.validate(args).ok());
  LaunchOptions options;
  options.hostData["slot_mapping"] = data.slotMapping.data();
  EXPECT_EQ(kernel.validate(args, options).message(),
            "slot_mapping[2] = 99 is outside the page pool (kv has 3 pages x "
            "4 = 12 slots)");
}

TEST(GpuRulesTest, DecodeHostDataTakesPrecedence) {
  DecodeShape shape;
  Device device(std::make_shared<HostAsGpuBackend>());
  Expected<Kernel> kernel = device.loadKernel(decodePackage(shape));
  ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
  DecodeData data = makeDecodeData(shape, {10, 20}, 2, 3);
  std::vector<int32_t> badLens = {10, 33}; // capacity 2 x 16
  LaunchOptions options;
  options.hostSeqLens = data.seqLens.data();
  std::vector<ArgValue> args = *kernel->bindDecode(data.args());
  EXPECT_TRUE(kernel->validate(args, options).ok());
  options.hostData["seq_lens"] = badLens.data();
  EXPECT_EQ(kernel->validate(args, options).message(),
            "seq_lens[1] = 33 exceeds the block table's capacity (2 pages x 16 "
            "= 32 tokens)");
}

namespace {

/// `t`'s elements copied to `offset` bytes past a 64-byte boundary.
struct Misaligned {
  std::vector<uint8_t> storage;
  TensorView view;

  Misaligned(const HostTensor &t, size_t offset)
      : storage(t.sizeInBytes() + 64 + offset) {
    uintptr_t base = reinterpret_cast<uintptr_t>(storage.data());
    uint8_t *data = storage.data() + ((64 - base % 64) % 64) + offset;
    std::memcpy(data, t.data(), t.sizeInBytes());
    view = {data, t.getDType(), t.getShape()};
  }
};

} // namespace

TEST(AlignmentTest, GpuFloatTensorsNeed16Bytes) {
  PrefillShape shape;
  Kernel kernel = loadOnGpuLike(prefillManifest(shape));
  PrefillData data = makePrefillData(shape, {4}, {4}, 2);
  std::map<std::string, ArgValue> args = data.byRole();
  Misaligned k(data.k, 8);
  args.at("k") = k.view;
  Status status = kernel.launchByRole(args);
  EXPECT_EQ(status.message(),
            "k: data is not 16-byte aligned (address % 16 = 8; GPU kernels "
            "move floating-point tensors in 16-byte vectors)");
  // Refused even without validation: a misaligned vector access faults.
  LaunchOptions off;
  off.validate = false;
  EXPECT_EQ(kernel.launchByRole(args, off).message(), status.message());
  // Index tensors need only their element alignment.
  Misaligned k16(data.k, 16), offsets(data.cuSeqlensQ, 4);
  args.at("k") = k16.view;
  args.at("cu_seqlens_q") = offsets.view;
  EXPECT_TRUE(kernel.launchByRole(args).ok());
}

TEST(AlignmentTest, ElementAlignmentEverywhere) {
  AppendKvShape shape;
  Kernel kernel = loadKindKernel(appendKvManifest(shape));
  AppendKvData data = makeAppendKvData(shape, {1, 2}, 3, 1);
  std::map<std::string, ArgValue> args = data.byRole();
  Misaligned slots(data.slotMapping, 2);
  args.at("slot_mapping") = slots.view;
  EXPECT_EQ(kernel.launchByRole(args).message(),
            "slot_mapping: data is not 4-byte aligned (address % 4 = 2; i32 "
            "elements)");
  LaunchOptions off;
  off.validate = false;
  EXPECT_EQ(kernel.launchByRole(args, off).message(),
            "slot_mapping: data is not 4-byte aligned (address % 4 = 2; i32 "
            "elements)");
  Misaligned kv(data.kv, 1);
  args.at("slot_mapping") = data.slotMapping.view();
  args.at("kv") = kv.view;
  EXPECT_EQ(kernel.launchByRole(args).message(),
            "kv: data is not 2-byte aligned (address % 2 = 1; bf16 "
            "elements)");
  // The host needs no more than that.
  Misaligned kv2(data.kv, 2);
  args.at("kv") = kv2.view;
  EXPECT_TRUE(kernel.launchByRole(args).ok());
}

// ---- packages and targets --------------------------------------------------

TEST(KindPackageTest, NoTargetForTheDevice) {
  std::string text = appendKvManifest(AppendKvShape());
  std::string hostTarget = "target host-x86_64 code.host-x86_64";
  text.replace(text.find(hostTarget), hostTarget.size(),
               "target gfx942 code.gfx942");
  Expected<std::vector<uint8_t>> bytes =
      encodePackage(text, {{"code.gfx942", {1, 2, 3}}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  Package package = *parsePackage(bytes->data(), bytes->size());
  Device host = *Device::open("host", {1});
  Expected<Kernel> kernel = host.loadKernel(package);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), ErrorCode::Unsupported);
  EXPECT_EQ(kernel.status().message(),
            "the package has no target for device 'host' (its targets: "
            "gfx942)");
  kernel = host.loadKernel(package, "gfx942");
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().message(),
            "device 'host' cannot run target 'gfx942'");
  kernel = host.loadKernel(package, "sm_90a");
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().message(), "the package has no target 'sm_90a'");
}
