//===- MlaBenchTest.cpp - mla-bench on the host device --------------------===//

#include "KindTestUtils.h"
#include "TestUtils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <numeric>
#include <regex>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

class MlaBenchTest : public ::testing::Test {
protected:
  void SetUp() override { writeBytes(package, decodePackageBytes(shape)); }

  ToolResult bench(std::vector<std::string> args) {
    args.insert(args.begin(), package);
    return runTool(MLA_BENCH_PATH, args);
  }

  /// The key=value pairs of the summary line.
  static std::map<std::string, std::string> fields(const std::string &line) {
    std::map<std::string, std::string> result;
    std::regex pair("([a-z_]+)=([^ \n]+)");
    for (std::sregex_iterator it(line.begin(), line.end(), pair), end;
         it != end; ++it)
      result[(*it)[1]] = (*it)[2];
    return result;
  }

  void expectFailure(const std::vector<std::string> &args,
                     const std::string &message) {
    ToolResult result = bench(args);
    EXPECT_EQ(result.exitCode, 1);
    EXPECT_EQ(result.err, "mla-bench: error: " + message + "\n");
    EXPECT_EQ(result.out, "");
  }

  /// `lengths` as a [B] .npy file of `dtype` in the temporary directory.
  std::string writeLengths(const std::string &name,
                           const std::vector<int64_t> &lengths,
                           DType dtype = DType::I32) {
    int64_t count = static_cast<int64_t>(lengths.size());
    Expected<HostTensor> tensor = HostTensor::allocate(dtype, {count});
    EXPECT_TRUE(tensor.ok());
    EXPECT_TRUE(convertElements(lengths.data(), DType::I64, tensor->data(),
                                dtype, lengths.size())
                    .ok());
    EXPECT_TRUE(writeNpy(dir.file(name), tensor->view()).ok());
    return dir.file(name);
  }

  /// --ragged MIN:MAX --seed S as docs/Runtime.md defines it, written out
  /// independently of mla-bench's code: splitmix64 from S.
  static std::vector<int64_t> splitmixLengths(int64_t batch, int64_t min,
                                              int64_t max, uint64_t seed) {
    std::vector<int64_t> lengths;
    for (int64_t b = 0; b < batch; ++b) {
      uint64_t z = seed += 0x9e3779b97f4a7c15ull;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      lengths.push_back(
          min + static_cast<int64_t>(z % static_cast<uint64_t>(max - min + 1)));
    }
    return lengths;
  }

  /// The bytes and FLOPs of the fixture's decode (bf16, H 4, 32 + 8, Sq 1):
  /// 2 * (sum(len) * 40 + B * 4 * 40 + B * 4 * 32) and 2 * 4 * sum(len) *
  /// (2 * 32 + 8).
  static int64_t decodeBytes(int64_t batch, int64_t sumLen) {
    return 2 * (sumLen * 40 + batch * 4 * 40 + batch * 4 * 32);
  }
  static int64_t decodeFlops(int64_t sumLen) { return 2 * 4 * sumLen * 72; }

  TempDir dir;
  std::string package = dir.file("decode.mlapkg");
  DecodeShape shape;
};

} // namespace

TEST_F(MlaBenchTest, PrintsOneSummaryLine) {
  ToolResult result = bench({"--device=host", "--batch", "3", "--seq-len", "50",
                             "--iters=4", "--warmup", "1", "--rotate", "2",
                             "--threads=2", "--scale=default"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_EQ(result.err, "");
  ASSERT_EQ(std::count(result.out.begin(), result.out.end(), '\n'), 1)
      << result.out;
  EXPECT_EQ(result.out.rfind("mla-bench: package=decode.mlapkg device=host "
                             "dtype=bf16 batch=3 seq_len=50 ragged=0 "
                             "sum_len=150 q_len=1 heads=4 page_size=16 "
                             "scale=0.158113882 warmup=1 iters=4 rotate=2 "
                             "median_us=",
                             0),
            0u)
      << result.out;
  std::map<std::string, std::string> f = fields(result.out);
  double median = std::stod(f["median_us"]);
  EXPECT_GT(median, 0);
  EXPECT_LE(std::stod(f["min_us"]), median);
  EXPECT_GE(std::stod(f["max_us"]), median);
  EXPECT_EQ(f["nonfinite"], "0");
  // bytes = 2 * (150 * 40 + 3 * 4 * 40 + 3 * 4 * 32); flops = 2 * 4 * 150 *
  // (2 * 32 + 8).
  double gbs = 2.0 * (150 * 40 + 3 * 4 * 40 + 3 * 4 * 32) / median / 1e3;
  EXPECT_NEAR(std::stod(f["gbs"]), gbs, 0.051 + 0.01 * gbs);
  double tflops = 2.0 * 4 * 150 * (2 * 32 + 8) / median / 1e6;
  EXPECT_NEAR(std::stod(f["tflops"]), tflops, 0.0006 + 0.01 * tflops);
}

// --reuse-plan is accepted; on the host (pooled workspaces) and for a
// kernel without a plan (this one) no launch is skipped: reuse_plan=0.
TEST_F(MlaBenchTest, ReusePlanIsReported) {
  ToolResult result = bench({"--device=host", "--batch", "3", "--seq-len", "50",
                             "--iters=2", "--warmup", "0", "--reuse-plan",
                             "--threads=2", "--scale=default"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  std::map<std::string, std::string> f = fields(result.out);
  EXPECT_EQ(f["reuse_plan"], "0");
  EXPECT_EQ(f["nonfinite"], "0");
}

TEST_F(MlaBenchTest, CsvPathCheckedBeforeTheRun) {
  // A --csv in a missing directory, or a directory, fails before anything
  // is timed (it used to fail after the whole benchmark), naming the path.
  std::string missing = dir.file("no/such/dir/bench.csv");
  ToolResult result =
      bench({"--device=host", "--batch=1", "--seq-len=8", "--iters=1",
             "--warmup=0", "--scale=default", "--csv", missing});
  EXPECT_NE(result.exitCode, 0);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "mla-bench: error: " + missing +
                            ": cannot create: No such file or directory\n");
  result = bench({"--device=host", "--batch=1", "--seq-len=8", "--iters=1",
                  "--warmup=0", "--scale=default", "--csv", dir.path()});
  EXPECT_NE(result.exitCode, 0);
  EXPECT_EQ(result.err, "mla-bench: error: " + dir.path() +
                            ": cannot append: Is a directory\n");
}

TEST_F(MlaBenchTest, RaggedLengthsAndCsv) {
  std::string csv = dir.file("bench.csv");
  // The documented generator: splitmix64 from the seed, length b = MIN +
  // x_b mod (MAX - MIN + 1).
  std::vector<int64_t> lengths = splitmixLengths(8, 0, 40, 7);
  int64_t sum = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  int64_t min = *std::min_element(lengths.begin(), lengths.end());
  int64_t max = *std::max_element(lengths.begin(), lengths.end());
  ASSERT_LT(min, max); // ragged indeed
  for (int i = 0; i < 2; ++i) {
    ToolResult result =
        bench({"--device=host", "--batch=8", "--ragged", "0:40", "--iters=2",
               "--warmup=0", "--csv", csv, "--seed=7", "--ceiling-gbs=10",
               "--ceiling-tflops=0.5", "--scale", "0.125"});
    ASSERT_EQ(result.exitCode, 0) << result.err;
    std::map<std::string, std::string> f = fields(result.out);
    EXPECT_EQ(f["batch"], "8");
    EXPECT_EQ(f["ragged"], "1");
    EXPECT_EQ(f["lengths"], "ragged:0:40");
    EXPECT_EQ(f["seed"], "7");
    EXPECT_EQ(f["scale"], "0.125");
    EXPECT_EQ(f["sum_len"], std::to_string(sum));
    EXPECT_EQ(f["min_len"], std::to_string(min));
    EXPECT_EQ(f["max_len"], std::to_string(max));
    EXPECT_EQ(f["seq_len"], std::to_string(max));
    EXPECT_EQ(f["bytes"], std::to_string(decodeBytes(8, sum)));
    EXPECT_EQ(f["flops"], std::to_string(decodeFlops(sum)));
    EXPECT_EQ(f["nonfinite"], "0");
    EXPECT_NEAR(std::stod(f["bw_frac"]), std::stod(f["gbs"]) / 10, 0.006);
  }
  std::ifstream in(csv);
  std::string header, row1, row2, extra;
  std::getline(in, header);
  std::getline(in, row1);
  std::getline(in, row2);
  EXPECT_FALSE(std::getline(in, extra));
  // The columns of earlier versions first, in their order.
  EXPECT_EQ(header, "package,device,dtype,batch,seq_len,ragged,sum_len,q_len,"
                    "heads,page_size,scale,warmup,iters,rotate,median_us,"
                    "min_us,max_us,gbs,tflops,bw_frac,flop_frac,nonfinite,"
                    "min_len,max_len,lengths,seed,bytes,flops,pages,"
                    "reuse_plan");
  EXPECT_EQ(row1.rfind("decode.mlapkg,host,bf16,8," + std::to_string(max) +
                           ",1," + std::to_string(sum) + ",",
                       0),
            0u)
      << row1;
  std::string tail = "," + std::to_string(min) + "," + std::to_string(max) +
                     ",ragged:0:40,7," + std::to_string(decodeBytes(8, sum)) +
                     "," + std::to_string(decodeFlops(sum)) + ",";
  EXPECT_NE(row1.find(tail), std::string::npos) << row1;
  // Same seed, same lengths.
  EXPECT_EQ(row1.substr(0, 40), row2.substr(0, 40));

  // Another seed, other lengths.
  ToolResult other =
      bench({"--device=host", "--batch=8", "--ragged=0:40", "--seed=8",
             "--iters=1", "--warmup=0", "--scale=1"});
  ASSERT_EQ(other.exitCode, 0) << other.err;
  std::vector<int64_t> lengths8 = splitmixLengths(8, 0, 40, 8);
  int64_t sum8 = std::accumulate(lengths8.begin(), lengths8.end(), int64_t{0});
  EXPECT_EQ(fields(other.out)["sum_len"], std::to_string(sum8));
  EXPECT_NE(sum8, sum);
}

// Lengths from a file: 0, 1, the page size (16) and a non-multiple, int32
// or int64; the cache holds each request's own pages.
TEST_F(MlaBenchTest, SeqLensFile) {
  std::string lens = writeLengths("lens.npy", {0, 1, 16, 17, 100, 0});
  ToolResult result = bench({"--device=host", "--seq-lens", lens, "--iters=2",
                             "--warmup=1", "--scale=default"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(result.out.rfind("mla-bench: package=decode.mlapkg device=host "
                             "dtype=bf16 batch=6 seq_len=100 ragged=1 "
                             "sum_len=134 q_len=1 heads=4 page_size=16 ",
                             0),
            0u)
      << result.out;
  std::map<std::string, std::string> f = fields(result.out);
  EXPECT_EQ(f["min_len"], "0");
  EXPECT_EQ(f["max_len"], "100");
  EXPECT_EQ(f["lengths"], "file:lens.npy");
  // The empty requests' lse is -inf (their value), not counted.
  EXPECT_EQ(f["nonfinite"], "0");
  EXPECT_EQ(f["bytes"], std::to_string(decodeBytes(6, 134)));
  EXPECT_EQ(f["flops"], std::to_string(decodeFlops(134)));
  // Each request's own pages: 0 + 1 + 1 + 2 + 7 + 0 (not 6 x 7).
  EXPECT_EQ(f["pages"], "11");
  double median = std::stod(f["median_us"]);
  double gbs = decodeBytes(6, 134) / median / 1e3;
  EXPECT_NEAR(std::stod(f["gbs"]), gbs, 0.051 + 0.01 * gbs);

  std::string lens64 = writeLengths("lens64.npy", {5, 2000}, DType::I64);
  result = bench({"--device=host", "--seq-lens=" + lens64, "--iters=1",
                  "--warmup=0", "--scale=1"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  f = fields(result.out);
  EXPECT_EQ(f["batch"], "2");
  EXPECT_EQ(f["sum_len"], "2005");
  EXPECT_EQ(f["min_len"], "5");
  EXPECT_EQ(f["pages"], "126"); // 1 + 125
  EXPECT_EQ(f["bytes"], std::to_string(decodeBytes(2, 2005)));
}

// Every request empty: o = 0 and lse = -inf everywhere, no bytes of kv.
TEST_F(MlaBenchTest, EmptyRequests) {
  for (std::vector<std::string> lengths :
       {std::vector<std::string>{"--seq-lens", writeLengths("z.npy", {0, 0})},
        std::vector<std::string>{"--batch=2", "--seq-len=0"},
        std::vector<std::string>{"--batch=2", "--ragged=0:0", "--seed=3"}}) {
    lengths.insert(lengths.end(),
                   {"--device=host", "--iters=1", "--warmup=0", "--scale=1"});
    ToolResult result = bench(lengths);
    ASSERT_EQ(result.exitCode, 0) << result.err;
    std::map<std::string, std::string> f = fields(result.out);
    EXPECT_EQ(f["sum_len"], "0");
    EXPECT_EQ(f["max_len"], "0");
    EXPECT_EQ(f["nonfinite"], "0");
    EXPECT_EQ(f["bytes"], std::to_string(decodeBytes(2, 0)));
    EXPECT_EQ(f["flops"], "0");
    EXPECT_EQ(f["pages"], "1"); // the pool is never empty
  }
}

// MTP: with fewer keys than queries the first queries see nothing.
TEST_F(MlaBenchTest, MtpQueriesWithoutKeys) {
  shape.qLen = 2;
  writeBytes(package, decodePackageBytes(shape));
  ToolResult result =
      bench({"--device=host", "--seq-lens", writeLengths("l.npy", {0, 1, 2}),
             "--iters=1", "--warmup=0", "--scale=1"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  std::map<std::string, std::string> f = fields(result.out);
  EXPECT_EQ(f["q_len"], "2");
  EXPECT_EQ(f["nonfinite"], "0");
  EXPECT_EQ(f["bytes"], std::to_string(2 * (3 * 40 + 3 * 2 * 4 * (40 + 32))));
  EXPECT_EQ(f["flops"], std::to_string(2 * 2 * 4 * 3 * 72));
}

// Prefill over ragged lengths with an empty request: T = sum(len).
TEST_F(MlaBenchTest, PrefillSeqLens) {
  PrefillShape prefill; // bf16, H 2, Dqk 24, Dv 16, causal
  writeBytes(package, kindPackageBytes(prefillManifest(prefill)));
  ToolResult result =
      bench({"--device=host", "--seq-lens", writeLengths("l.npy", {3, 0, 17}),
             "--iters=1", "--warmup=0", "--scale=default"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  std::map<std::string, std::string> f = fields(result.out);
  EXPECT_EQ(f["batch"], "3");
  EXPECT_EQ(f["sum_len"], "20");
  EXPECT_EQ(f["q_len"], "17");
  EXPECT_EQ(f["min_len"], "0");
  EXPECT_EQ(f["nonfinite"], "0");
  // q, k, v and o in bf16, lse in f32; causal: half of 2 H sum(L^2) (Dqk +
  // Dv).
  EXPECT_EQ(f["bytes"], std::to_string(2 * 20 * 2 * (2 * 24 + 16) +
                                       2 * 20 * 2 * 16 + 4 * 20 * 2));
  EXPECT_EQ(f["flops"], std::to_string(2 * 2 * (9 + 289) * (24 + 16) / 2));
}

TEST_F(MlaBenchTest, LengthErrors) {
  std::vector<std::string> host = {"--device=host", "--scale=1"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), host.begin(), host.end());
    return args;
  };
  expectFailure(with({"--batch=2", "--ragged=5:2", "--seed=1"}),
                "--ragged '5:2': MIN 5 is greater than MAX 2");
  expectFailure(with({"--batch=2", "--ragged", "x", "--seed=1"}),
                "--ragged 'x' is not MIN:MAX (two integers in [0, "
                "2147483647])");
  expectFailure(with({"--batch=2", "--ragged=1:-3", "--seed=1"}),
                "--ragged '1:-3' is not MIN:MAX (two integers in [0, "
                "2147483647])");
  expectFailure(with({"--batch=2", "--ragged=1:2147483648", "--seed=1"}),
                "--ragged '1:2147483648' is not MIN:MAX (two integers in [0, "
                "2147483647])");
  expectFailure(with({"--batch=2", "--ragged=1:4"}),
                "--ragged needs --seed N (the seed of the lengths' "
                "generator; see --help)");
  expectFailure(with({"--ragged=1:4", "--seed=1"}),
                "missing required option --batch");
  expectFailure(with({"--batch=2"}),
                "missing required option --seq-len (or --ragged MIN:MAX "
                "--seed N, or --seq-lens FILE.npy)");
  expectFailure(with({"--batch=2", "--seq-len=4", "--ragged=1:4", "--seed=1"}),
                "--seq-len and --ragged conflict (the lengths come from one "
                "of --seq-len L, --ragged MIN:MAX or --seq-lens FILE.npy)");
  std::string lens = writeLengths("lens.npy", {1, 2});
  expectFailure(with({"--ragged=1:4", "--seed=1", "--seq-lens", lens}),
                "--ragged and --seq-lens conflict (the lengths come from one "
                "of --seq-len L, --ragged MIN:MAX or --seq-lens FILE.npy)");
  expectFailure(with({"--batch=2", "--seq-lens", lens}),
                "--batch and --seq-lens conflict (the file gives the batch: "
                "one length per request)");
  expectFailure(with({"--seq-lens", writeLengths("neg.npy", {4, 0, -1})}),
                "--seq-lens " + dir.file("neg.npy") +
                    ": seq_lens[2] = -1 is negative");
  expectFailure(with({"--seq-lens",
                      writeLengths("wide.npy", {1, 4294967296}, DType::I64)}),
                "--seq-lens " + dir.file("wide.npy") +
                    ": element [1] = 4294967296 is outside the int32 range "
                    "[-2147483648, 2147483647]");
  // 17 requests of 2^31 - 1 tokens: 17 x 2^27 pages of 16 tokens.
  expectFailure(
      with({"--seq-lens",
            writeLengths("long.npy", std::vector<int64_t>(17, INT32_MAX))}),
      "the lengths need 2281701376 pages of 16 tokens (the sum of ceil(len / "
      "page_size)), more than 2^31 - 1 (block_table entries are int32)");
  expectFailure(with({"--batch=1", "--seq-len=2147483648"}),
                "--seq-len '2147483648' is not an integer in [0, 2147483647]");
  Expected<HostTensor> matrix = HostTensor::allocate(DType::I32, {2, 2});
  ASSERT_TRUE(matrix.ok());
  std::memset(matrix->data(), 0, 16);
  ASSERT_TRUE(writeNpy(dir.file("matrix.npy"), matrix->view()).ok());
  expectFailure(with({"--seq-lens", dir.file("matrix.npy")}),
                "--seq-lens " + dir.file("matrix.npy") +
                    ": shape [2, 2], expected [B] (one length per request)");
  ToolResult missing = bench(with({"--seq-lens", dir.file("none.npy")}));
  EXPECT_EQ(missing.exitCode, 1);
  EXPECT_EQ(missing.err.rfind("mla-bench: error: --seq-lens " +
                                  dir.file("none.npy") + ": ",
                              0),
            0u)
      << missing.err;
}

TEST_F(MlaBenchTest, Errors) {
  expectFailure({"--device=host", "--seq-len=4", "--scale=1"},
                "missing required option --batch");
  expectFailure({"--device=host", "--batch=0", "--seq-len=4", "--scale=1"},
                "--batch '0' is not an integer in [1, 16777216]");
  expectFailure({"--device=host", "--batch=1", "--seq-len=4", "--fast"},
                "unknown option '--fast' (see --help)");
  expectFailure({"--device=host", "--batch=1", "--seq-len=4", "--scale=1",
                 "--ceiling-gbs=-1"},
                "--ceiling-gbs '-1' is not a positive number");
  expectFailure({"--device=host", "--batch=1", "--seq-len=4", "--scale=1",
                 "--page-size=8"},
                "--page-size 8 differs from the package's page_size 16");
  Expected<Device> cuda = Device::open("cuda");
  if (!cuda.ok())
    expectFailure({"--batch=1", "--seq-len=4", "--scale=1"},
                  cuda.status().message());
}

// No silent default: the scale is a number or, explicitly, "default".
TEST_F(MlaBenchTest, ScaleIsRequired) {
  expectFailure({"--device=host", "--batch=1", "--seq-len=4"},
                "missing required option --scale (the softmax scale: a "
                "number, or 'default' for 1/sqrt of the q.k length)");
  expectFailure({"--device=host", "--batch=1", "--seq-len=4", "--scale=abc"},
                "--scale 'abc' is not a finite, nonzero number");
  expectFailure({"--device=host", "--batch=1", "--seq-len=4", "--scale=inf"},
                "--scale 'inf' is not a finite, nonzero number");
  expectFailure({"--device=host", "--batch=1", "--seq-len=4", "--scale=0"},
                "--scale '0' is not a finite, nonzero number");
  ToolResult result = bench({"--device=host", "--batch=1", "--seq-len=4",
                             "--iters=1", "--warmup=0", "--scale=0.5"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_EQ(fields(result.out)["scale"], "0.5");
}

TEST_F(MlaBenchTest, OnlyDecodeAndPrefillKernels) {
  std::string manifest = decodeManifest(shape);
  manifest.replace(manifest.find("kernel decode"), 13, "kernel custom");
  ASSERT_TRUE(
      writePackage(package, manifest, {{"code.host-x86_64", testKernelCode()}})
          .ok());
  expectFailure({"--device=host", "--batch=1", "--seq-len=4", "--scale=1"},
                "mla-bench times decode and prefill kernels, this one is "
                "'custom'");
}
