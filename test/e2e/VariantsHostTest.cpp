//===- VariantsHostTest.cpp - attention variants written as IR (host) -----===//
//
// Compiles the tutorial's variant kernels (test/e2e/variants/*.mlir: softcap,
// sliding window, ALiBi, attention sink; prefill and decode) with
// mla-compile, runs them through the runtime's host backend on random data
// and compares o and lse with a float64 reference that applies the same
// variant.
//
//===----------------------------------------------------------------------===//
#include "HostPackages.h"
#include "PrefillReference.h"
#include "mla/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

constexpr int64_t kHeads = 16;

/// A masked example (sliding_window) runs stages = 1: more is an error at
/// compile time (test/tools/mla-compile-mask-stages.test).
bool maskedStages(const std::string &name, int64_t stages) {
  return name == "sliding_window" && stages > 1;
}
constexpr const char *kMaskedStages =
    "a masked variant's key loop is not pipelined: stages > 1 is refused "
    "at compile time (test/tools/mla-compile-mask-stages.test)";

/// The example `file` compiled for the host with `stages` key tiles in
/// flight.
Kernel compileAndLoad(const std::string &file, int64_t stages) {
  return loadHostKernel(compileHostPackage(
      file + "_stages" + std::to_string(stages),
      std::string(MLA_VARIANTS_DIR) + "/" + file +
          ".mlir --perf-config=stages=" + std::to_string(stages)));
}

VariantRef variantFor(const std::string &name,
                      const std::vector<float> &sinks) {
  return exampleVariant(name, kHeads, sinks);
}

std::vector<float> randomSinks(std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 3.0f);
  std::vector<float> sinks(kHeads);
  for (float &s : sinks)
    s = dist(rng);
  return sinks;
}

void expectClose(const PrefillErrors &e, const std::string &what) {
  EXPECT_EQ(e.nans, 0) << what << ": NaN or unwritten outputs";
  EXPECT_EQ(e.wrongEmpty, 0) << what << ": rows without keys need lse -inf";
  EXPECT_LE(e.relO, 2e-2) << what << ": relative error of o";
  EXPECT_LE(e.relLse, 2e-2) << what << ": relative error of lse";
  std::printf("[ %s ] rel. error o %.2e, lse %.2e\n", what.c_str(), e.relO,
              e.relLse);
}

/// (example name, pipeline stages).
class Variants
    : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(Variants, PrefillMatchesFloat64Reference) {
  const auto [name, stages] = GetParam();
  if (maskedStages(name, stages))
    GTEST_SKIP() << kMaskedStages;
  if (std::string(MLA_E2E_TARGET) != "host" && stages > 1)
    GTEST_SKIP() << "pipelined prefill key tiles (stages > 1) do not fit an "
                    "AMD chip's LDS";
  std::mt19937 rng(std::hash<std::string>()(name));
  // Ragged, more keys than queries (positions shift by Lk - Lq), lengths
  // past the 128-key window, a one-token request.
  PrefillProblem p = makePrefill(kHeads, 192, 128, /*causal=*/true, DType::BF16,
                                 {1, 17, 200}, {1, 40, 350}, rng);
  std::vector<float> sinks = randomSinks(rng);
  // Softcap: scores of magnitude ~30 and more, where the cap bends them.
  if (name == "softcap")
    p.scale = 2.0f;
  Kernel kernel = compileAndLoad(name, stages);
  const int64_t T = p.tokens(), Tk = p.keyTokens(), B1 = p.cuQ.size();
  std::vector<uint8_t> o(T * kHeads * 128 * 2, 0xFF);
  std::vector<float> lse(kHeads * T, std::numeric_limits<float>::quiet_NaN());
  std::map<std::string, ArgValue> args{
      {"q", TensorView{p.q.bytes.data(), DType::BF16, {T, kHeads, 192}}},
      {"k", TensorView{p.k.bytes.data(), DType::BF16, {Tk, kHeads, 192}}},
      {"v", TensorView{p.v.bytes.data(), DType::BF16, {Tk, kHeads, 128}}},
      {"cu_seqlens_q", TensorView{p.cuQ.data(), DType::I32, {B1}}},
      {"cu_seqlens_k", TensorView{p.cuK.data(), DType::I32, {B1}}},
      {"scale", Scalar::f32(p.scale)},
      {"o", TensorView{o.data(), DType::BF16, {T, kHeads, 128}}},
      {"lse", TensorView{lse.data(), DType::F32, {kHeads, T}}}};
  if (name == "sink")
    args.emplace("sinks", TensorView{sinks.data(), DType::F32, {kHeads}});
  Status st = kernel.launchByRole(args);
  ASSERT_TRUE(st.ok()) << st.toString();
  expectClose(comparePrefill(referencePrefill(p, variantFor(name, sinks)),
                             DType::BF16, o.data(), lse.data()),
              "prefill " + name);
}

/// The fixed decode arguments of `p` (Sq 1) by role, writing
/// `o` and `lse` (sized here, poisoned: unwritten outputs show) and reading
/// `lens` (a copy of p.lens: the kernel's input must outlive the launch).
std::map<std::string, ArgValue> decodeArgs(DecodeProblem &p,
                                           std::vector<int32_t> &lens,
                                           std::vector<uint8_t> &o,
                                           std::vector<float> &lse) {
  const int64_t B = p.batch(), D = p.d, Dv = p.dv, P = p.page;
  lens = p.lens;
  o.assign(B * kHeads * Dv * 2, 0xFF);
  lse.assign(B * kHeads, std::numeric_limits<float>::quiet_NaN());
  return {
      {"q", TensorView{p.q.bytes.data(), DType::BF16, {B, 1, kHeads, D}}},
      {"kv", TensorView{p.kv.bytes.data(), DType::BF16, {p.pages, P, D}}},
      {"block_table", TensorView{p.table.data(), DType::I32, {B, p.maxPages}}},
      {"seq_lens", TensorView{lens.data(), DType::I32, {B}}},
      {"scale", Scalar::f32(p.scale)},
      {"o", TensorView{o.data(), DType::BF16, {B, 1, kHeads, Dv}}},
      {"lse", TensorView{lse.data(), DType::F32, {B, 1, kHeads}}}};
}

TEST_P(Variants, DecodeMatchesFloat64Reference) {
  const auto [name, stages] = GetParam();
  if (maskedStages(name, stages))
    GTEST_SKIP() << kMaskedStages;
  if (std::string(MLA_E2E_TARGET) != "host" && stages > 1)
    GTEST_SKIP() << "pipelined key tiles (stages > 1) do not fit an AMD "
                    "chip's LDS";
  std::mt19937 rng(std::hash<std::string>()(name) + 1);
  const int64_t D = 576, Dv = 512, P = 64;
  DecodeProblem p =
      makeDecode(kHeads, D, Dv, P, DType::BF16, {300, 1, 129, 0}, rng);
  std::vector<float> sinks = randomSinks(rng);
  if (name == "softcap")
    p.scale = 2.0f;
  Kernel kernel = compileAndLoad("decode_" + name, stages);
  std::vector<uint8_t> o;
  std::vector<float> lse;
  std::vector<int32_t> lens;
  std::map<std::string, ArgValue> args = decodeArgs(p, lens, o, lse);
  if (name == "sink")
    args.emplace("sinks", TensorView{sinks.data(), DType::F32, {kHeads}});
  Status st = kernel.launchByRole(args);
  ASSERT_TRUE(st.ok()) << st.toString();
  PrefillResult ref = referenceDecode(p, variantFor(name, sinks));
  expectClose(comparePrefill(ref, DType::BF16, o.data(), lse.data()),
              "decode " + name);
}

/// A region constant given as a rank-0 input (decode_softcap_input.mlir:
/// the soft-capping bound read from `cap`, a TensorView with no dims): two
/// values of it, each against its own float64 reference.
TEST(VariantsScalarInput, DecodeCapFromARankZeroInput) {
  std::mt19937 rng(7);
  const int64_t D = 576, Dv = 512, P = 64;
  DecodeProblem p =
      makeDecode(kHeads, D, Dv, P, DType::BF16, {300, 1, 129, 0}, rng);
  p.scale = 2.0f; // scores of tens: the cap bites
  Kernel kernel = compileAndLoad("decode_softcap_input", 1);
  std::vector<uint8_t> o;
  std::vector<float> lse;
  std::vector<int32_t> lens;
  for (float cap : {30.0f, 7.5f}) {
    std::map<std::string, ArgValue> args = decodeArgs(p, lens, o, lse);
    args.emplace("cap", TensorView{&cap, DType::F32, {}});
    Status st = kernel.launchByRole(args);
    ASSERT_TRUE(st.ok()) << st.toString();
    PrefillResult ref = referenceDecode(p, softcapVariant(cap));
    PrefillErrors e = comparePrefill(ref, DType::BF16, o.data(), lse.data());
    expectClose(e, "decode cap " + std::to_string(cap));
    // The other cap's reference is far: the kernel read this one.
    PrefillResult other =
        referenceDecode(p, softcapVariant(cap == 30.0f ? 7.5 : 30.0));
    EXPECT_GT(comparePrefill(other, DType::BF16, o.data(), lse.data()).relO,
              10 * e.relO + 1e-3);
  }
  // One value of rank 1 where rank 0 is declared: an error naming `cap`.
  float one = 30.0f;
  std::map<std::string, ArgValue> args = decodeArgs(p, lens, o, lse);
  args.emplace("cap", TensorView{&one, DType::F32, {1}});
  Status st = kernel.launchByRole(args);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cap: expected rank 0, got 1"), std::string::npos)
      << st.message();
}

/// A mask that hides every key from the first queries of each request (and
/// a score region on top): those rows must come out as o = 0, lse = -inf,
/// never NaN; the others match the reference.
TEST(VariantsFullyMasked, RowsWithoutVisibleKeysAreZeroAndMinusInf) {
  std::string ir = e2eTempDir() + "/masked_rows.mlir";
  FILE *f = std::fopen(ir.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(
      R"(func.func @masked(%q: memref<?x2x32xf32>, %k: memref<?x2x32xf32>, %v: memref<?x2x16xf32>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %scale: f32, %o: memref<?x2x16xf32>, %lse: memref<2x?xf32>) {
  mla.prefill %q, %k, %v, %cuq, %cuk, %scale, %o, %lse {causal} : memref<?x2x32xf32>, memref<?x2x32xf32>, memref<?x2x16xf32>, memref<?xi32>, memref<?xi32>, f32, memref<?x2x16xf32>, memref<2x?xf32> score {
  ^bb0(%s: f32, %b: index, %h: index, %qp: index, %kp: index):
    %two = arith.constant 2.0 : f32
    %r = arith.mulf %s, %two : f32
    mla.yield %r : f32
  } mask {
  ^bb0(%b: index, %h: index, %qp: index, %kp: index):
    %c5 = arith.constant 5 : index
    %in = arith.cmpi sge, %qp, %c5 : index
    mla.yield %in : i1
  }
  return
}
)",
      f);
  std::fclose(f);
  Kernel kernel = loadHostKernel(compileHostPackage("masked_rows", ir));

  std::mt19937 rng(7);
  PrefillProblem p = makePrefill(2, 32, 16, /*causal=*/true, DType::F32,
                                 {3, 40, 100}, {3, 40, 100}, rng);
  const int64_t T = p.tokens(), B1 = p.cuQ.size();
  std::vector<uint8_t> o(T * 2 * 16 * 4, 0xFF);
  std::vector<float> lse(2 * T, std::numeric_limits<float>::quiet_NaN());
  Status st = kernel.launchByRole(
      {{"q", TensorView{p.q.bytes.data(), DType::F32, {T, 2, 32}}},
       {"k", TensorView{p.k.bytes.data(), DType::F32, {T, 2, 32}}},
       {"v", TensorView{p.v.bytes.data(), DType::F32, {T, 2, 16}}},
       {"cu_seqlens_q", TensorView{p.cuQ.data(), DType::I32, {B1}}},
       {"cu_seqlens_k", TensorView{p.cuK.data(), DType::I32, {B1}}},
       {"scale", Scalar::f32(p.scale)},
       {"o", TensorView{o.data(), DType::F32, {T, 2, 16}}},
       {"lse", TensorView{lse.data(), DType::F32, {2, T}}}});
  ASSERT_TRUE(st.ok()) << st.toString();
  VariantRef variant;
  variant.score = [](double s, int64_t, int64_t, int64_t, int64_t) {
    return 2.0 * s;
  };
  variant.mask = [](int64_t, int64_t, int64_t qpos, int64_t) {
    return qpos >= 5;
  };
  PrefillResult ref = referencePrefill(p, variant);
  int64_t emptyRows = 0;
  for (float l : ref.lse)
    emptyRows += std::isinf(l);
  EXPECT_EQ(emptyRows, 2 * (3 + 5 + 5)) << "rows the mask empties";
  PrefillErrors e = comparePrefill(ref, DType::F32, o.data(), lse.data());
  EXPECT_EQ(e.nans, 0);
  EXPECT_EQ(e.wrongEmpty, 0);
  EXPECT_LE(e.relO, 1e-4);
  EXPECT_LE(e.relLse, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Examples, Variants,
    ::testing::Combine(::testing::Values("softcap", "sliding_window", "alibi",
                                         "sink"),
                       ::testing::Values(int64_t{1}, int64_t{2})),
    [](const ::testing::TestParamInfo<Variants::ParamType> &i) {
      return std::get<0>(i.param) + "_stages" +
             std::to_string(std::get<1>(i.param));
    });

} // namespace
