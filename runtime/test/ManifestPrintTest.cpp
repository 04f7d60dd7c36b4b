//===- ManifestPrintTest.cpp - printManifest: round trips, canonical form -===//

#include "ManifestExamples.h"
#include "mla/runtime/Manifest.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

std::string show(int64_t value) { return std::to_string(value); }
std::string show(const std::string &value) { return "'" + value + "'"; }
std::string show(DType dtype) { return dtypeName(dtype); }
std::string show(ArgKind kind) {
  return kind == ArgKind::Memref ? "memref" : "scalar";
}
std::string show(const std::optional<DType> &dtype) {
  return dtype ? show(*dtype) : "absent";
}
template <typename T> std::string show(const std::vector<T> &items) {
  std::string out = "[";
  for (const T &item : items)
    out += (out.size() > 1 ? "," : "") + show(static_cast<int64_t>(item));
  return out + "]";
}
std::string show(const std::array<int64_t, 3> &items) {
  return show(std::vector<int64_t>(items.begin(), items.end()));
}
std::string show(const std::map<std::string, std::string> &config) {
  std::string out;
  for (const auto &[key, value] : config)
    out += (out.empty() ? "" : " ") + key + "=" + value;
  return "{" + out + "}";
}

/// Collects the fields in which two manifests differ.
class ManifestDiff {
public:
  explicit ManifestDiff(bool withLines) : withLines(withLines) {}

  std::vector<std::string> found;

  template <typename T>
  void field(const std::string &path, const T &a, const T &b) {
    if (!(a == b))
      found.push_back(path + ": " + show(a) + " vs " + show(b));
  }

  /// Compares the sizes, then the common elements with `each`.
  template <typename T, typename Each>
  void list(const std::string &path, const std::vector<T> &a,
            const std::vector<T> &b, Each each) {
    field(path + ".size", static_cast<int64_t>(a.size()),
          static_cast<int64_t>(b.size()));
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)
      each(path + "[" + std::to_string(i) + "]", a[i], b[i]);
  }

  void dimExpr(const std::string &path, const DimExpr &a, const DimExpr &b) {
    field(path + ".constant", a.constant, b.constant);
    field(path + ".argIndex", int64_t(a.argIndex), int64_t(b.argIndex));
    field(path + ".dim", int64_t(a.dim), int64_t(b.dim));
    field(path + ".addend", a.addend, b.addend);
    field(path + ".divisor", a.divisor, b.divisor);
  }

  void line(const std::string &path, int a, int b) {
    if (withLines)
      field(path + ".line", int64_t(a), int64_t(b));
  }

  void manifest(const Manifest &a, const Manifest &b) {
    field("kernel", a.kernel, b.kernel);
    field("function", a.function, b.function);
    field("compiler", a.compiler, b.compiler);
    field("dtype", a.dtype, b.dtype);
    field("heads", a.heads, b.heads);
    field("qLen", a.qLen, b.qLen);
    field("latentDim", a.latentDim, b.latentDim);
    field("ropeDim", a.ropeDim, b.ropeDim);
    field("pageSize", a.pageSize, b.pageSize);
    field("qkDim", a.qkDim, b.qkDim);
    field("vDim", a.vDim, b.vDim);
    field("causal", a.causal, b.causal);
    field("parts", a.parts, b.parts);
    field("config", a.config, b.config);
    list("args", a.args, b.args,
         [&](const std::string &p, const ManifestArg &x, const ManifestArg &y) {
           field(p + ".index", int64_t(x.index), int64_t(y.index));
           field(p + ".role", x.role, y.role);
           field(p + ".kind", x.kind, y.kind);
           field(p + ".dtype", x.dtype, y.dtype);
           field(p + ".dims", x.dims, y.dims);
           line(p, x.line, y.line);
         });
    list("targets", a.targets, b.targets,
         [&](const std::string &p, const TargetSpec &x, const TargetSpec &y) {
           target(p, x, y);
         });
  }

  void target(const std::string &path, const TargetSpec &a,
              const TargetSpec &b) {
    field(path + ".name", a.name, b.name);
    field(path + ".section", a.section, b.section);
    line(path, a.line, b.line);
    field(path + ".config", a.config, b.config);
    list(path + ".workspaces", a.workspaces, b.workspaces,
         [&](const std::string &p, const WorkspaceSpec &x,
             const WorkspaceSpec &y) {
           field(p + ".index", int64_t(x.index), int64_t(y.index));
           field(p + ".dtype", x.dtype, y.dtype);
           line(p, x.line, y.line);
           list(p + ".dims", x.dims, y.dims,
                [&](const std::string &q, const DimExpr &u, const DimExpr &v) {
                  dimExpr(q, u, v);
                });
         });
    list(path + ".launches", a.launches, b.launches,
         [&](const std::string &p, const LaunchSpec &x, const LaunchSpec &y) {
           field(p + ".entry", x.entry, y.entry);
           field(p + ".args", x.args, y.args);
           for (int i = 0; i < 3; ++i)
             dimExpr(p + ".grid[" + std::to_string(i) + "]", x.grid[i],
                     y.grid[i]);
           field(p + ".block", x.block, y.block);
           field(p + ".sharedBytes", x.sharedBytes, y.sharedBytes);
           field(p + ".dependent", x.dependent, y.dependent);
           line(p, x.line, y.line);
         });
    list(path + ".maxBytes", a.maxBytes, b.maxBytes,
         [&](const std::string &p, const MaxBytesSpec &x,
             const MaxBytesSpec &y) {
           field(p + ".index", int64_t(x.index), int64_t(y.index));
           field(p + ".bytes", x.bytes, y.bytes);
           line(p, x.line, y.line);
         });
  }

private:
  bool withLines;
};

/// Every field in which `a` and `b` differ ("path: A vs B"), empty when they
/// are equal. The `line` fields (where a line was in its text) count only
/// `withLines`.
std::vector<std::string> differences(const Manifest &a, const Manifest &b,
                                     bool withLines = false) {
  ManifestDiff diff(withLines);
  diff.manifest(a, b);
  return diff.found;
}

const std::vector<std::string> kNoDifferences;

/// What mla-compile writes for a host decode (header keys sorted, no
/// `config` line).
const char *const kCanonicalHostDecode = R"(mla-manifest 1
kernel decode
function decode
dtype bf16
heads 16
latent_dim 512
page_size 64
q_len 1
rope_dim 64
arg 0 q memref bf16 ?,1,16,576
arg 1 kv memref bf16 ?,64,576
arg 2 block_table memref i32 ?,?
arg 3 seq_lens memref i32 ?
arg 4 scale scalar f32
arg 5 o memref bf16 ?,1,16,512
arg 6 lse memref f32 ?,1,16
target host-x86_64 code.host-x86_64
workspace 7 f32 arg0.0,1,16,4,512
workspace 8 f32 arg0.0,1,16,4
launch mla_decode_k0 args 0,1,2,3,4,7,8 grid arg0.0,1,4
launch mla_decode_k1 args 7,8,5,6 grid arg0.0,1,16
end-target
)";

/// A prefill for the host and a GPU: ceiling division, `-1`.
const char *const kCanonicalPrefill = R"(mla-manifest 1
kernel prefill
function prefill
causal 1
dtype bf16
heads 16
qk_dim 192
v_dim 128
arg 0 q memref bf16 ?,16,192
arg 1 k memref bf16 ?,16,192
arg 2 v memref bf16 ?,16,128
arg 3 cu_seqlens_q memref i32 ?
arg 4 cu_seqlens_k memref i32 ?
arg 5 scale scalar f32
arg 6 o memref bf16 ?,16,128
arg 7 lse memref f32 16,?
target host-x86_64 code.host-x86_64
launch prefill_k0 args 0,1,2,3,4,5,6,7 grid arg0.0/32,16,arg3.0-1
end-target
target sm_90a code.sm_90a
launch prefill_k0 args 0,1,2,3,4,5,6,7 grid arg0.0/64,16,arg3.0-1 block 128,1,1 shared 49152
end-target
)";

/// A merge for the host and an AMD GPU (max-bytes lines, `shared 0`).
const char *const kCanonicalMerge = R"(mla-manifest 1
kernel merge
function merge
dtype bf16
heads 16
parts 4
v_dim 512
arg 0 o_parts memref f32 4,?,16,512
arg 1 lse_parts memref f32 4,16,?
arg 2 o memref bf16 ?,16,512
arg 3 lse memref f32 16,?
target host-x86_64 code.host-x86_64
launch merge_k0 args 0,1,2,3 grid arg2.0,16,1
end-target
target gfx942 code.gfx942
launch merge_k0 args 0,1,2,3 grid arg2.0,16,1 block 64,1,1 shared 0
max-bytes 0 4294934527
max-bytes 1 2147483648
max-bytes 2 4294950911
max-bytes 3 2147483648
end-target
)";

/// Rank-0 memrefs (one element each): an arg and a workspace, DIMS `()`.
const char *const kCanonicalRankZero = R"(mla-manifest 1
kernel scaled_copy
function scaled_copy
arg 0 x memref f32 ?,16
arg 1 cap memref f32 ()
target host-x86_64 code.host-x86_64
workspace 2 i32 ()
launch scaled_copy_k0 args 0,1,2 grid arg0.0,1,1
end-target
)";

/// An append with a run-time page size (`page_size 0`, kv dim 1 `?`).
const char *const kCanonicalAppendKv = R"(mla-manifest 1
kernel append_kv
function append_kv
dtype f16
latent_dim 512
page_size 0
rope_dim 64
arg 0 kv_new memref f16 ?,576
arg 1 slot_mapping memref i64 ?
arg 2 kv memref f16 ?,?,576
target host-x86_64 code.host-x86_64
launch append_kv_k0 args 0,1,2 grid arg0.0,1,1
end-target
)";

/// Every header key (zeros where they are allowed), a `config` line, every
/// SIZE form, three targets (workspaces numbered from the arg count in each),
/// `block 1,1,1` written because of a non-zero `shared`.
const char *const kCanonicalEverything = R"(mla-manifest 1
kernel custom
function attention
compiler mla-compile 1.0.0 LLVM 22.1.8
causal 0
dtype f16
heads 8
latent_dim 32
page_size 0
parts 2
q_len 0
qk_dim 48
rope_dim 0
v_dim 32
config stages=2 tile_kv=32 tile_q=64
arg 0 q memref f16 ?,8,48
arg 1 k memref f16 ?,?,8,48
arg 2 cu_seqlens memref i64 ?
arg 3 scale scalar f32
arg 4 o memref f32 ?,8,32
target host-x86_64 code.host-x86_64
workspace 5 f32 arg0.0+15/16,8,arg1.1-1
workspace 6 i32 arg2.0-1/2
launch k0 args 0,1,2,3,5,6 grid arg0.0/64,arg2.0-1,8
launch k1 args 5,6,4 grid arg0.0+63/64,1,1
end-target
target gfx942 code.gfx942
config head_group=1 kv_splits=4 warps=4
workspace 5 bf16 arg0.0,8,4
launch k0 args 0,1,2,3,5 grid arg0.0+1,8,1 block 256,1,1 shared 4096
launch k1 args 5,4 grid 1,1,1 block 64,2,1 shared 0
max-bytes 1 4294967039
max-bytes 5 2147483648
max-bytes 0 0
end-target
target sm_90a code.sm_90a
launch k0 args 0,1,2,3,4 grid arg4.0,arg4.1,arg4.2 block 1,1,1 shared 1
end-target
)";

/// test/data/decode_h1_gfx942.manifest: what mla-compile wrote for a gfx942
/// decode.
std::string mlaCompileGfx942Decode() {
  std::ifstream in(std::string(MLA_TEST_DATA_DIR) +
                   "/decode_h1_gfx942.manifest");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The `# config ...` comment that mla-compile wrote after each `target`
/// line before the per-target `config` line existed, as that line.
std::string withTargetConfigLine(std::string text) {
  const std::string comment = "# config tile_kv=64 kv_splits=4 head_group=1 "
                              "warps=4 stages=1\n";
  size_t pos = text.find(comment);
  if (pos != std::string::npos)
    text.replace(pos, comment.size(),
                 "config head_group=1 kv_splits=4 stages=1 tile_kv=64 "
                 "warps=4\n");
  return text;
}

/// `text` without its lines that start with `prefix`.
std::string withoutLines(const std::string &text, const std::string &prefix) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, prefix.size(), prefix) != 0)
      out += line + "\n";
  return out;
}

struct ManifestText {
  const char *name;
  std::string text;
};

void PrintTo(const ManifestText &c, std::ostream *os) { *os << c.name; }

std::string testName(const ::testing::TestParamInfo<ManifestText> &info) {
  return info.param.name;
}

class RoundTripTest : public ::testing::TestWithParam<ManifestText> {};
class CanonicalManifestTest : public ::testing::TestWithParam<ManifestText> {};

} // namespace

TEST_P(RoundTripTest, ParsesBackToTheSameManifest) {
  Expected<Manifest> first = parseManifest(GetParam().text);
  ASSERT_TRUE(first.ok()) << first.status().toString();
  std::string printed = printManifest(*first);
  Expected<Manifest> second = parseManifest(printed);
  ASSERT_TRUE(second.ok()) << second.status().toString() << "\n" << printed;
  EXPECT_EQ(differences(*first, *second), kNoDifferences) << printed;
  // The printed text is canonical: printing it again changes nothing.
  EXPECT_EQ(printManifest(*second), printed);
}

INSTANTIATE_TEST_SUITE_P(
    Manifests, RoundTripTest,
    ::testing::Values(
        ManifestText{"decode_example", kExample},
        ManifestText{"gpu_block_and_shared", gpuLaunchesText()},
        ManifestText{"max_bytes_anywhere", maxBytesAnywhereText()},
        ManifestText{"comments_blank_lines_tabs", commentsText()},
        ManifestText{"dynamic_page_size", dynamicPageSizeText()},
        ManifestText{"merge_states_two_targets", kMergeStatesText},
        ManifestText{"size_expressions", kSizeExpressionsText},
        ManifestText{"spelled_out_defaults",
                     edited("grid arg0.0,1,16",
                            "grid arg0.0+0/1,1,16 block 1,1,1 shared 0")},
        ManifestText{
            "dependent_launch",
            edited("grid arg0.0,1,16",
                   "grid arg0.0,1,16 block 64,1,1 shared 0 dependent")},
        ManifestText{"host_decode", kCanonicalHostDecode},
        ManifestText{"prefill", kCanonicalPrefill},
        ManifestText{"merge", kCanonicalMerge},
        ManifestText{"append_kv", kCanonicalAppendKv},
        ManifestText{"everything", kCanonicalEverything},
        ManifestText{"mla_compile_gfx942_decode", mlaCompileGfx942Decode()}),
    testName);

TEST_P(CanonicalManifestTest, PrintsTheTextBackByteForByte) {
  Expected<Manifest> parsed = parseManifest(GetParam().text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(printManifest(*parsed), GetParam().text);
  // Same lines, so the parsed line numbers agree too.
  Expected<Manifest> again = parseManifest(printManifest(*parsed));
  ASSERT_TRUE(again.ok()) << again.status().toString();
  EXPECT_EQ(differences(*parsed, *again, /*withLines=*/true), kNoDifferences);
}

INSTANTIATE_TEST_SUITE_P(
    Texts, CanonicalManifestTest,
    ::testing::Values(ManifestText{"host_decode", kCanonicalHostDecode},
                      ManifestText{"prefill", kCanonicalPrefill},
                      ManifestText{"merge", kCanonicalMerge},
                      ManifestText{"rank_zero", kCanonicalRankZero},
                      ManifestText{"append_kv", kCanonicalAppendKv},
                      ManifestText{"everything", kCanonicalEverything},
                      ManifestText{
                          "mla_compile_gfx942_decode",
                          withTargetConfigLine(mlaCompileGfx942Decode())}),
    testName);

TEST(ManifestTest, RankZeroDimsParseToNoDims) {
  Expected<Manifest> m = parseManifest(kCanonicalRankZero);
  ASSERT_TRUE(m.ok()) << m.status().toString();
  EXPECT_TRUE(m->args[1].dims.empty());
  EXPECT_EQ(m->args[1].kind, ArgKind::Memref);
  EXPECT_TRUE(m->targets[0].workspaces[0].dims.empty());
  // `()` is the whole DIMS, never one of several dims.
  Expected<Manifest> bad =
      parseManifest(edited("arg 1 cap memref f32 ()",
                           "arg 1 cap memref f32 (),3", kCanonicalRankZero));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dim '()'"), std::string::npos)
      << bad.status().message();
}

TEST(ManifestPrintTest, OldConfigCommentsStillParse) {
  // Packages of earlier versions carry the target's config as a comment.
  std::string file = mlaCompileGfx942Decode();
  ASSERT_NE(file.find("target gfx942 code.gfx942\n# config "),
            std::string::npos)
      << file;
  Expected<Manifest> parsed = parseManifest(file);
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_TRUE(parsed->config.empty());
  EXPECT_TRUE(parsed->targets.at(0).config.empty());
  EXPECT_EQ(printManifest(*parsed), withoutLines(file, "# config "));
}

TEST(ManifestPrintTest, TargetConfigIsParsedAndPrintedInItsBlock) {
  Expected<Manifest> parsed =
      parseManifest(withTargetConfigLine(mlaCompileGfx942Decode()));
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  const TargetSpec &t = parsed->targets.at(0);
  EXPECT_EQ(t.config.size(), 5u);
  EXPECT_EQ(t.config.at("tile_kv"), "64");
  EXPECT_EQ(t.config.at("warps"), "4");
  EXPECT_TRUE(parsed->config.empty());
  std::string printed = printManifest(*parsed);
  EXPECT_NE(printed.find("target gfx942 code.gfx942\nconfig head_group=1 "
                         "kv_splits=4 stages=1 tile_kv=64 warps=4\n"),
            std::string::npos)
      << printed;
  // Two config lines in one block are an error naming the line.
  std::string twice = withTargetConfigLine(mlaCompileGfx942Decode());
  size_t at = twice.find("config head_group");
  twice.insert(at, "config warps=8\n");
  Expected<Manifest> bad = parseManifest(twice);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().toString().find("duplicate 'config' in this block"),
            std::string::npos)
      << bad.status().toString();
}

TEST(ManifestPrintTest, WritesTheCanonicalForm) {
  // Keys out of order, comments, blank lines, tabs and CRLF, `block` without
  // `shared` and `shared` without `block`, spelled-out +0 and /1, max-bytes
  // between launches.
  Expected<Manifest> parsed = parseManifest(
      "# header\n"
      "mla-manifest 1\r\n"
      "function f # the function\n"
      "\n"
      "kernel custom\n"
      "config  z=1\ta=b=c\n"
      "v_dim 16\n"
      "causal 1\n"
      "dtype i64\n"
      "arg 0 x memref i32 ?,3\n"
      "arg 1 s scalar f16\n"
      "target t code.t\n"
      "launch e args 0,1 grid arg0.0+0/1,arg0.1-0,arg0.0/1 block 32,1,1\n"
      "max-bytes 0 12\n"
      "workspace 2 i64 arg0.1+2\n"
      "launch e2 args 2 grid 1,1,1 shared 64\n"
      "launch e3 args 0 grid 1,1,1 shared 0\n"
      "end-target\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(printManifest(*parsed),
            "mla-manifest 1\n"
            "kernel custom\n"
            "function f\n"
            "causal 1\n"
            "dtype i64\n"
            "v_dim 16\n"
            "config a=b=c z=1\n"
            "arg 0 x memref i32 ?,3\n"
            "arg 1 s scalar f16\n"
            "target t code.t\n"
            "workspace 2 i64 arg0.1+2\n"
            "launch e args 0,1 grid arg0.0,arg0.1,arg0.0 block 32,1,1 shared "
            "0\n"
            "launch e2 args 2 grid 1,1,1 block 1,1,1 shared 64\n"
            "launch e3 args 0 grid 1,1,1\n"
            "max-bytes 0 12\n"
            "end-target\n");
  // kExample orders its header as docs/Runtime.md does; the canonical order
  // is mla-compile's (sorted), with `config` after the other keys.
  Expected<Manifest> example = parseManifest(kExample);
  ASSERT_TRUE(example.ok()) << example.status().toString();
  std::string expected = kCanonicalHostDecode;
  expected.replace(expected.find("arg 0 q"), 0,
                   "config head_group=16 kv_splits=4 tile_kv=64\n");
  EXPECT_EQ(printManifest(*example), expected);
}

TEST(ManifestPrintTest, PrintsEveryField) {
  Expected<Manifest> base = parseManifest(kCanonicalEverything);
  ASSERT_TRUE(base.ok()) << base.status().toString();
  // Each change must be seen by differences() and survive print + parse.
  struct Change {
    const char *what;
    std::function<void(Manifest &)> apply;
  };
  const std::vector<Change> changes = {
      {"kernel", [](Manifest &m) { m.kernel = "custom2"; }},
      {"function", [](Manifest &m) { m.function = "other"; }},
      {"compiler", [](Manifest &m) { m.compiler = "mla-compile 2.0.0"; }},
      {"no compiler", [](Manifest &m) { m.compiler.clear(); }},
      {"dtype", [](Manifest &m) { m.dtype = DType::BF16; }},
      {"no dtype", [](Manifest &m) { m.dtype.reset(); }},
      {"heads", [](Manifest &m) { m.heads = 3; }},
      {"no heads", [](Manifest &m) { m.heads = -1; }},
      {"q_len", [](Manifest &m) { m.qLen = 7; }},
      {"latent_dim", [](Manifest &m) { m.latentDim = 64; }},
      {"rope_dim", [](Manifest &m) { m.ropeDim = 16; }},
      {"page_size", [](Manifest &m) { m.pageSize = 32; }},
      {"qk_dim", [](Manifest &m) { m.qkDim = 576; }},
      {"v_dim", [](Manifest &m) { m.vDim = 512; }},
      {"causal", [](Manifest &m) { m.causal = 1; }},
      {"no causal", [](Manifest &m) { m.causal = -1; }},
      {"parts", [](Manifest &m) { m.parts = 9; }},
      {"config value", [](Manifest &m) { m.config["stages"] = "3"; }},
      {"config key", [](Manifest &m) { m.config["warps"] = "8"; }},
      {"no config", [](Manifest &m) { m.config.clear(); }},
      {"arg role", [](Manifest &m) { m.args[4].role = "out"; }},
      {"arg dtype", [](Manifest &m) { m.args[4].dtype = DType::BF16; }},
      {"arg static dim", [](Manifest &m) { m.args[0].dims[1] = 4; }},
      {"arg dynamic dim", [](Manifest &m) { m.args[0].dims[2] = kDynamicDim; }},
      {"arg rank", [](Manifest &m) { m.args[2].dims.push_back(2); }},
      {"arg kind",
       [](Manifest &m) {
         m.args[3].kind = ArgKind::Memref;
         m.args[3].dims = {5};
       }},
      {"scalar dtype", [](Manifest &m) { m.args[3].dtype = DType::F16; }},
      {"target name", [](Manifest &m) { m.targets[1].name = "gfx950"; }},
      {"section", [](Manifest &m) { m.targets[1].section = "code.x"; }},
      {"target config",
       [](Manifest &m) { m.targets[1].config["warps"] = "8"; }},
      {"target config key",
       [](Manifest &m) { m.targets[0].config["stages"] = "1"; }},
      {"workspace dtype",
       [](Manifest &m) { m.targets[0].workspaces[1].dtype = DType::F32; }},
      {"workspace constant",
       [](Manifest &m) { m.targets[0].workspaces[0].dims[1].constant = 9; }},
      {"workspace argIndex",
       [](Manifest &m) { m.targets[0].workspaces[0].dims[0].argIndex = 4; }},
      {"workspace dim",
       [](Manifest &m) { m.targets[0].workspaces[0].dims[0].dim = 1; }},
      {"workspace addend",
       [](Manifest &m) { m.targets[0].workspaces[0].dims[0].addend = -15; }},
      {"workspace divisor",
       [](Manifest &m) { m.targets[0].workspaces[0].dims[0].divisor = 1; }},
      {"workspace rank",
       [](Manifest &m) { m.targets[0].workspaces[1].dims.push_back({}); }},
      {"no workspaces",
       [](Manifest &m) {
         m.targets[1].workspaces.clear();
         m.targets[1].launches[0].args.pop_back();
         m.targets[1].launches[1].args = {4};
         m.targets[1].maxBytes.erase(m.targets[1].maxBytes.begin() + 1);
       }},
      {"launch entry",
       [](Manifest &m) { m.targets[0].launches[1].entry = "z"; }},
      {"launch args",
       [](Manifest &m) { m.targets[0].launches[1].args = {6, 5, 4, 0}; }},
      {"grid constant",
       [](Manifest &m) {
         m.targets[0].launches[0].grid[2] = DimExpr();
         m.targets[0].launches[0].grid[2].constant = 3;
       }},
      {"grid expression",
       [](Manifest &m) {
         DimExpr &x = m.targets[2].launches[0].grid[1];
         x.argIndex = 1;
         x.dim = 3;
         x.addend = 5;
         x.divisor = 7;
       }},
      {"block",
       [](Manifest &m) { m.targets[1].launches[1].block = {8, 4, 2}; }},
      {"default block",
       [](Manifest &m) { m.targets[1].launches[0].block = {1, 1, 1}; }},
      {"shared", [](Manifest &m) { m.targets[1].launches[1].sharedBytes = 7; }},
      {"no shared",
       [](Manifest &m) { m.targets[2].launches[0].sharedBytes = 0; }},
      {"host block",
       [](Manifest &m) { m.targets[0].launches[0].block[0] = 2; }},
      {"launch order",
       [](Manifest &m) {
         std::swap(m.targets[1].launches[0], m.targets[1].launches[1]);
         m.targets[1].launches[0].args = {0};
       }},
      {"max-bytes bytes",
       [](Manifest &m) { m.targets[1].maxBytes[0].bytes = 4096; }},
      {"max-bytes index",
       [](Manifest &m) { m.targets[1].maxBytes[2].index = 4; }},
      {"max-bytes order",
       [](Manifest &m) {
         std::swap(m.targets[1].maxBytes[0], m.targets[1].maxBytes[2]);
       }},
      {"new max-bytes",
       [](Manifest &m) { m.targets[0].maxBytes.push_back({6, 1 << 20, 0}); }},
      {"target order",
       [](Manifest &m) { std::swap(m.targets[0], m.targets[2]); }},
  };
  for (const Change &change : changes) {
    SCOPED_TRACE(change.what);
    Manifest changed = *base;
    change.apply(changed);
    EXPECT_NE(differences(*base, changed), kNoDifferences);
    std::string printed = printManifest(changed);
    Expected<Manifest> reparsed = parseManifest(printed);
    ASSERT_TRUE(reparsed.ok()) << reparsed.status().toString() << "\n"
                               << printed;
    EXPECT_EQ(differences(changed, *reparsed), kNoDifferences) << printed;
  }
}

TEST(ManifestPrintTest, DifferencesNameTheFieldAndCompareLinesOnlyWhenAsked) {
  Expected<Manifest> a = parseManifest(kExample);
  Expected<Manifest> b = parseManifest(commentsText());
  ASSERT_TRUE(a.ok() && b.ok());
  // commentsText() adds three lines before the args.
  EXPECT_EQ(differences(*a, *b), kNoDifferences);
  std::vector<std::string> lines = differences(*a, *b, /*withLines=*/true);
  // Every arg, the target, its workspaces and launches.
  ASSERT_EQ(lines.size(), 12u);
  EXPECT_EQ(lines[0], "args[0].line: 11 vs 14");
  EXPECT_EQ(lines[7], "targets[0].line: 18 vs 21");
  EXPECT_EQ(lines[11], "targets[0].launches[1].line: 22 vs 25");
  b->targets[0].launches[1].grid[0].addend = -2;
  b->targets[0].launches[1].block[1] = 4;
  EXPECT_EQ(differences(*a, *b),
            (std::vector<std::string>{
                "targets[0].launches[1].grid[0].addend: 0 vs -2",
                "targets[0].launches[1].block: [1,1,1] vs [1,4,1]"}));
}
