//===- ManifestTest.cpp - Manifest grammar and errors ---------------------===//

#include "mla/runtime/Manifest.h"
#include "ManifestExamples.h"

#include <gtest/gtest.h>

using namespace mla::rt;
using namespace mla::rt::test;

TEST(ManifestTest, ParsesTheDecodeExample) {
  Expected<Manifest> parsed = parseManifest(kExample);
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  const Manifest &m = *parsed;
  EXPECT_EQ(m.kernel, "decode");
  EXPECT_EQ(m.function, "decode");
  EXPECT_EQ(m.dtype, DType::BF16);
  EXPECT_EQ(m.heads, 16);
  EXPECT_EQ(m.qLen, 1);
  EXPECT_EQ(m.latentDim, 512);
  EXPECT_EQ(m.ropeDim, 64);
  EXPECT_EQ(m.pageSize, 64);
  EXPECT_EQ(m.config.at("kv_splits"), "4");
  ASSERT_EQ(m.args.size(), 7u);
  EXPECT_EQ(m.args[2].role, "block_table");
  EXPECT_EQ(m.args[2].dtype, DType::I32);
  EXPECT_EQ(m.args[2].dims, (std::vector<int64_t>{kDynamicDim, kDynamicDim}));
  EXPECT_EQ(m.args[0].dims, (std::vector<int64_t>{kDynamicDim, 1, 16, 576}));
  EXPECT_EQ(m.args[4].kind, ArgKind::Scalar);
  EXPECT_TRUE(m.args[4].dims.empty());
  EXPECT_EQ(m.findArg("lse"), &m.args[6]);
  EXPECT_EQ(m.findArg("bias"), nullptr);

  ASSERT_EQ(m.targets.size(), 1u);
  const TargetSpec &t = m.targets[0];
  EXPECT_EQ(t.name, "host-x86_64");
  EXPECT_EQ(t.section, "code.host-x86_64");
  ASSERT_EQ(t.workspaces.size(), 2u);
  EXPECT_EQ(t.workspaces[0].index, 7);
  EXPECT_EQ(t.workspaces[0].dims[0].argIndex, 0);
  EXPECT_EQ(t.workspaces[0].dims[0].dim, 0);
  EXPECT_TRUE(t.workspaces[0].dims[4].isConstant());
  EXPECT_EQ(t.workspaces[0].dims[4].constant, 512);
  ASSERT_EQ(t.launches.size(), 2u);
  EXPECT_EQ(t.launches[0].entry, "mla_decode_k0");
  EXPECT_EQ(t.launches[0].args, (std::vector<int>{0, 1, 2, 3, 4, 7, 8}));
  EXPECT_EQ(t.launches[1].grid[2].constant, 16);
  EXPECT_EQ(m.findTarget("host-x86_64"), &t);
}

TEST(ManifestTest, BlockAndSharedDefaultToOneThreadAndNoSharedMemory) {
  Expected<Manifest> parsed = parseManifest(kExample);
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  for (const LaunchSpec &launch : parsed->targets[0].launches) {
    EXPECT_EQ(launch.block, (std::array<int64_t, 3>{1, 1, 1}));
    EXPECT_EQ(launch.sharedBytes, 0);
  }
}

TEST(ManifestTest, GpuLaunchesWithBlockAndShared) {
  Expected<Manifest> parsed = parseManifest(gpuLaunchesText());
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  const TargetSpec &t = parsed->targets[0];
  EXPECT_EQ(t.name, "sm_90a");
  EXPECT_EQ(t.section, "code.sm_90a");
  EXPECT_EQ(t.launches[0].block, (std::array<int64_t, 3>{128, 2, 1}));
  EXPECT_EQ(t.launches[0].sharedBytes, 98304);
  EXPECT_EQ(t.launches[1].block, (std::array<int64_t, 3>{64, 1, 1}));
  EXPECT_EQ(t.launches[1].sharedBytes, 0);
  const TargetSpec &sm80 = parsed->targets[1];
  EXPECT_EQ(sm80.launches[0].block, (std::array<int64_t, 3>{1, 1, 1}));
  EXPECT_EQ(sm80.launches[0].sharedBytes, 0);
  EXPECT_EQ(parsed->findTarget("sm_80"), &sm80);
}

TEST(ManifestTest, MaxBytesLinesAnywhereInsideATarget) {
  // Before the workspace it limits, between launches and after them.
  Expected<Manifest> parsed = parseManifest(maxBytesAnywhereText());
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  const TargetSpec &t = parsed->targets[0];
  ASSERT_EQ(t.maxBytes.size(), 3u);
  EXPECT_EQ(t.maxBytes[0].index, 8);
  EXPECT_EQ(t.maxBytes[0].bytes, 4294967039);
  EXPECT_EQ(t.maxBytes[0].line, 19);
  EXPECT_EQ(t.maxBytes[1].index, 1);
  EXPECT_EQ(t.maxBytes[1].bytes, 4294893567);
  EXPECT_EQ(t.maxBytes[2].bytes, 0);
  EXPECT_EQ(t.findMaxBytes(1), &t.maxBytes[1]);
  EXPECT_EQ(t.findMaxBytes(2), nullptr);
  EXPECT_TRUE(parseManifest(kExample)->targets[0].maxBytes.empty());
}

TEST(ManifestTest, CommentsBlankLinesAndTabs) {
  Expected<Manifest> parsed = parseManifest(commentsText());
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(parsed->kernel, "decode");
}

TEST(ManifestTest, DynamicPageSize) {
  Expected<Manifest> parsed = parseManifest(dynamicPageSizeText());
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(parsed->pageSize, 0);
  EXPECT_EQ(parsed->args[1].dims[1], kDynamicDim);
}

TEST(ManifestTest, OtherKindsAreRoleAgnostic) {
  Expected<Manifest> parsed = parseManifest(kMergeStatesText);
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(parsed->kernel, "merge_states");
  EXPECT_EQ(parsed->heads, -1);
  EXPECT_FALSE(parsed->dtype.has_value());
  ASSERT_EQ(parsed->targets.size(), 2u);
  EXPECT_EQ(parsed->targets[1].workspaces[0].index, 3);
}

TEST(ManifestTest, SizeExpressionsWithOffsetAndCeilDivision) {
  Expected<Manifest> parsed = parseManifest(kSizeExpressionsText);
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(parsed->qkDim, 192);
  EXPECT_EQ(parsed->vDim, 128);
  EXPECT_EQ(parsed->causal, 1);
  EXPECT_EQ(parsed->parts, 3);
  const auto &l0 = parsed->targets[0].launches[0].grid;
  EXPECT_EQ(l0[0].argIndex, 0);
  EXPECT_EQ(l0[0].divisor, 64);
  EXPECT_EQ(l0[0].addend, 0);
  EXPECT_EQ(l0[2].argIndex, 1);
  EXPECT_EQ(l0[2].addend, -1);
  EXPECT_EQ(l0[2].divisor, 1);
  const auto &l1 = parsed->targets[0].launches[1].grid;
  EXPECT_EQ(l1[0].addend, 3);
  EXPECT_EQ(l1[0].divisor, 4);
  for (const char *bad : {"arg0.0/0", "arg0.0/x", "arg0.0+/2", "arg0.0-x"}) {
    std::string text = R"(mla-manifest 1
kernel custom
function prefill
arg 0 q memref bf16 ?,16,192
target host-x86_64 code.host-x86_64
launch k0 args 0 grid )" +
                       std::string(bad) + R"(,1,1
end-target
)";
    Expected<Manifest> rejected = parseManifest(text);
    ASSERT_FALSE(rejected.ok()) << bad;
    EXPECT_EQ(rejected.status().message(),
              "manifest line 6: size '" + std::string(bad) +
                  "' is neither a non-negative integer nor "
                  "'argI.D[+C|-C][/K]' (K > 0)");
  }
  EXPECT_FALSE(parseManifest(R"(mla-manifest 1
kernel custom
function prefill
causal 2
arg 0 q memref bf16 ?
target host-x86_64 code.host-x86_64
launch k0 args 0 grid 1,1,1
end-target
)")
                   .ok());
}

namespace {
struct BadManifest {
  const char *name;
  std::string text;
  std::string message;
};

void PrintTo(const BadManifest &c, std::ostream *os) { *os << c.name; }

class BadManifestTest : public ::testing::TestWithParam<BadManifest> {};
} // namespace

TEST_P(BadManifestTest, IsRejectedWithItsLine) {
  Expected<Manifest> parsed = parseManifest(GetParam().text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), ErrorCode::InvalidManifest);
  EXPECT_EQ(parsed.status().message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, BadManifestTest,
    ::testing::Values(
        BadManifest{"empty", "# nothing\n",
                    "manifest is empty (expected 'mla-manifest 1' first)"},
        BadManifest{"no_version_line", edited("mla-manifest 1\n", ""),
                    "manifest line 1: expected 'mla-manifest 1' first, got "
                    "'kernel'"},
        BadManifest{"version_2", edited("mla-manifest 1", "mla-manifest 2"),
                    "manifest line 1: manifest version 2 is not supported "
                    "(this runtime reads 1)"},
        BadManifest{"duplicate_version",
                    edited("kernel decode", "mla-manifest 1"),
                    "manifest line 2: duplicate 'mla-manifest' line"},
        BadManifest{"unknown_key", edited("heads 16", "heads 16\nflavor x"),
                    "manifest line 6: unknown key 'flavor'"},
        BadManifest{"duplicate_key", edited("q_len 1", "heads 16"),
                    "manifest line 6: duplicate 'heads' (first on line 5)"},
        BadManifest{"missing_value", edited("heads 16", "heads"),
                    "manifest line 5: expected 'heads VALUE', got 1 tokens"},
        BadManifest{"bad_integer", edited("heads 16", "heads sixteen"),
                    "manifest line 5: 'heads' expects a non-negative integer, "
                    "got 'sixteen'"},
        BadManifest{"zero_heads", edited("heads 16", "heads 0"),
                    "manifest line 5: 'heads' must be positive"},
        BadManifest{"bad_dtype", edited("dtype bf16", "dtype bf17"),
                    "manifest line 4: unknown dtype 'bf17' (expected bf16, "
                    "f16, f32, i32 or i64)"},
        BadManifest{"bad_kernel_name", edited("kernel decode", "kernel 9x"),
                    "manifest line 2: 'kernel' must be an identifier, got "
                    "'9x'"},
        BadManifest{"bad_config", edited("tile_kv=64", "tile_kv"),
                    "manifest line 10: config entry 'tile_kv' is not "
                    "KEY=VALUE"},
        BadManifest{"arg_out_of_order", edited("arg 2 block", "arg 3 block"),
                    "manifest line 13: arg index '3' is out of order, "
                    "expected 2"},
        BadManifest{"arg_bad_kind",
                    edited("arg 3 seq_lens memref", "arg 3 seq_lens tensor"),
                    "manifest line 14: expected 'arg INDEX ROLE memref DTYPE "
                    "DIMS' or 'arg INDEX ROLE scalar DTYPE'"},
        BadManifest{"arg_extra_token", edited("scalar f32", "scalar f32 1"),
                    "manifest line 15: expected 'arg INDEX ROLE scalar "
                    "DTYPE', got 6 tokens"},
        BadManifest{"arg_bad_dim", edited("?,1,16,576", "?,1,x,576"),
                    "manifest line 11: dim 'x' in '?,1,x,576' is neither a "
                    "non-negative integer nor '?'"},
        BadManifest{"arg_empty_dim", edited("?,1,16,576", "?,1,,576"),
                    "manifest line 11: dim '' in '?,1,,576' is neither a "
                    "non-negative integer nor '?'"},
        BadManifest{"arg_bad_role", edited("arg 6 lse", "arg 6 l-se"),
                    "manifest line 17: arg role 'l-se' is not an identifier"},
        BadManifest{"compiler_without_text",
                    edited("function decode\n", "function decode\ncompiler\n"),
                    "manifest line 4: expected 'compiler TEXT ...'"},
        BadManifest{"compiler_twice",
                    edited("function decode\n",
                           "function decode\ncompiler a 1\ncompiler b\n"),
                    "manifest line 5: duplicate 'compiler' (first on line 4)"},
        BadManifest{"arg_duplicate_role", edited("arg 6 lse", "arg 6 o"),
                    "manifest line 17: duplicate arg role 'o' (first on line "
                    "16)"},
        BadManifest{"arg_after_target",
                    edited("end-target\n", "end-target\narg 7 x scalar f32\n"),
                    "manifest line 24: 'arg' lines must come before the first "
                    "'target'"},
        BadManifest{"workspace_outside_target",
                    edited("target host", "workspace 7 f32 1\ntarget host"),
                    "manifest line 18: 'workspace' is only allowed inside a "
                    "target block"},
        BadManifest{"workspace_out_of_order",
                    edited("workspace 8", "workspace 9"),
                    "manifest line 20: workspace index '9' is out of order, "
                    "expected 8 (workspaces continue the arg numbering)"},
        BadManifest{"workspace_dim_of_scalar",
                    edited("f32 arg0.0,1,16,4\n", "f32 arg4.0,1,16,4\n"),
                    "manifest line 20: size 'arg4.0' refers to scalar arg "
                    "'scale'"},
        BadManifest{"workspace_dim_out_of_rank",
                    edited("f32 arg0.0,1,16,4\n", "f32 arg0.4,1,16,4\n"),
                    "manifest line 20: size 'arg0.4' refers to dim 4 of 'q', "
                    "which has rank 4"},
        BadManifest{"workspace_dim_unknown_arg",
                    edited("f32 arg0.0,1,16,4\n", "f32 arg9.0,1,16,4\n"),
                    "manifest line 20: size 'arg9.0' refers to arg 9, but "
                    "there are only 7 args"},
        BadManifest{"workspace_bad_size",
                    edited("f32 arg0.0,1,16,4\n", "f32 batch,1,16,4\n"),
                    "manifest line 20: size 'batch' is neither a non-negative "
                    "integer nor 'argI.D[+C|-C][/K]' (K > 0)"},
        BadManifest{"launch_without_grid", edited(" grid arg0.0,1,16", ""),
                    "manifest line 22: expected 'launch ENTRY args I,J,... "
                    "grid X,Y,Z [block BX,BY,BZ] [shared BYTES] [dependent]'"},
        BadManifest{"launch_block_two_dims",
                    edited("grid arg0.0,1,16", "grid arg0.0,1,16 block 64,2"),
                    "manifest line 22: launch block '64,2' has 2 dims, "
                    "expected 3 (BX,BY,BZ)"},
        BadManifest{"launch_block_zero",
                    edited("grid arg0.0,1,16", "grid arg0.0,1,16 block 64,0,1"),
                    "manifest line 22: launch block '64,0,1' is not three "
                    "positive integers BX,BY,BZ"},
        BadManifest{
            "launch_block_symbolic",
            edited("grid arg0.0,1,16", "grid arg0.0,1,16 block arg0.0,1,1"),
            "manifest line 22: launch block 'arg0.0,1,1' is not three "
            "positive integers BX,BY,BZ"},
        BadManifest{
            "launch_block_too_many_threads",
            edited("grid arg0.0,1,16", "grid arg0.0,1,16 block 256,8,1"),
            "manifest line 22: launch block '256,8,1' has 2048 "
            "threads, more than 1024"},
        BadManifest{"launch_shared_negative",
                    edited("grid arg0.0,1,16", "grid arg0.0,1,16 shared -1"),
                    "manifest line 22: launch shared '-1' is not a byte count "
                    "in [0, 2147483647]"},
        BadManifest{
            "launch_shared_too_large",
            edited("grid arg0.0,1,16", "grid arg0.0,1,16 shared 2147483648"),
            "manifest line 22: launch shared '2147483648' is not a "
            "byte count in [0, 2147483647]"},
        BadManifest{
            "launch_shared_before_block",
            edited("grid arg0.0,1,16", "grid arg0.0,1,16 shared 0 block 1,1,1"),
            "manifest line 22: expected 'launch ENTRY args I,J,... "
            "grid X,Y,Z [block BX,BY,BZ] [shared BYTES] [dependent]', got "
            "'block' "
            "after the shared"},
        BadManifest{"launch_block_twice",
                    edited("grid arg0.0,1,16",
                           "grid arg0.0,1,16 block 1,1,1 block 1,1,1"),
                    "manifest line 22: expected 'launch ENTRY args I,J,... "
                    "grid X,Y,Z [block BX,BY,BZ] [shared BYTES] [dependent]', "
                    "got 'block' "
                    "after the block"},
        BadManifest{"launch_block_without_value",
                    edited("grid arg0.0,1,16", "grid arg0.0,1,16 block"),
                    "manifest line 22: expected 'launch ENTRY args I,J,... "
                    "grid X,Y,Z [block BX,BY,BZ] [shared BYTES] [dependent]', "
                    "got 'block' "
                    "after the grid"},
        BadManifest{"launch_unknown_trailer",
                    edited("grid arg0.0,1,16", "grid arg0.0,1,16 stream 2"),
                    "manifest line 22: expected 'launch ENTRY args I,J,... "
                    "grid X,Y,Z [block BX,BY,BZ] [shared BYTES] [dependent]', "
                    "got 'stream' "
                    "after the grid"},
        BadManifest{"launch_dependent_first",
                    edited("grid arg0.0,1,4", "grid arg0.0,1,4 dependent"),
                    "manifest line 21: the first launch of target "
                    "'host-x86_64' cannot be 'dependent' (it has no launch to "
                    "wait for)"},
        BadManifest{
            "launch_dependent_twice",
            edited("grid arg0.0,1,16", "grid arg0.0,1,16 dependent dependent"),
            "manifest line 22: expected 'launch ENTRY args I,J,... "
            "grid X,Y,Z [block BX,BY,BZ] [shared BYTES] [dependent]', "
            "got 'dependent' after the dependent"},
        BadManifest{"launch_undeclared_index",
                    edited("args 7,8,5,6", "args 7,9,5,6"),
                    "manifest line 22: launch argument 9 is neither an arg "
                    "nor a workspace declared above"},
        BadManifest{"launch_two_dim_grid",
                    edited("grid arg0.0,1,16", "grid 1,16"),
                    "manifest line 22: launch grid '1,16' has 2 dims, "
                    "expected 3 (X,Y,Z)"},
        BadManifest{"nested_target",
                    edited("launch mla_decode_k1", "target gfx942 code.gfx942\n"
                                                   "launch mla_decode_k1"),
                    "manifest line 22: target 'gfx942' starts inside target "
                    "'host-x86_64' (line 18); close it with 'end-target' "
                    "first"},
        BadManifest{"key_inside_target",
                    edited("launch mla_decode_k1", "heads 4"),
                    "manifest line 22: 'heads' is not allowed inside a target "
                    "block (expected 'config', 'workspace', 'launch', "
                    "'max-bytes' or 'end-target')"},
        BadManifest{"max_bytes_outside_target",
                    edited("target host", "max-bytes 1 64\ntarget host"),
                    "manifest line 18: 'max-bytes' is only allowed inside a "
                    "target block"},
        BadManifest{"max_bytes_missing_bytes",
                    edited("end-target", "max-bytes 1\nend-target"),
                    "manifest line 23: expected 'max-bytes INDEX BYTES', got 2 "
                    "tokens"},
        BadManifest{"max_bytes_bad_index",
                    edited("end-target", "max-bytes kv 64\nend-target"),
                    "manifest line 23: max-bytes index 'kv' is not an index"},
        BadManifest{"max_bytes_negative",
                    edited("end-target", "max-bytes 1 -1\nend-target"),
                    "manifest line 23: max-bytes '-1' is not a byte count (a "
                    "non-negative integer below 2^63)"},
        BadManifest{
            "max_bytes_too_large",
            edited("end-target", "max-bytes 1 9223372036854775808\nend-target"),
            "manifest line 23: max-bytes '9223372036854775808' is not "
            "a byte count (a non-negative integer below 2^63)"},
        BadManifest{
            "max_bytes_duplicate",
            edited("end-target", "max-bytes 7 64\nmax-bytes 7 32\nend-target"),
            "manifest line 24: duplicate max-bytes for index 7 (first "
            "on line 23)"},
        BadManifest{"max_bytes_unknown_index",
                    edited("end-target", "max-bytes 9 64\nend-target"),
                    "manifest line 23: max-bytes index 9 is neither an arg "
                    "nor a workspace of target 'host-x86_64'"},
        BadManifest{"max_bytes_of_scalar",
                    edited("workspace 7", "max-bytes 4 4\nworkspace 7"),
                    "manifest line 19: max-bytes index 4 is scalar arg "
                    "'scale' (only memrefs and workspaces have a byte size)"},
        BadManifest{"missing_end_target", edited("end-target\n", ""),
                    "manifest ends inside target 'host-x86_64' (line 18): "
                    "missing 'end-target'"},
        BadManifest{"stray_end_target",
                    edited("end-target\n", "end-target\nend-target\n"),
                    "manifest line 24: 'end-target' is only allowed inside a "
                    "target block"},
        BadManifest{"target_without_launch",
                    std::string(kExample) +
                        "target gfx942 code.gfx942\nend-target\n",
                    "manifest line 25: target 'gfx942' has no 'launch'"},
        BadManifest{"duplicate_target",
                    std::string(kExample) + "target host-x86_64 code.x\nlaunch "
                                            "k args 0 grid 1,1,1\nend-target\n",
                    "manifest line 24: duplicate target 'host-x86_64'"},
        BadManifest{"manifest_section_name",
                    edited("code.host-x86_64", "manifest"),
                    "manifest line 18: section name 'manifest' is not a valid "
                    "code section name"},
        BadManifest{"no_kernel", edited("kernel decode\n", ""),
                    "manifest has no 'kernel' line"},
        BadManifest{"no_target",
                    std::string(kExample).substr(
                        0, std::string(kExample).find("target")),
                    "manifest declares no 'target'"},
        BadManifest{"decode_missing_role", edited("arg 6 lse", "arg 6 lse2"),
                    "decode manifest needs an arg with role 'lse'"},
        BadManifest{"decode_missing_key", edited("rope_dim 64\n", ""),
                    "decode manifest needs a 'rope_dim' line"},
        BadManifest{"decode_q_row", edited("?,1,16,576", "?,1,16,512"),
                    "manifest line 11: decode arg 'q' dim 3 is 512, expected "
                    "576 (latent_dim + rope_dim)"},
        BadManifest{"decode_heads", edited("bf16 ?,1,16,512", "bf16 ?,1,8,512"),
                    "manifest line 16: decode arg 'o' dim 2 is 8, expected 16 "
                    "(heads)"},
        BadManifest{"decode_dynamic_page_size",
                    edited("page_size 64", "page_size 0"),
                    "manifest line 12: decode arg 'kv' dim 1 must be '?' "
                    "because page_size is 0 (dynamic)"},
        BadManifest{"decode_lse_dtype",
                    edited("lse memref f32", "lse memref bf16"),
                    "manifest line 17: decode arg 'lse' must have dtype f32, "
                    "has bf16"},
        BadManifest{"decode_rank",
                    edited("seq_lens memref i32 ?", "seq_lens memref i32 ?,1"),
                    "manifest line 14: decode arg 'seq_lens' must have rank 1, "
                    "has 2"},
        BadManifest{"decode_scale_kind",
                    edited("scale scalar f32", "scale memref f32 1"),
                    "manifest line 15: decode arg 'scale' must be a scalar"},
        BadManifest{"decode_table_dtype",
                    edited("block_table memref i32", "block_table memref f32"),
                    "manifest line 13: decode arg 'block_table' must have "
                    "dtype i32 or i64"}),
    [](const ::testing::TestParamInfo<BadManifest> &info) {
      return std::string(info.param.name);
    });
