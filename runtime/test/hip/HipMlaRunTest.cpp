//===- HipMlaRunTest.cpp - mla-run --device=hip on the fake runtime -------===//
//
// mla-run with MLA_HIP_LIBRARY pointing at the fake libamdhip64, on the
// checked-in gfx942 decode package: inputs are uploaded and validated from
// their host copies, the metadata is checked, the workspace reserved, the
// kernels launched (the fake does not execute them), outputs (zeroed on the
// device) come back and are written.
//
//===----------------------------------------------------------------------===//

#include "HipTestUtils.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

class HipMlaRunTest : public ::testing::Test {
protected:
  void SetUp() override {
    Status status = writePackage(package, fixtureManifest(),
                                 {{"code.gfx942", fixtureCodeObject()}});
    ASSERT_TRUE(status.ok()) << status.toString();
    std::filesystem::create_directory(inputs);
    data = makeDecodeData(shape, {20, 0, 100}, 2, 77);
    write("q", toF32(data.q).view());
    write("kv", toF32(data.kv).view());
    write("block_table", data.blockTable.view());
    write("seq_lens", data.seqLens.view());
  }

  static HostTensor toF32(const HostTensor &tensor) {
    HostTensor f32 = HostTensor::allocate(DType::F32, tensor.getShape()).take();
    EXPECT_TRUE(convertElements(tensor.data(), tensor.getDType(), f32.data(),
                                DType::F32, tensor.numElements())
                    .ok());
    return f32;
  }

  void write(const std::string &role, const TensorView &view) {
    ASSERT_TRUE(writeNpy(inputs + "/" + role + ".npy", view).ok());
  }

  ToolResult run(const std::string &device,
                 const std::string &library = MLA_TEST_HIP_LIBRARY) {
    return runTool(MLA_RUN_PATH,
                   {package, "--inputs", inputs, "--outputs", outputs,
                    "--scale", "0.125", "--device=" + device, "--repeat=2"},
                   {"MLA_HIP_LIBRARY=" + library,
                    "MLA_CUDA_DRIVER=" + dir.file("no-libcuda.so.1")});
  }

  void expectZeroOutputs() {
    for (const char *role : {"o", "lse"}) {
      Expected<HostTensor> output =
          readNpy(outputs + "/" + std::string(role) + ".npy");
      ASSERT_TRUE(output.ok()) << output.status().toString();
      EXPECT_EQ(output->getShape()[0], 3);
      EXPECT_EQ(output->getShape().back(), role[0] == 'o' ? 16 : 1);
      for (int64_t i = 0; i < output->numElements(); ++i)
        ASSERT_EQ(output->dataAs<float>()[i], 0.0f) << role << " " << i;
    }
  }

  TempDir dir;
  std::string inputs = dir.file("in"), outputs = dir.file("out");
  std::string package = dir.file("decode.mlapkg");
  DecodeShape shape = fixtureShape();
  DecodeData data;
};

} // namespace

TEST_F(HipMlaRunTest, RunsOnTheHipDevice) {
  ToolResult result = run("hip");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(result.out.rfind("kernel time: ", 0), 0u) << result.out;
  EXPECT_NE(result.out.find("(median of 2 runs)\n"), std::string::npos);
  expectZeroOutputs();
}

TEST_F(HipMlaRunTest, AutoPicksHipWithoutCuda) {
  ToolResult result = run("auto");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  expectZeroOutputs(); // the host would have needed a host-x86_64 target
}

TEST_F(HipMlaRunTest, ContentChecksUseTheHostInputs) {
  data.seqLens.dataAs<int32_t>()[1] = 129;
  write("seq_lens", data.seqLens.view());
  ToolResult result = run("hip:0");
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.err, "mla-run: error: seq_lens[1] = 129 exceeds the block "
                        "table's capacity (2 pages x 64 = 128 tokens)\n");
  EXPECT_FALSE(std::filesystem::exists(outputs));
}

TEST_F(HipMlaRunTest, OneLineErrors) {
  ToolResult result = run("hip:1");
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.err,
            "mla-run: error: hip: no AMD GPU 1 (this machine has 1)\n");
  std::string missing = dir.file("libamdhip64.so");
  result = run("hip", missing);
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.err, "mla-run: error: hip: " + missing +
                            " not found (no ROCm on this machine)\n");
  EXPECT_FALSE(std::filesystem::exists(outputs));
}

TEST_F(HipMlaRunTest, BenchOnTheHipDevice) {
  ToolResult result =
      runTool(MLA_BENCH_PATH,
              {package, "--device=hip", "--batch", "4", "--seq-len", "100",
               "--iters=3", "--warmup=1", "--rotate", "2", "--scale=default"},
              {std::string("MLA_HIP_LIBRARY=") + MLA_TEST_HIP_LIBRARY});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_EQ(result.out.rfind("mla-bench: package=decode.mlapkg device=hip:0 "
                             "dtype=bf16 batch=4 seq_len=100 ragged=0 "
                             "sum_len=400 ",
                             0),
            0u)
      << result.out;
}
