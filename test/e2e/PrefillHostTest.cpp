//===- PrefillHostTest.cpp - prefill and chunked merge end to end (host) --===//
//
// Each case compiles a prefill package with mla-compile, runs it through the
// runtime's host backend on random ragged batches (never zeros), and compares
// o and lse with a float64 reference. The chunked-prefill case splits every
// request's keys into cached context and the new tokens, runs one prefill
// per chunk and merges them with an `mla-compile --kernel=merge` package.
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
#include <string>
#include <unistd.h>
#include <vector>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

std::string compile(const std::string &name, const std::string &flags) {
  return compileHostPackage(name, flags);
}

Kernel load(const std::string &path) { return loadHostKernel(path); }

const char *dtypeFlag(DType dt) {
  return dt == DType::BF16 ? "bf16" : dt == DType::F16 ? "f16" : "f32";
}

std::string prefillFlags(const PrefillProblem &p) {
  return "--kernel=prefill --heads=" + std::to_string(p.heads) +
         " --qk-dim=" + std::to_string(p.dqk) +
         " --v-dim=" + std::to_string(p.dv) + " --dtype=" + dtypeFlag(p.dtype) +
         (p.causal ? " --causal" : "");
}

/// Outputs of one prefill launch: o in `oType`, lse f32 [H, T], both
/// poisoned with NaN beforehand.
struct PrefillOutputs {
  std::vector<uint8_t> o;
  std::vector<float> lse;
};

PrefillOutputs runPrefill(const Kernel &kernel, PrefillProblem &p,
                          DType oType) {
  const int64_t T = p.tokens(), Tk = p.keyTokens(), B1 = p.cuQ.size();
  PrefillOutputs out;
  out.o.assign(T * p.heads * p.dv * dtypeSize(oType), 0xFF);
  out.lse.assign(p.heads * T, std::numeric_limits<float>::quiet_NaN());
  std::map<std::string, ArgValue> args{
      {"q", TensorView{p.q.bytes.data(), p.dtype, {T, p.heads, p.dqk}}},
      {"k", TensorView{p.k.bytes.data(), p.dtype, {Tk, p.heads, p.dqk}}},
      {"v", TensorView{p.v.bytes.data(), p.dtype, {Tk, p.heads, p.dv}}},
      {"cu_seqlens_q", TensorView{p.cuQ.data(), DType::I32, {B1}}},
      {"cu_seqlens_k", TensorView{p.cuK.data(), DType::I32, {B1}}},
      {"scale", Scalar::f32(p.scale)},
      {"o", TensorView{out.o.data(), oType, {T, p.heads, p.dv}}},
      {"lse", TensorView{out.lse.data(), DType::F32, {p.heads, T}}}};
  Status st = kernel.launchByRole(args);
  EXPECT_TRUE(st.ok()) << st.toString();
  return out;
}

struct Case {
  std::string name;
  int64_t heads, dqk, dv;
  bool causal;
  std::string dtype;
  std::vector<int32_t> lensQ, lensK;
  std::string perfConfig = "";
};

std::ostream &operator<<(std::ostream &os, const Case &c) {
  return os << c.name;
}

DType dtypeOf(const std::string &s) {
  return s == "bf16" ? DType::BF16 : s == "f16" ? DType::F16 : DType::F32;
}

class PrefillHost : public ::testing::TestWithParam<Case> {};

TEST_P(PrefillHost, MatchesFloat64Reference) {
  const Case &c = GetParam();
  if (std::string(MLA_E2E_TARGET) != "host" &&
      c.perfConfig.find("stages=") != std::string::npos)
    GTEST_SKIP() << "pipelined key tiles (stages > 1, and overlap, which "
                    "needs them) do not fit an AMD chip's LDS";
  std::mt19937 rng(std::hash<std::string>()(c.name));
  PrefillProblem p = makePrefill(c.heads, c.dqk, c.dv, c.causal,
                                 dtypeOf(c.dtype), c.lensQ, c.lensK, rng);
  std::string flags = prefillFlags(p);
  if (!c.perfConfig.empty())
    flags += " --perf-config=" + c.perfConfig;
  Kernel kernel = load(compile(c.name, flags));
  PrefillOutputs out = runPrefill(kernel, p, p.dtype);
  PrefillErrors e = comparePrefill(referencePrefill(p), p.dtype, out.o.data(),
                                   out.lse.data());
  const double tol = p.dtype == DType::F32 ? 1e-4 : 2e-2;
  EXPECT_EQ(e.nans, 0) << "NaN or unwritten outputs";
  EXPECT_EQ(e.wrongEmpty, 0) << "queries without keys must get lse = -inf";
  EXPECT_LE(e.relO, tol) << "relative error of o";
  EXPECT_LE(e.relLse, tol) << "relative error of lse";
  std::printf("[ %s ] rel. error o %.2e, lse %.2e\n", c.name.c_str(), e.relO,
              e.relLse);
}

const Case kCases[] = {
    // DeepSeek 192/128, the ragged lengths 1, 17, 300, 1000.
    {"ds_h16_causal_bf16",
     16,
     192,
     128,
     true,
     "bf16",
     {1, 17, 300, 1000},
     {1, 17, 300, 1000}},
    {"ds_h16_full_f32", 16, 192, 128, false, "f32", {17, 1, 300}, {17, 1, 300}},
    {"ds_h1_causal_f32",
     1,
     192,
     128,
     true,
     "f32",
     {1, 17, 300, 1000},
     {1, 17, 300, 1000}},
    {"ds_h1_full_bf16",
     1,
     192,
     128,
     false,
     "bf16",
     {1000, 17, 1, 300},
     {1000, 17, 1, 300}},
    {"ds_h128_causal_bf16",
     128,
     192,
     128,
     true,
     "bf16",
     {1, 17, 70},
     {1, 17, 70}},
    {"ds_h128_full_f32", 128, 192, 128, false, "f32", {17, 1}, {17, 1}},
    // More keys than queries (chunked prefill: context first), and fewer
    // (causal: the first queries see no key -> o = 0, lse = -inf).
    {"ds_h16_causal_morekeys_bf16",
     16,
     192,
     128,
     true,
     "bf16",
     {1, 17, 100},
     {30, 300, 101}},
    {"ds_h16_causal_fewerkeys_f32",
     16,
     192,
     128,
     true,
     "f32",
     {40, 17},
     {5, 0}},
    {"ds_h16_full_morekeys_f16", 16, 192, 128, false, "f16", {3, 60}, {70, 61}},
    // Empty requests in the batch.
    {"ds_h16_causal_empty_bf16",
     16,
     192,
     128,
     true,
     "bf16",
     {0, 33, 0, 2},
     {0, 33, 5, 2}},
    // Other dims (qk = v, small dims).
    {"d64_h4_causal_f32", 4, 64, 64, true, "f32", {65, 1, 129}, {65, 1, 129}},
    {"d32_16_h2_full_bf16", 2, 32, 16, false, "bf16", {31, 7}, {45, 7}},
    // Pipelined key loops (stages 2 and 3: copies of the next tiles while
    // one is computed); lengths that end mid-tile and in the first tile.
    {"ds_h16_causal_stages2_bf16",
     16,
     192,
     128,
     true,
     "bf16",
     {1, 17, 300},
     {1, 17, 300},
     "tile_q=64,tile_kv=64,stages=2"},
    {"ds_h4_full_stages3_f32",
     4,
     192,
     128,
     false,
     "f32",
     {40, 1, 129},
     {100, 5, 129},
     "tile_q=32,tile_kv=16,stages=3"},
    // The overlapped step's key loop (overlap=1: values copied one tile
    // behind the keys), which the host runs in order: the lagged copies
    // must still put each tile's values in place for its step; lengths
    // that end mid-tile, in the first tile, with no key (the loop runs no
    // iteration), and stages 3.
    {"ds_h16_causal_overlap_bf16",
     16,
     192,
     128,
     true,
     "bf16",
     {1, 17, 300, 130},
     {1, 17, 300, 200},
     "tile_q=64,tile_kv=64,stages=2,overlap=1"},
    {"ds_h16_causal_fewerkeys_overlap_f32",
     16,
     192,
     128,
     true,
     "f32",
     {40, 17},
     {5, 0},
     "tile_q=32,tile_kv=16,stages=2,overlap=1"},
    {"ds_h4_full_overlap_stages3_f32",
     4,
     192,
     128,
     false,
     "f32",
     {40, 1, 129},
     {100, 5, 129},
     "tile_q=32,tile_kv=16,stages=3,overlap=1"},
};

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Matrix, PrefillHost, ::testing::ValuesIn(kCases),
                         caseName);

/// Chunked prefill: every request has `ctx` cached context tokens and `lq`
/// new ones. Chunk 1 attends the new queries to the context (no mask);
/// chunk 2 to the new tokens themselves (causal); the merge must equal one
/// causal prefill over context + new keys.
void chunkedPrefill(DType dt, int64_t heads, const std::vector<int32_t> &ctx,
                    const std::vector<int32_t> &lq, const std::string &name) {
  std::mt19937 rng(std::hash<std::string>()(name));
  std::vector<int32_t> full(ctx.size());
  for (size_t b = 0; b < ctx.size(); ++b)
    full[b] = ctx[b] + lq[b];
  PrefillProblem whole =
      makePrefill(heads, 192, 128, /*causal=*/true, dt, lq, full, rng);
  PrefillProblem context = keyChunk(whole, ctx, lq, /*newPart=*/false);
  PrefillProblem fresh = keyChunk(whole, ctx, lq, /*newPart=*/true);
  Kernel full1 =
      load(compile(name + "_ctx", prefillFlags(context) + " --o-dtype=f32"));
  Kernel causal2 =
      load(compile(name + "_new", prefillFlags(fresh) + " --o-dtype=f32"));
  // Partial results in f32, stacked [2, T, H, 128] and [2, H, T].
  PrefillOutputs a = runPrefill(full1, context, DType::F32);
  PrefillOutputs b = runPrefill(causal2, fresh, DType::F32);
  const int64_t T = whole.tokens();
  std::vector<uint8_t> oParts(a.o);
  oParts.insert(oParts.end(), b.o.begin(), b.o.end());
  std::vector<float> lseParts(a.lse);
  lseParts.insert(lseParts.end(), b.lse.begin(), b.lse.end());

  Kernel merge =
      load(compile(name + "_merge",
                   "--kernel=merge --parts=2 --heads=" + std::to_string(heads) +
                       " --v-dim=128 --dtype=" + dtypeFlag(dt)));
  std::vector<uint8_t> o(T * heads * 128 * dtypeSize(dt), 0xFF);
  std::vector<float> lse(heads * T, std::numeric_limits<float>::quiet_NaN());
  std::map<std::string, ArgValue> args{
      {"o_parts", TensorView{oParts.data(), DType::F32, {2, T, heads, 128}}},
      {"lse_parts", TensorView{lseParts.data(), DType::F32, {2, heads, T}}},
      {"o", TensorView{o.data(), dt, {T, heads, 128}}},
      {"lse", TensorView{lse.data(), DType::F32, {heads, T}}}};
  Status st = merge.launchByRole(args);
  ASSERT_TRUE(st.ok()) << st.toString();
  PrefillErrors e =
      comparePrefill(referencePrefill(whole), dt, o.data(), lse.data());
  const double tol = dt == DType::F32 ? 1e-4 : 2e-2;
  EXPECT_EQ(e.nans, 0);
  EXPECT_EQ(e.wrongEmpty, 0);
  EXPECT_LE(e.relO, tol);
  EXPECT_LE(e.relLse, tol);
  std::printf("[ %s ] rel. error o %.2e, lse %.2e\n", name.c_str(), e.relO,
              e.relLse);
}

TEST(ChunkedPrefillHost, TwoChunksMergedMatchOnePrefillF32) {
  // Includes a request without context (its first chunk is empty: lse
  // -inf everywhere, merged without NaN) and one with one new token.
  chunkedPrefill(DType::F32, 16, {100, 0, 37}, {17, 20, 1}, "chunked_f32");
}

TEST(ChunkedPrefillHost, TwoChunksMergedMatchOnePrefillBF16) {
  chunkedPrefill(DType::BF16, 4, {300, 5}, {60, 1}, "chunked_bf16");
}

} // namespace
