//===- KindValidationTest.cpp - prefill, merge and append_kv kinds --------===//
//
// The kind rules of `kernel prefill`, `kernel merge` and `kernel append_kv`:
// manifest checks, results of the reference kernels against float64, and one
// test per launch-argument check (each breaks one argument of a valid launch,
// expects the exact message and that nothing was launched). A backend that
// runs on host memory but presents itself as a GPU (usesHostMemory() false)
// checks the GPU rules: content checks from LaunchOptions::hostData only,
// 16-byte alignment.
//
//===----------------------------------------------------------------------===//

#include "KindTestUtils.h"
#include "TestUtils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

constexpr float kSentinel = 42.0f;

/// Fills an f32 output with the sentinel, so that tests can see whether a
/// kernel wrote it.
void fillSentinel(HostTensor &t) {
  std::fill_n(t.dataAs<float>(), t.numElements(), kSentinel);
}

void expectUntouched(const HostTensor &t) {
  for (int64_t i = 0; i < t.numElements(); ++i)
    ASSERT_EQ(t.dataAs<float>()[i], kSentinel) << "a kernel ran";
}

/// The tensor arguments of `args`, by role.
std::map<std::string, TensorView>
tensorsOf(const std::map<std::string, ArgValue> &args) {
  std::map<std::string, TensorView> views;
  for (const auto &[role, arg] : args)
    if (arg.isTensor())
      views.emplace(role, arg.tensor());
  return views;
}

/// `args` with its tensors replaced by `views`.
std::map<std::string, ArgValue>
withTensors(std::map<std::string, ArgValue> args,
            const std::map<std::string, TensorView> &views) {
  for (const auto &[role, view] : views)
    args.at(role) = view;
  return args;
}

Status launchError(const Kernel &kernel,
                   const std::map<std::string, ArgValue> &args,
                   const LaunchOptions &options = {}) {
  Status status = kernel.launchByRole(args, options);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument) << status.toString();
  return status;
}

/// The host backend under a GPU's rules: device memory the host cannot
/// read (as far as validation knows), launches still run on the host.
class HostAsGpuBackend : public Backend {
public:
  HostAsGpuBackend() : inner(createHostBackend({2})) {}
  std::string_view getName() const override { return "gpu-like"; }
  bool supportsTarget(std::string_view t) const override {
    return inner->supportsTarget(t);
  }
  bool usesHostMemory() const override { return false; }
  bool isAsynchronous() const override { return false; }
  Expected<std::unique_ptr<Module>>
  loadModule(const std::vector<uint8_t> &code,
             const std::vector<std::string> &entries) override {
    return inner->loadModule(code, entries);
  }
  Expected<std::unique_ptr<DeviceBuffer>> allocate(size_t bytes) override {
    return inner->allocate(bytes);
  }
  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    return inner->copyToHost(dst, src, bytes);
  }
  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    return inner->copyToDevice(dst, src, bytes);
  }
  Status fillBytes(void *dst, uint8_t value, size_t bytes) override {
    return inner->fillBytes(dst, value, bytes);
  }
  Status launch(const Module &module, size_t entry, const LaunchConfig &config,
                const std::vector<const ArgValue *> &args) override {
    return inner->launch(module, entry, config, args);
  }
  Status synchronize(void *stream) override {
    return inner->synchronize(stream);
  }

private:
  std::shared_ptr<Backend> inner;
};

Kernel loadOnGpuLike(const std::string &manifest) {
  Device device(std::make_shared<HostAsGpuBackend>());
  Expected<Kernel> kernel = device.loadKernel(kindPackage(manifest));
  EXPECT_TRUE(kernel.ok()) << kernel.status().toString();
  return kernel.take();
}

void expectNear(const std::vector<float> &actual,
                const std::vector<double> &expected, double tolerance,
                const char *what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_FALSE(std::isnan(actual[i])) << what << " element " << i;
    if (std::isinf(expected[i]))
      ASSERT_EQ(actual[i], expected[i]) << what << " element " << i;
    else
      ASSERT_NEAR(actual[i], expected[i], tolerance)
          << what << " element " << i;
  }
}

} // namespace

// ---- manifests ------------------------------------------------------------

namespace {

struct BadKindManifest {
  const char *name;
  std::string text;
  std::string message;
};

void PrintTo(const BadKindManifest &c, std::ostream *os) { *os << c.name; }

class BadKindManifestTest : public ::testing::TestWithParam<BadKindManifest> {};

std::string edited(std::string text, const std::string &from,
                   const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

const std::string kPrefill = prefillManifest(PrefillShape());
const std::string kMerge = mergeManifest(MergeShape());
const std::string kAppend = appendKvManifest(AppendKvShape());

} // namespace

TEST(KindManifestTest, TheTestManifestsAreValid) {
  for (const std::string &text : {kPrefill, kMerge, kAppend}) {
    Expected<Manifest> m = parseManifest(text);
    EXPECT_TRUE(m.ok()) << m.status().toString();
  }
  PrefillShape dynamic;
  dynamic.dynamicDims = true;
  EXPECT_TRUE(parseManifest(prefillManifest(dynamic)).ok());
  AppendKvShape dynamicPage;
  dynamicPage.pageSize = 0;
  EXPECT_TRUE(parseManifest(appendKvManifest(dynamicPage)).ok());
}

TEST(KindManifestTest, OutputsMayBeF32) {
  EXPECT_TRUE(
      parseManifest(edited(kPrefill, "o memref bf16", "o memref f32")).ok());
  EXPECT_TRUE(
      parseManifest(edited(kMerge, "o memref bf16", "o memref f32")).ok());
}

TEST(KindManifestTest, IndexTensorsMayBeI64) {
  EXPECT_TRUE(parseManifest(edited(kPrefill, "cu_seqlens_k memref i32",
                                   "cu_seqlens_k memref i64"))
                  .ok());
  EXPECT_TRUE(parseManifest(edited(kAppend, "slot_mapping memref i32",
                                   "slot_mapping memref i64"))
                  .ok());
}

TEST_P(BadKindManifestTest, IsRejected) {
  Expected<Manifest> parsed = parseManifest(GetParam().text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), ErrorCode::InvalidManifest);
  EXPECT_EQ(parsed.status().message(), GetParam().message);
  // Loading goes through the same parser: nothing with such a manifest
  // ever reaches a device.
  Expected<std::vector<uint8_t>> bytes = encodePackage(
      GetParam().text, {{"code.host-x86_64", refKindKernelCode()}});
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, BadKindManifestTest,
    ::testing::Values(
        BadKindManifest{"prefill_no_dtype",
                        edited(kPrefill, "dtype bf16\n", ""),
                        "prefill manifest needs a 'dtype' line"},
        BadKindManifest{"prefill_no_heads", edited(kPrefill, "heads 2\n", ""),
                        "prefill manifest needs a 'heads' line"},
        BadKindManifest{"prefill_no_qk_dim",
                        edited(kPrefill, "qk_dim 24\n", ""),
                        "prefill manifest needs a 'qk_dim' line"},
        BadKindManifest{"prefill_no_v_dim", edited(kPrefill, "v_dim 16\n", ""),
                        "prefill manifest needs a 'v_dim' line"},
        BadKindManifest{"prefill_no_causal", edited(kPrefill, "causal 1\n", ""),
                        "prefill manifest needs a 'causal' line"},
        BadKindManifest{"prefill_missing_role",
                        edited(kPrefill, "cu_seqlens_k", "cu_seqlens_kv"),
                        "prefill manifest needs an arg with role "
                        "'cu_seqlens_k'"},
        BadKindManifest{
            "prefill_scale_memref",
            edited(kPrefill, "scale scalar f32", "scale memref f32 1"),
            "manifest line 16: prefill arg 'scale' must be a "
            "scalar"},
        BadKindManifest{
            "prefill_scale_int",
            edited(kPrefill, "scale scalar f32", "scale scalar i32"),
            "manifest line 16: prefill arg 'scale' must have a "
            "floating-point dtype, has i32"},
        BadKindManifest{
            "prefill_v_scalar",
            edited(kPrefill, "v memref bf16 ?,2,16", "v scalar bf16"),
            "manifest line 13: prefill arg 'v' must be a memref"},
        BadKindManifest{"prefill_k_dtype",
                        edited(kPrefill, "k memref bf16", "k memref f16"),
                        "manifest line 12: prefill arg 'k' must have dtype "
                        "bf16, has f16"},
        BadKindManifest{"prefill_o_dtype",
                        edited(kPrefill, "o memref bf16", "o memref f16"),
                        "manifest line 17: prefill arg 'o' must have dtype "
                        "bf16 or f32, has f16"},
        BadKindManifest{"prefill_lse_dtype",
                        edited(kPrefill, "lse memref f32", "lse memref bf16"),
                        "manifest line 18: prefill arg 'lse' must have dtype "
                        "f32, has bf16"},
        BadKindManifest{"prefill_offsets_dtype",
                        edited(kPrefill, "cu_seqlens_q memref i32",
                               "cu_seqlens_q memref f32"),
                        "manifest line 14: prefill arg 'cu_seqlens_q' must "
                        "have dtype i32 or i64, has f32"},
        BadKindManifest{
            "prefill_q_rank",
            edited(kPrefill, "q memref bf16 ?,2,24", "q memref bf16 ?,?,2,24"),
            "manifest line 11: prefill arg 'q' must have rank 3, "
            "has 4"},
        BadKindManifest{
            "prefill_q_heads",
            edited(kPrefill, "q memref bf16 ?,2,24", "q memref bf16 ?,4,24"),
            "manifest line 11: prefill arg 'q' dim 1 is 4, "
            "expected 2 (heads)"},
        BadKindManifest{
            "prefill_k_qk_dim",
            edited(kPrefill, "k memref bf16 ?,2,24", "k memref bf16 ?,2,16"),
            "manifest line 12: prefill arg 'k' dim 2 is 16, "
            "expected 24 (qk_dim)"},
        BadKindManifest{
            "prefill_v_v_dim",
            edited(kPrefill, "v memref bf16 ?,2,16", "v memref bf16 ?,2,24"),
            "manifest line 13: prefill arg 'v' dim 2 is 24, "
            "expected 16 (v_dim)"},
        BadKindManifest{
            "prefill_lse_heads",
            edited(kPrefill, "lse memref f32 2,?", "lse memref f32 4,?"),
            "manifest line 18: prefill arg 'lse' dim 0 is 4, "
            "expected 2 (heads)"},
        BadKindManifest{"merge_no_parts", edited(kMerge, "parts 3\n", ""),
                        "merge manifest needs a 'parts' line"},
        BadKindManifest{"merge_no_v_dim", edited(kMerge, "v_dim 16\n", ""),
                        "merge manifest needs a 'v_dim' line"},
        BadKindManifest{"merge_missing_role",
                        edited(kMerge, "lse_parts", "lse_chunks"),
                        "merge manifest needs an arg with role 'lse_parts'"},
        BadKindManifest{
            "merge_parts_dtype",
            edited(kMerge, "o_parts memref f32", "o_parts memref bf16"),
            "manifest line 9: merge arg 'o_parts' must have "
            "dtype f32, has bf16"},
        BadKindManifest{"merge_parts_rank",
                        edited(kMerge, "o_parts memref f32 3,?,2,16",
                               "o_parts memref f32 ?,2,16"),
                        "manifest line 9: merge arg 'o_parts' must have rank "
                        "4, has 3"},
        BadKindManifest{"merge_parts_count",
                        edited(kMerge, "lse_parts memref f32 3,2,?",
                               "lse_parts memref f32 4,2,?"),
                        "manifest line 10: merge arg 'lse_parts' dim 0 is 4, "
                        "expected 3 (parts)"},
        BadKindManifest{
            "merge_o_v_dim",
            edited(kMerge, "o memref bf16 ?,2,16", "o memref bf16 ?,2,8"),
            "manifest line 11: merge arg 'o' dim 2 is 8, "
            "expected 16 (v_dim)"},
        BadKindManifest{"append_no_page_size",
                        edited(kAppend, "page_size 4\n", ""),
                        "append_kv manifest needs a 'page_size' line"},
        BadKindManifest{"append_no_rope_dim",
                        edited(kAppend, "rope_dim 8\n", ""),
                        "append_kv manifest needs a 'rope_dim' line"},
        BadKindManifest{"append_missing_role",
                        edited(kAppend, "slot_mapping", "slots"),
                        "append_kv manifest needs an arg with role "
                        "'slot_mapping'"},
        BadKindManifest{"append_kv_dtype",
                        edited(kAppend, "kv memref bf16", "kv memref f32"),
                        "manifest line 11: append_kv arg 'kv' must have "
                        "dtype bf16, has f32"},
        BadKindManifest{"append_slots_rank",
                        edited(kAppend, "slot_mapping memref i32 ?",
                               "slot_mapping memref i32 ?,1"),
                        "manifest line 10: append_kv arg 'slot_mapping' must "
                        "have rank 1, has 2"},
        BadKindManifest{"append_row",
                        edited(kAppend, "kv_new memref bf16 ?,32",
                               "kv_new memref bf16 ?,24"),
                        "manifest line 9: append_kv arg 'kv_new' dim 1 is "
                        "24, expected 32 (latent_dim + rope_dim)"},
        BadKindManifest{
            "append_page_size",
            edited(kAppend, "kv memref bf16 ?,4,32", "kv memref bf16 ?,8,32"),
            "manifest line 11: append_kv arg 'kv' dim 1 is 8, "
            "expected 4 (page_size)"},
        BadKindManifest{"append_dynamic_page_size",
                        edited(kAppend, "page_size 4", "page_size 0"),
                        "manifest line 11: append_kv arg 'kv' dim 1 must be "
                        "'?' because page_size is 0 (dynamic)"}),
    [](const ::testing::TestParamInfo<BadKindManifest> &info) {
      return std::string(info.param.name);
    });

// ---- results of the reference kernels through the runtime ---------------

namespace {

struct PrefillCase {
  const char *name;
  DType dtype;
  bool causal;
  int64_t heads;
};

void PrintTo(const PrefillCase &c, std::ostream *os) { *os << c.name; }

class PrefillResultTest : public ::testing::TestWithParam<PrefillCase> {};

} // namespace

TEST_P(PrefillResultTest, MatchesFloat64) {
  PrefillShape shape;
  shape.dtype = GetParam().dtype;
  shape.causal = GetParam().causal;
  shape.heads = GetParam().heads;
  Kernel kernel = loadKindKernel(prefillManifest(shape), 3);
  // A single query, more keys than queries, an empty request, equal
  // lengths, and more queries than keys (the first causal queries see no
  // key: o = 0, lse = -inf).
  PrefillData data =
      makePrefillData(shape, {1, 17, 0, 40, 6}, {1, 30, 5, 40, 3}, 9);
  Status status = kernel.launchByRole(data.byRole());
  ASSERT_TRUE(status.ok()) << status.toString();
  KindReference ref = referencePrefill(shape, data);
  double tolerance = shape.dtype == DType::F32 ? 1e-5 : 1e-2;
  expectNear(toFloats(data.o), ref.o, tolerance, "o");
  expectNear(toFloats(data.lse), ref.lse, 1e-4, "lse");
  int infinite = 0;
  for (double value : ref.lse)
    infinite += std::isinf(value);
  EXPECT_EQ(infinite, shape.causal ? 3 * shape.heads : 0);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, PrefillResultTest,
    ::testing::Values(PrefillCase{"bf16_causal", DType::BF16, true, 2},
                      PrefillCase{"bf16_full", DType::BF16, false, 2},
                      PrefillCase{"f32_causal_h1", DType::F32, true, 1},
                      PrefillCase{"f32_full_h3", DType::F32, false, 3}),
    [](const ::testing::TestParamInfo<PrefillCase> &info) {
      return std::string(info.param.name);
    });

TEST(MergeResultTest, MatchesFloat64WithEmptyParts) {
  for (DType dtype : {DType::BF16, DType::F32}) {
    MergeShape shape;
    shape.dtype = dtype;
    Kernel kernel = loadKindKernel(mergeManifest(shape));
    MergeData data = makeMergeData(shape, 7, 3);
    Status status = kernel.launchByRole(data.byRole());
    ASSERT_TRUE(status.ok()) << status.toString();
    KindReference ref = referenceMerge(shape, data);
    expectNear(toFloats(data.o), ref.o, dtype == DType::F32 ? 1e-5 : 1e-2, "o");
    expectNear(toFloats(data.lse), ref.lse, 1e-5, "lse");
    // Row 1 has only empty parts: o = 0, lse = -inf.
    EXPECT_TRUE(std::isinf(data.lse.dataAs<float>()[1]));
  }
}

TEST(AppendKvResultTest, WritesTheRowsOfTheirSlots) {
  for (int64_t pageSize : {4, 0}) {
    AppendKvShape shape;
    shape.pageSize = pageSize;
    Kernel kernel = loadKindKernel(appendKvManifest(shape));
    // 5 pages of 4 slots; -1 is a padding token.
    AppendKvData data = makeAppendKvData(shape, {0, 7, -1, 19, 12, -1}, 5, 4);
    std::vector<float> expected = referenceAppendKv(data);
    Status status = kernel.launchByRole(data.byRole());
    ASSERT_TRUE(status.ok()) << status.toString();
    EXPECT_EQ(toFloats(data.kv), expected);
  }
}

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
