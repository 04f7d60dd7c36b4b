//===- KindPlanTest.cpp - Target plans checked against their kind ---------===//
//
// A manifest's target blocks (workspaces, launches, grids) must be the plan
// the kernel kind requires for its header and config (runtime/lib/
// KindPlans.h): tampered manifests are refused when the package is read,
// with a message that names the line and the field, and mla-run refuses a
// tampered package with a valid checksum before anything runs.
//
//===----------------------------------------------------------------------===//

#include "KindPlans.h"
#include "KindTestUtils.h"
#include "TestUtils.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

/// `text` with the first `from` replaced by `to`.
std::string edited(std::string text, const std::string &from,
                   const std::string &to) {
  size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return pos == std::string::npos ? text : text.replace(pos, from.size(), to);
}

std::string manifestError(const std::string &text) {
  Expected<Manifest> m = parseManifest(text);
  EXPECT_FALSE(m.ok()) << text;
  if (m.ok())
    return "";
  EXPECT_EQ(m.status().code(), ErrorCode::InvalidManifest);
  return m.status().message();
}

/// The reference decode (heads 4, q_len 1, latent 32 + 8, kv_splits 3,
/// head_group 4): lines 20-23 are its workspaces and launches.
const std::string kDecode = decodeManifest(DecodeShape());

const char *const kK0 = "launch 'mla_decode_k0' (the partial results per "
                        "request, head group and KV split)";
const char *const kK1 = "launch 'mla_decode_k1' (the merge of the splits "
                        "per request, query and head)";

/// A config value out of range (configValue's error).
std::string configError(int line, const std::string &what) {
  return "manifest line " + std::to_string(line) +
         ": decode target 'host-x86_64' " + what;
}

/// A launch plan that is not the runtime's (its checker's error).
std::string decodeError(int line, const std::string &what) {
  return configError(line, what) + plans::kForeignPlanHint;
}

} // namespace

TEST(KindPlanTest, TheTestAndCompiledManifestsFollowTheirPlans) {
  EXPECT_TRUE(parseManifest(kDecode).ok());
  EXPECT_TRUE(parseManifest(prefillManifest(PrefillShape())).ok());
  EXPECT_TRUE(parseManifest(mergeManifest(MergeShape())).ok());
  EXPECT_TRUE(parseManifest(appendKvManifest(AppendKvShape())).ok());
}

// The example: a grid that skips work exited 0 with unwritten
// outputs.
TEST(KindPlanTest, DecodeGridMustCoverTheLaunch) {
  EXPECT_EQ(
      manifestError(edited(kDecode, "grid arg0.0,1,3", "grid arg0.0,0,3")),
      decodeError(22, std::string(kK0) +
                          " grid y is 0, expected 1 (ceil(heads / "
                          "head_group) = ceil(4 / 4))"));
  // A grid larger than the workspaces: writes past them.
  EXPECT_EQ(
      manifestError(edited(kDecode, "grid arg0.0,1,3", "grid arg0.0,1,4")),
      decodeError(22,
                  std::string(kK0) + " grid z is 4, expected 3 (kv_splits)"));
  // Another dim than the batch.
  EXPECT_EQ(
      manifestError(edited(kDecode, "grid arg0.0,1,3", "grid arg1.0,1,3")),
      decodeError(22, std::string(kK0) +
                          " grid x is 'arg1.0' (kv dim 0), expected the batch "
                          "(batch: q dim 0, block_table dim 0, seq_lens dim 0, "
                          "o dim 0 or lse dim 0)"));
  // The merge over (batch, q_len, heads): any dim of the same size will do.
  EXPECT_TRUE(parseManifest(edited(kDecode, "grid arg0.0,arg0.1,arg0.2",
                                   "grid arg6.0,1,arg5.2"))
                  .ok());
  EXPECT_EQ(manifestError(edited(kDecode, "grid arg0.0,arg0.1,arg0.2",
                                 "grid arg0.0,arg0.1,arg0.2/2")),
            decodeError(23, std::string(kK1) +
                                " grid z is 'arg0.2/2' (q dim 2), expected 4 "
                                "(heads)"));
}

TEST(KindPlanTest, DecodeWorkspacesMustHoldEverySplit) {
  EXPECT_EQ(manifestError(edited(kDecode, "workspace 7 f32 arg0.0,arg0.1,4,3,",
                                 "workspace 7 f32 arg0.0,arg0.1,4,2,")),
            decodeError(20, "workspace 7 (o_part [batch, q_len, heads, "
                            "kv_splits, latent_dim]) dim 3 is 2, expected 3 "
                            "(kv_splits)"));
  EXPECT_EQ(manifestError(edited(kDecode, "workspace 8 f32 arg0.0,arg0.1,4,3",
                                 "workspace 8 f32 1,arg0.1,4,3")),
            decodeError(21, "workspace 8 (lse_part [batch, q_len, heads, "
                            "kv_splits]) dim 0 is 1, expected the batch "
                            "(batch: q dim 0, block_table dim 0, seq_lens dim "
                            "0, o dim 0 or lse dim 0)"));
  EXPECT_EQ(
      manifestError(edited(kDecode, "workspace 8 f32", "workspace 8 bf16")),
      decodeError(21, "workspace 8 (lse_part [batch, q_len, heads, "
                      "kv_splits]) has dtype bf16, expected f32"));
  EXPECT_EQ(manifestError(edited(kDecode, "arg0.1,4,3,32\n", "arg0.1,4,96\n")),
            decodeError(20, "workspace 7 (o_part [batch, q_len, heads, "
                            "kv_splits, latent_dim]) has rank 4, expected 5"));
  std::string oneWorkspace =
      edited(edited(kDecode, "workspace 8 f32 arg0.0,arg0.1,4,3\n", ""),
             "args 0,1,2,3,4,7,8", "args 0,1,2,3,4,7");
  EXPECT_EQ(manifestError(edited(oneWorkspace, "args 7,8,5,6", "args 7,5,6")),
            decodeError(19, "has 1 workspaces, expected 2 (o_part [batch, "
                            "q_len, heads, kv_splits, latent_dim], then "
                            "lse_part [batch, q_len, heads, kv_splits])"));
}

TEST(KindPlanTest, DecodeLaunchesPassTheirArguments) {
  EXPECT_EQ(manifestError(edited(kDecode, "args 7,8,5,6", "args 7,8,5")),
            decodeError(23, std::string(kK1) +
                                " does not pass 'lse' (it takes 'o', 'lse', "
                                "workspace 7, workspace 8)"));
  EXPECT_EQ(manifestError(edited(kDecode, "args 7,8,5,6", "args 7,8,5,6,5")),
            decodeError(23, std::string(kK1) +
                                " passes 'o' twice (it takes each of "
                                "'o', 'lse', workspace 7, workspace 8 once)"));
  // o in place of a workspace: the partial results would land in o.
  EXPECT_EQ(
      manifestError(
          edited(kDecode, "args 0,1,2,3,4,7,8", "args 0,1,2,3,4,5,8")),
      decodeError(22, std::string(kK0) +
                          " passes 'o', which it does not take (it takes "
                          "'q', 'kv', 'block_table', 'seq_lens', 'scale', "
                          "workspace 7, workspace 8)"));
  std::string oneLaunch = edited(kDecode,
                                 "launch mla_decode_k1 args 7,8,5,6 grid "
                                 "arg0.0,arg0.1,arg0.2\n",
                                 "");
  EXPECT_EQ(manifestError(oneLaunch),
            decodeError(19, "has 1 launches, expected 2 (the partial results "
                            "per request, head group and KV split, then the "
                            "merge of the splits per request, query and "
                            "head)"));
}

TEST(KindPlanTest, DecodeConfigValues) {
  EXPECT_EQ(manifestError(edited(kDecode, "kv_splits=3", "kv_splits=0")),
            configError(19, "config kv_splits=0 is not an integer in [1, "
                            "2147483647]"));
  EXPECT_EQ(manifestError(edited(kDecode, "head_group=4", "head_group=5")),
            configError(19, "config head_group=5 is not an integer in [1, 4]"));
  // A target's config comes before the manifest's: head_group 2 gives two
  // head groups, the grid's dim 0 (schedule::headGroupGridDim: they vary
  // fastest), the requests dim 1.
  std::string target = edited(kDecode, "target host-x86_64 code.host-x86_64\n",
                              "target host-x86_64 code.host-x86_64\n"
                              "config head_group=2\n");
  EXPECT_EQ(manifestError(target), // one line more
            decodeError(23, std::string(kK0) +
                                " grid x is 'arg0.0' (q dim 0), expected 2 "
                                "(ceil(heads / head_group) = ceil(4 / 2))"));
  EXPECT_TRUE(
      parseManifest(edited(target, "grid arg0.0,1,3", "grid 2,arg0.0,3")).ok());
  // Packages compiled before that order (head groups along y) still load;
  // a grid in neither order does not.
  EXPECT_TRUE(
      parseManifest(edited(target, "grid arg0.0,1,3", "grid arg0.0,2,3")).ok());
  EXPECT_EQ(manifestError(edited(target, "grid arg0.0,1,3", "grid 2,arg0.0,4")),
            decodeError(23, std::string(kK0) +
                                " grid z is 4, expected 3 (kv_splits)"));
}

// Packages written before targets had a config line: the plan's free
// constants are bound by their first use, and the others must agree.
TEST(KindPlanTest, WithoutAConfigTheSizesMustAgree) {
  std::string old = edited(kDecode,
                           "config tile_kv=64 kv_splits=3 "
                           "head_group=4\n",
                           "");
  ASSERT_TRUE(parseManifest(old).ok());
  const int shift = -1; // the config line is gone
  EXPECT_EQ(manifestError(edited(old, "grid arg0.0,1,3", "grid arg0.0,1,2")),
            decodeError(22 + shift, std::string(kK0) +
                                        " grid z is 2, expected 3 (kv_splits, "
                                        "as its first use says)"));
  EXPECT_EQ(manifestError(edited(old, "grid arg0.0,1,3", "grid arg0.0,5,3")),
            decodeError(22 + shift, std::string(kK0) +
                                        " grid y is 5, expected a constant in "
                                        "[1, 4] (ceil(heads / head_group))"));
  std::string prefill = prefillManifest(PrefillShape());
  prefill = edited(prefill, "config tile_q=4 tile_kv=64\n", "");
  EXPECT_TRUE(parseManifest(edited(prefill, "arg0.0/4", "arg0.0/64")).ok());
}

TEST(KindPlanTest, VariantInputsGoToTheFirstDecodeLaunch) {
  std::string sink = edited(kDecode, "arg 6 lse memref f32 ?,1,4\n",
                            "arg 6 lse memref f32 ?,1,4\n"
                            "arg 7 sinks memref f32 4\n");
  sink = edited(edited(sink, "workspace 7", "workspace 8"),
                "workspace 8 f32 "
                "arg0.0,arg0.1,4,3\n",
                "workspace 9 f32 arg0.0,arg0.1,4,3\n");
  sink = edited(sink, "args 0,1,2,3,4,7,8", "args 0,1,2,3,4,8,9");
  sink = edited(sink, "args 7,8,5,6", "args 8,9,5,6");
  EXPECT_EQ(manifestError(sink),
            decodeError(23, "launch 'mla_decode_k0' (the partial results per "
                            "request, head group and KV split) does not pass "
                            "'sinks' (it takes 'q', 'kv', 'block_table', "
                            "'seq_lens', 'scale', 'sinks', workspace 8, "
                            "workspace 9)"));
  EXPECT_TRUE(
      parseManifest(edited(sink, "args 0,1,2,3,4,8,9", "args 7,0,1,2,3,4,8,9"))
          .ok());
}

TEST(KindPlanTest, PrefillMergeAndAppendGrids) {
  std::string prefill = prefillManifest(PrefillShape());
  std::string p = "manifest line 20: prefill target 'host-x86_64' launch "
                  "'mla_ref_prefill_bf16_causal' (the attention per query "
                  "tile, head and request) grid ";
  EXPECT_EQ(manifestError(edited(prefill, "arg0.0/4,", "arg0.0/64,")),
            p +
                "x is 'arg0.0/64' (q dim 0), expected ceil(query rows / "
                "tile_q) = ceil(query rows / 4) (query rows: q dim 0, o dim 0 "
                "or lse dim 1)" +
                plans::kForeignPlanHint);
  EXPECT_EQ(manifestError(edited(prefill, "arg3.0-1\n", "arg3.0\n")),
            p +
                "z is 'arg3.0' (cu_seqlens_q dim 0), expected the requests "
                "(offsets - 1) (offsets: cu_seqlens_q dim 0 or cu_seqlens_k "
                "dim 0)" +
                plans::kForeignPlanHint);
  EXPECT_TRUE(parseManifest(edited(prefill, "arg3.0-1\n", "arg4.0-1\n")).ok());

  std::string merge = mergeManifest(MergeShape());
  EXPECT_NE(
      manifestError(edited(merge, "grid arg0.1,arg0.2,1", "grid arg0.1,1,1"))
          .find("grid y is 1, expected 2 (heads)"),
      std::string::npos);
  std::string append = appendKvManifest(AppendKvShape());
  EXPECT_NE(manifestError(edited(append, "grid arg0.0,1,1", "grid arg0.0,2,1"))
                .find("grid y is 2, expected 1 (one)"),
            std::string::npos);
  EXPECT_NE(manifestError(edited(append, "args 0,1,2", "args 0,1"))
                .find("does not pass 'kv'"),
            std::string::npos);
}

// A tampered package with a valid checksum (built by hand: encodePackage
// would refuse the manifest) is refused by mla-run with one line, before
// anything runs and without writing outputs.
TEST(KindPlanTest, MlaRunRefusesATamperedPackage) {
  TempDir dir;
  std::string package = dir.file("tampered.mlapkg");
  std::vector<uint8_t> bytes = testKernelCode();
  std::string code(bytes.begin(), bytes.end());
  std::string manifest = edited(kDecode, "grid arg0.0,1,3", "grid arg0.0,0,3");
  writeBytes(package, rawPackageBytes({{"manifest", manifest},
                                       {"code.host-x86_64", code}}));
  std::string inputs = dir.file("in"), outputs = dir.file("out");
  std::filesystem::create_directory(inputs);
  ToolResult result =
      runTool(MLA_RUN_PATH, {package, "--inputs", inputs, "--outputs", outputs,
                             "--scale", "0.1"});
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.err,
            "mla-run: error: " + package + ": " +
                decodeError(22, std::string(kK0) +
                                    " grid y is 0, expected 1 (ceil(heads / "
                                    "head_group) = ceil(4 / 4))") +
                "\n");
  EXPECT_FALSE(std::filesystem::exists(outputs));
}
