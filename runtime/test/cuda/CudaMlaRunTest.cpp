//===- CudaMlaRunTest.cpp - mla-run --device=cuda on the fake driver ------===//
//
// mla-run with MLA_CUDA_DRIVER pointing at the fake driver, on a decode
// package whose sm_80 entry does nothing: inputs are uploaded and validated
// from their host copies, the workspace is reserved, outputs (zeroed on the
// device) come back and are written.
//
//===----------------------------------------------------------------------===//

#include "../KindTestUtils.h"
#include "CudaTestUtils.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

class CudaMlaRunTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string manifest = sm80Manifest(decodeManifest(shape));
    Expected<Manifest> parsed = parseManifest(manifest);
    ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
    std::string ptx = noopTargetPtx(*parsed, parsed->targets[0]);
    Status status = writePackage(package, manifest,
                                 {{"code.sm_80", {ptx.begin(), ptx.end()}}});
    ASSERT_TRUE(status.ok()) << status.toString();
    std::filesystem::create_directory(inputs);
    data = makeDecodeData(shape, {20, 0, 33}, 3, 77);
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

  ToolResult run(const std::string &device) {
    return runTool(MLA_RUN_PATH,
                   {package, "--inputs", inputs, "--outputs", outputs,
                    "--scale", "0.125", "--device=" + device, "--repeat=2"},
                   {std::string("MLA_CUDA_DRIVER=") + MLA_TEST_CUDA_DRIVER});
  }

  /// The outputs the do-nothing kernel leaves: the zeros mla-run put there.
  void expectZeroOutputs() {
    for (const char *role : {"o", "lse"}) {
      Expected<HostTensor> output =
          readNpy(outputs + "/" + std::string(role) + ".npy");
      ASSERT_TRUE(output.ok()) << output.status().toString();
      EXPECT_EQ(output->getShape()[0], 3);
      for (int64_t i = 0; i < output->numElements(); ++i)
        ASSERT_EQ(output->dataAs<float>()[i], 0.0f) << role << " " << i;
    }
  }

  TempDir dir;
  std::string inputs = dir.file("in"), outputs = dir.file("out");
  std::string package = dir.file("decode.mlapkg");
  DecodeShape shape;
  DecodeData data;
};

} // namespace

TEST_F(CudaMlaRunTest, RunsOnTheCudaDevice) {
  ToolResult result = run("cuda");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(result.out.rfind("kernel time: ", 0), 0u) << result.out;
  EXPECT_NE(result.out.find("(median of 2 runs)\n"), std::string::npos);
  expectZeroOutputs();
}

TEST_F(CudaMlaRunTest, AutoPicksCuda) {
  ToolResult result = run("auto");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  expectZeroOutputs(); // the host would have needed a host-x86_64 target
}

TEST_F(CudaMlaRunTest, ContentChecksUseTheHostInputs) {
  data.blockTable.dataAs<int32_t>()[2 * 3 + 1] = 99;
  write("block_table", data.blockTable.view());
  ToolResult result = run("cuda");
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.err, "mla-run: error: block_table[2][1] = 99 is outside "
                        "the page pool (kv has 9 pages)\n");
  EXPECT_FALSE(std::filesystem::exists(outputs));
}

TEST_F(CudaMlaRunTest, NoSuchDevice) {
  ToolResult result = run("cuda:2");
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.err,
            "mla-run: error: cuda: no CUDA device 2 (this machine has 1)\n");
}

TEST_F(CudaMlaRunTest, BenchOnTheCudaDevice) {
  std::string csv = dir.file("bench.csv");
  ToolResult result =
      runTool(MLA_BENCH_PATH,
              {package, "--device=cuda", "--batch", "5", "--seq-len", "40",
               "--iters=3", "--warmup=2", "--csv", csv, "--scale=default"},
              {std::string("MLA_CUDA_DRIVER=") + MLA_TEST_CUDA_DRIVER});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_EQ(result.out.rfind("mla-bench: package=decode.mlapkg device=cuda:0 "
                             "dtype=bf16 batch=5 seq_len=40 ragged=0 "
                             "sum_len=200 ",
                             0),
            0u)
      << result.out;
  // 3 x 60 MB of L2 over the copies' bytes, well within the fake's 8 GiB.
  EXPECT_NE(result.out.find(" nonfinite=0"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(csv));
}

// ---- prefill and append_kv on the fake driver -----------------------------

namespace {

/// `manifest` (a host package of KindTestUtils.h) retargeted to sm_80,
/// its launches doing nothing.
std::string noopKindPackage(const std::string &hostManifest,
                            const std::string &path) {
  std::string manifest = sm80Manifest(hostManifest);
  Expected<Manifest> parsed = parseManifest(manifest);
  EXPECT_TRUE(parsed.ok()) << parsed.status().toString();
  std::string ptx = noopTargetPtx(*parsed, parsed->targets[0]);
  Status status =
      writePackage(path, manifest, {{"code.sm_80", {ptx.begin(), ptx.end()}}});
  EXPECT_TRUE(status.ok()) << status.toString();
  return manifest;
}

class CudaMlaRunKindTest : public ::testing::Test {
protected:
  void SetUp() override { std::filesystem::create_directory(inputs); }

  void write(const std::string &role, const HostTensor &tensor) {
    HostTensor file = converted(tensor, isFloatingPoint(tensor.getDType())
                                            ? DType::F32
                                            : tensor.getDType());
    ASSERT_TRUE(writeNpy(inputs + "/" + role + ".npy", file.view()).ok());
  }

  ToolResult run(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {package,     "--inputs", inputs,
                                     "--outputs", outputs,    "--device=cuda"};
    args.insert(args.end(), extra.begin(), extra.end());
    return runTool(MLA_RUN_PATH, args,
                   {std::string("MLA_CUDA_DRIVER=") + MLA_TEST_CUDA_DRIVER});
  }

  TempDir dir;
  std::string inputs = dir.file("in"), outputs = dir.file("out");
  std::string package = dir.file("kernel.mlapkg");
};

} // namespace

TEST_F(CudaMlaRunKindTest, PrefillOffsetsCheckedFromTheHostInputs) {
  PrefillShape shape;
  noopKindPackage(prefillManifest(shape), package);
  PrefillData data = makePrefillData(shape, {4, 6}, {5, 6}, 3);
  for (auto [role, tensor] :
       {std::pair<const char *, const HostTensor *>{"q", &data.q},
        {"k", &data.k},
        {"v", &data.v},
        {"cu_seqlens_q", &data.cuSeqlensQ},
        {"cu_seqlens_k", &data.cuSeqlensK}})
    write(role, *tensor);
  ToolResult result = run({"--scale=0.5"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  // The do-nothing kernel leaves the zeroed outputs, sized [T,H,Dv], [H,T].
  Expected<HostTensor> o = readNpy(outputs + "/o.npy");
  Expected<HostTensor> lse = readNpy(outputs + "/lse.npy");
  ASSERT_TRUE(o.ok() && lse.ok());
  EXPECT_EQ(o->getShape(), (std::vector<int64_t>{10, 2, 16}));
  EXPECT_EQ(lse->getShape(), (std::vector<int64_t>{2, 10}));

  std::filesystem::remove_all(outputs);
  data.cuSeqlensQ.dataAs<int32_t>()[1] = 11;
  write("cu_seqlens_q", data.cuSeqlensQ);
  result = run({"--scale=0.5"});
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.err, "mla-run: error: cu_seqlens_q[2] = 10 is less than "
                        "cu_seqlens_q[1] = 11 (offsets must not decrease)\n");
  EXPECT_FALSE(std::filesystem::exists(outputs));
}

TEST_F(CudaMlaRunKindTest, AppendKvDownloadsTheCacheAndChecksSlots) {
  AppendKvShape shape;
  noopKindPackage(appendKvManifest(shape), package);
  AppendKvData data = makeAppendKvData(shape, {3, -1, 8}, 3, 5);
  write("kv_new", data.kvNew);
  write("slot_mapping", data.slotMapping);
  write("kv", data.kv);
  ToolResult result = run();
  ASSERT_EQ(result.exitCode, 0) << result.err;
  // The kernel did nothing: the pool comes back as it was uploaded.
  Expected<HostTensor> kv = readNpy(outputs + "/kv.npy");
  ASSERT_TRUE(kv.ok()) << kv.status().toString();
  EXPECT_EQ(kv->getDType(), DType::F32);
  EXPECT_EQ(toFloats(*kv), toFloats(data.kv));

  std::filesystem::remove_all(outputs);
  data.slotMapping.dataAs<int32_t>()[2] = 12;
  write("slot_mapping", data.slotMapping);
  result = run();
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.err, "mla-run: error: slot_mapping[2] = 12 is outside the "
                        "page pool (kv has 3 pages x 4 = 12 slots)\n");
  EXPECT_FALSE(std::filesystem::exists(outputs));
}
