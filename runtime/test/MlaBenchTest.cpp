//===- MlaBenchTest.cpp - mla-bench on the host device --------------------===//

#include "TestUtils.h"

#include <gtest/gtest.h>

#include <fstream>
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

TEST_F(MlaBenchTest, RaggedLengthsAndCsv) {
  std::string csv = dir.file("bench.csv");
  for (int i = 0; i < 2; ++i) {
    ToolResult result =
        bench({"--device=host", "--batch=8", "--seq-len=40", "--ragged",
               "--iters=2", "--warmup=0", "--csv", csv, "--seed=7",
               "--ceiling-gbs=10", "--ceiling-tflops=0.5", "--scale", "0.125"});
    ASSERT_EQ(result.exitCode, 0) << result.err;
    std::map<std::string, std::string> f = fields(result.out);
    EXPECT_EQ(f["ragged"], "1");
    EXPECT_EQ(f["scale"], "0.125");
    int64_t sum = std::stoll(f["sum_len"]);
    EXPECT_GE(sum, 8 * 20);
    EXPECT_LE(sum, 8 * 40);
    EXPECT_NEAR(std::stod(f["bw_frac"]), std::stod(f["gbs"]) / 10, 0.006);
  }
  std::ifstream in(csv);
  std::string header, row1, row2, extra;
  std::getline(in, header);
  std::getline(in, row1);
  std::getline(in, row2);
  EXPECT_FALSE(std::getline(in, extra));
  EXPECT_EQ(header, "package,device,dtype,batch,seq_len,ragged,sum_len,q_len,"
                    "heads,page_size,scale,warmup,iters,rotate,median_us,"
                    "min_us,"
                    "max_us,gbs,tflops,bw_frac,flop_frac,nonfinite");
  EXPECT_EQ(row1.rfind("decode.mlapkg,host,bf16,8,40,1,", 0), 0u) << row1;
  // Same seed, same lengths.
  EXPECT_EQ(row1.substr(0, 40), row2.substr(0, 40));
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
                "--scale 'abc' is not a finite number");
  expectFailure({"--device=host", "--batch=1", "--seq-len=4", "--scale=inf"},
                "--scale 'inf' is not a finite number");
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
