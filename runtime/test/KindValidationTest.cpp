//===- KindValidationTest.cpp - prefill, merge and append_kv kinds --------===//
//
// The kind rules of `kernel prefill`, `kernel merge` and `kernel append_kv`:
// manifest checks and results of the reference kernels against float64;
// the launch-argument checks in KindArgumentsTest.cpp.
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

namespace {

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
