//===- MlaRunTest.cpp - mla-run end to end --------------------------------===//
//
// Runs the mla-run executable on files written here: a decode package built
// around the reference kernel and .npy inputs. Checks outputs against the
// float64 reference, and that every error is one stderr line, exit code 1
// and no output file.
//
//===----------------------------------------------------------------------===//

#include "KindTestUtils.h"
#include "TestUtils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

class MlaRunTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::filesystem::create_directory(inputs);
    std::filesystem::create_directory(outputs);
    writeBytes(package, decodePackageBytes(shape));
    data = makeDecodeData(shape, {20, 0, 33}, 3, 77);
    // q goes in as float32 (exact), kv as float16; the kernel sees both
    // rounded to bf16, and so does the reference.
    HostTensor qF32 = convert(data.q, DType::F32);
    HostTensor kvF16 = convert(data.kv, DType::F16);
    data.kv = convert(kvF16, DType::BF16);
    write("q", qF32.view());
    write("kv", kvF16.view());
    write("block_table", data.blockTable.view());
    write("seq_lens", data.seqLens.view());
  }

  static HostTensor convert(const HostTensor &from, DType to) {
    HostTensor result = HostTensor::allocate(to, from.getShape()).take();
    EXPECT_TRUE(convertElements(from.data(), from.getDType(), result.data(), to,
                                from.numElements())
                    .ok());
    return result;
  }

  void write(const std::string &role, const TensorView &view) {
    Status status = writeNpy(inputs + "/" + role + ".npy", view);
    ASSERT_TRUE(status.ok()) << status.toString();
  }

  ToolResult run(const std::vector<std::string> &args) {
    return runTool(MLA_RUN_PATH, args);
  }

  /// The standard run's o.npy, asserted written; then rerun() after the
  /// caller breaks an output's path checks that a failed write keeps it.
  std::vector<uint8_t> firstO() {
    ToolResult first = run(standardArgs());
    EXPECT_EQ(first.exitCode, 0) << first.err;
    std::vector<uint8_t> o = readBytes(outputs + "/o.npy");
    EXPECT_FALSE(o.empty());
    return o;
  }
  /// The standard run with another scale (other results than firstO's).
  ToolResult rerun() {
    std::vector<std::string> args = standardArgs();
    args.back() = "0.5";
    return run(args);
  }

  std::vector<std::string> standardArgs() const {
    return {package,
            "--inputs",
            inputs,
            "--outputs",
            outputs,
            "--scale",
            std::to_string(data.scale)};
  }

  /// Runs with `args` and expects exactly "mla-run: error: MESSAGE\n" on
  /// stderr, exit code 1, nothing on stdout and no output file.
  void expectFailure(const std::vector<std::string> &args,
                     const std::string &message) {
    ToolResult result = run(args);
    EXPECT_EQ(result.exitCode, 1);
    EXPECT_EQ(result.err, "mla-run: error: " + message + "\n");
    EXPECT_EQ(result.out, "");
    EXPECT_TRUE(std::filesystem::is_empty(outputs)) << "outputs were written";
  }

  TempDir dir;
  std::string inputs = dir.file("in"), outputs = dir.file("out");
  std::string package = dir.file("decode.mlapkg");
  DecodeShape shape;
  DecodeData data;
};

} // namespace

TEST_F(MlaRunTest, RunsADecodePackage) {
  std::vector<std::string> args = standardArgs();
  std::filesystem::remove(outputs); // mla-run creates it
  args.push_back("--threads=3");
  args.push_back("--repeat=3");
  ToolResult result = run(args);
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_TRUE(std::regex_match(
      result.out,
      std::regex("kernel time: [0-9]+\\.[0-9]{3} ms \\(median of 3 runs\\)\n")))
      << result.out;

  Expected<HostTensor> o = readNpy(outputs + "/o.npy");
  Expected<HostTensor> lse = readNpy(outputs + "/lse.npy");
  ASSERT_TRUE(o.ok() && lse.ok());
  EXPECT_EQ(o->getDType(), DType::F32);
  EXPECT_EQ(o->getShape(), (std::vector<int64_t>{3, 1, 4, 32}));
  EXPECT_EQ(lse->getDType(), DType::F32);
  EXPECT_EQ(lse->getShape(), (std::vector<int64_t>{3, 1, 4}));
  Reference ref = referenceDecode(shape, data);
  for (size_t i = 0; i < ref.o.size(); ++i)
    ASSERT_NEAR(o->dataAs<float>()[i], ref.o[i], 1e-2) << i;
  for (size_t i = 0; i < ref.lse.size(); ++i) {
    if (std::isinf(ref.lse[i]))
      EXPECT_TRUE(std::isinf(lse->dataAs<float>()[i]));
    else
      ASSERT_NEAR(lse->dataAs<float>()[i], ref.lse[i], 1e-4) << i;
  }
}

TEST_F(MlaRunTest, Help) {
  ToolResult result = run({"--help"});
  EXPECT_EQ(result.exitCode, 0);
  for (const char *option : {"--inputs",
                             "--outputs",
                             "--scale",
                             "--device",
                             "--threads",
                             "--repeat",
                             "q.npy",
                             "kv.npy",
                             "block_table.npy",
                             "seq_lens.npy",
                             "o.npy",
                             "lse.npy",
                             "k.npy",
                             "v.npy",
                             "cu_seqlens_q.npy",
                             "cu_seqlens_k.npy",
                             "o_parts.npy",
                             "lse_parts.npy",
                             "kv_new.npy",
                             "slot_mapping.npy"})
    EXPECT_NE(result.out.find(option), std::string::npos) << option;
}

TEST_F(MlaRunTest, MissingInputFile) {
  std::filesystem::remove(inputs + "/seq_lens.npy");
  expectFailure(standardArgs(), inputs + "/seq_lens.npy: cannot open: No such "
                                         "file or directory");
}

TEST_F(MlaRunTest, BlockTableEntryOutsideThePool) {
  data.blockTable.dataAs<int32_t>()[3 * 2 + 2] = 999;
  write("block_table", data.blockTable.view());
  expectFailure(standardArgs(), "block_table[2][2] = 999 is outside the page "
                                "pool (kv has 9 pages)");
}

TEST_F(MlaRunTest, LengthBeyondCapacity) {
  data.seqLens.dataAs<int32_t>()[1] = 49;
  write("seq_lens", data.seqLens.view());
  expectFailure(standardArgs(), "seq_lens[1] = 49 exceeds the block table's "
                                "capacity (3 pages x 16 = 48 tokens)");
}

TEST_F(MlaRunTest, TruncatedPackage) {
  std::vector<uint8_t> bytes = readBytes(package);
  size_t total = bytes.size();
  bytes.resize(total - 100);
  writeBytes(package, bytes);
  size_t codeSize = testKernelCode().size();
  expectFailure(standardArgs(),
                package +
                    ": package truncated: section 'code.host-x86_64' "
                    "needs " +
                    std::to_string(codeSize) + " bytes, " +
                    std::to_string(codeSize - 92) + " remain");
}

TEST_F(MlaRunTest, CorruptedPackage) {
  std::vector<uint8_t> bytes = readBytes(package);
  bytes[bytes.size() / 2] ^= 1;
  writeBytes(package, bytes);
  expectFailure(standardArgs(),
                package + ": package corrupted: checksum mismatch");
}

TEST_F(MlaRunTest, WrongShape) {
  HostTensor q = HostTensor::allocate(DType::F32, {3, 1, 4, 32}).take();
  write("q", q.view());
  expectFailure(standardArgs(), "q: dim 3 is 32, expected 40");
}

TEST_F(MlaRunTest, WrongInputTypes) {
  HostTensor q = HostTensor::allocate(DType::I32, {3, 1, 4, 40}).take();
  write("q", q.view());
  expectFailure(standardArgs(),
                inputs + "/q.npy: expected floating-point data (float64, "
                         "float32 or float16) for bf16, got int32");
  write("q", convert(data.q, DType::F32).view());
  HostTensor lens = HostTensor::allocate(DType::F32, {3}).take();
  write("seq_lens", lens.view());
  expectFailure(standardArgs(), inputs + "/seq_lens.npy: expected integer "
                                         "data (int64 or int32) for i32, got "
                                         "float32");
}

// numpy's default dtypes: float64 q (exact in bf16, so the reference is
// unchanged), int64 block_table and seq_lens.
TEST_F(MlaRunTest, AcceptsNumpyDefaultTypes) {
  writeF64Npy(inputs + "/q.npy", data.q);
  write("block_table", convert(data.blockTable, DType::I64).view());
  write("seq_lens", convert(data.seqLens, DType::I64).view());
  ToolResult result = run(standardArgs());
  ASSERT_EQ(result.exitCode, 0) << result.err;
  Expected<HostTensor> o = readNpy(outputs + "/o.npy");
  ASSERT_TRUE(o.ok()) << o.status().toString();
  Reference ref = referenceDecode(shape, data);
  for (size_t i = 0; i < ref.o.size(); ++i)
    ASSERT_NEAR(o->dataAs<float>()[i], ref.o[i], 1e-2) << i;
}

TEST_F(MlaRunTest, Int64InputOutsideTheInt32Range) {
  HostTensor lens = convert(data.seqLens, DType::I64);
  lens.dataAs<int64_t>()[1] = int64_t{1} << 32;
  write("seq_lens", lens.view());
  expectFailure(standardArgs(),
                inputs + "/seq_lens.npy: element [1] = 4294967296 is outside "
                         "the int32 range [-2147483648, 2147483647]");
}

TEST_F(MlaRunTest, FortranOrderInput) {
  std::vector<uint8_t> bytes = readBytes(inputs + "/seq_lens.npy");
  std::string text(bytes.begin(), bytes.end());
  text.replace(text.find("False"), 5, "True ");
  writeBytes(inputs + "/seq_lens.npy",
             std::vector<uint8_t>(text.begin(), text.end()));
  expectFailure(standardArgs(),
                inputs + "/seq_lens.npy: Fortran-order arrays are not "
                         "supported (save the array in C order)");
}

TEST_F(MlaRunTest, AFailedWriteKeepsThePreviousResults) {
  std::vector<uint8_t> oldO = firstO();
  ASSERT_FALSE(HasFailure());
  // The second output's partial file cannot be written: the run fails
  // after o's was, and neither the old o.npy nor a partial file is lost
  // or left.
  std::filesystem::create_directory(outputs + "/.lse.npy.partial");
  ToolResult second = rerun();
  EXPECT_NE(second.exitCode, 0);
  EXPECT_NE(second.err.find(".lse.npy.partial"), std::string::npos)
      << second.err;
  EXPECT_EQ(readBytes(outputs + "/o.npy"), oldO);
  EXPECT_FALSE(std::filesystem::exists(outputs + "/.o.npy.partial"));
  std::filesystem::remove(outputs + "/.lse.npy.partial");
}

TEST_F(MlaRunTest, AnOutputThatIsADirectoryKeepsThePreviousResults) {
  std::vector<uint8_t> oldO = firstO();
  ASSERT_FALSE(HasFailure());
  // lse.npy is a directory: every partial file is written, but the run
  // fails before o.npy is renamed into place (it used to leave a new
  // o.npy beside the failure).
  std::filesystem::remove(outputs + "/lse.npy");
  std::filesystem::create_directories(outputs + "/lse.npy/x");
  ToolResult second = rerun();
  EXPECT_NE(second.exitCode, 0);
  EXPECT_NE(second.err.find("lse.npy: cannot write: Is a directory"),
            std::string::npos)
      << second.err;
  EXPECT_EQ(readBytes(outputs + "/o.npy"), oldO);
  EXPECT_FALSE(std::filesystem::exists(outputs + "/.o.npy.partial"));
  EXPECT_FALSE(std::filesystem::exists(outputs + "/.lse.npy.partial"));
  std::filesystem::remove_all(outputs + "/lse.npy");
}

TEST_F(MlaRunTest, SubnormalScaleIsFinite) {
  // 1e-45 underflows to float's smallest subnormal: a finite scale.
  std::vector<std::string> args = standardArgs();
  args.back() = "1e-45";
  ToolResult result = run(args);
  EXPECT_EQ(result.exitCode, 0) << result.err;
  EXPECT_EQ(result.err, "");
}

TEST_F(MlaRunTest, CommandLineErrors) {
  std::vector<std::string> args = standardArgs();
  args.push_back("--fast");
  expectFailure(args, "unknown option '--fast' (see --help)");

  args = standardArgs();
  args.resize(args.size() - 2);
  expectFailure(args, "missing required option --scale (the softmax scale of "
                      "the decode kernel)");

  args = standardArgs();
  args.erase(args.begin());
  expectFailure(args, "missing the package argument (see --help)");

  args = standardArgs();
  args.back() = "0.1x";
  expectFailure(args, "--scale '0.1x' is not a number");

  args = standardArgs();
  args.back() = "1e39";
  expectFailure(args, "--scale '1e39' is beyond the float32 range (the "
                      "scale is a float32)");

  args = standardArgs();
  args.back() = "nan";
  expectFailure(args, "--scale 'nan' is not a finite number");

  args = standardArgs();
  args.back() = "1e-50";
  expectFailure(args, "--scale '1e-50' underflows to 0 as a float32 (the "
                      "scale is a float32)");

  // 0 is not a default scale either: the kernel's checks refuse it.
  args = standardArgs();
  args.back() = "0";
  expectFailure(args, "scale: 0 is not a softmax scale (every score would be "
                      "0); there is no default: pass the scale the model "
                      "uses, e.g. 1/sqrt of the q.k length");

  args = standardArgs();
  args.push_back("--threads=0");
  expectFailure(args, "--threads '0' is not an integer in [1, 1024]");

  args = standardArgs();
  args.push_back("--repeat");
  expectFailure(args, "option --repeat needs a value");

  args = standardArgs();
  args.push_back("--device=gfx942");
  expectFailure(args,
                "device 'gfx942' is not available in this build "
                "(available: host, cuda, cuda:N, hip, hip:N, emu, emu:reverse, "
                "emu:random[:SEED], emu:check-orders[:SEED], auto)");
}

TEST_F(MlaRunTest, CudaDeviceWithoutAGpuIsOneLineError) {
  Expected<Device> cuda = Device::open("cuda");
  if (cuda.ok())
    GTEST_SKIP() << "this machine has a CUDA device";
  std::vector<std::string> args = standardArgs();
  args.push_back("--device=cuda");
  expectFailure(args, cuda.status().message());
  args.back() = "--device=cuda:3";
  expectFailure(args, Device::open("cuda:3").status().message());
}

TEST_F(MlaRunTest, HipDeviceWithoutAGpuIsOneLineError) {
  Expected<Device> hip = Device::open("hip");
  if (hip.ok())
    GTEST_SKIP() << "this machine has an AMD GPU";
  std::vector<std::string> args = standardArgs();
  args.push_back("--device=hip");
  expectFailure(args, hip.status().message());
  args.back() = "--device=hip:2";
  expectFailure(args, Device::open("hip:2").status().message());
}

TEST_F(MlaRunTest, AutoDeviceFallsBackToTheHost) {
  if (Device::open("cuda").ok())
    GTEST_SKIP() << "this machine has a CUDA device";
  if (Device::open("hip").ok())
    GTEST_SKIP() << "this machine has an AMD GPU";
  std::vector<std::string> args = standardArgs();
  args.push_back("--device=auto");
  ToolResult result = run(args);
  ASSERT_EQ(result.exitCode, 0) << result.err;
  Expected<HostTensor> o = readNpy(outputs + "/o.npy");
  ASSERT_TRUE(o.ok()) << o.status().toString();
  Reference ref = referenceDecode(shape, data);
  const float *values = o->dataAs<float>();
  for (size_t i = 0; i < ref.o.size(); ++i)
    ASSERT_NEAR(values[i], ref.o[i], 1e-2) << "o element " << i;
}

// ---- prefill, merge and append_kv packages ------------------------------

namespace {

/// mla-run on a package of the reference kind kernels (KindTestUtils.h).
class MlaRunKindTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::filesystem::create_directory(inputs);
    std::filesystem::create_directory(outputs);
  }

  void writePackage(const std::string &manifest) {
    writeBytes(package, kindPackageBytes(manifest));
  }

  /// Writes `tensor` as DIR/role.npy, floats as float32.
  void write(const std::string &role, const HostTensor &tensor) {
    HostTensor file = isFloatingPoint(tensor.getDType())
                          ? converted(tensor, DType::F32)
                          : converted(tensor, tensor.getDType());
    Status status = writeNpy(inputs + "/" + role + ".npy", file.view());
    ASSERT_TRUE(status.ok()) << status.toString();
  }

  std::vector<std::string> baseArgs() const {
    return {package, "--inputs", inputs, "--outputs", outputs};
  }

  /// Runs and expects success with the one stdout line.
  void expectSuccess(const std::vector<std::string> &args) {
    ToolResult result = runTool(MLA_RUN_PATH, args);
    ASSERT_EQ(result.exitCode, 0) << result.err;
    EXPECT_EQ(result.err, "");
    EXPECT_TRUE(std::regex_match(
        result.out,
        std::regex("kernel time: [0-9]+\\.[0-9]{3} ms \\(median of [0-9]+ "
                   "runs?\\)\n")))
        << result.out;
  }

  void expectFailure(const std::vector<std::string> &args,
                     const std::string &message) {
    ToolResult result = runTool(MLA_RUN_PATH, args);
    EXPECT_EQ(result.exitCode, 1);
    EXPECT_EQ(result.err, "mla-run: error: " + message + "\n");
    EXPECT_EQ(result.out, "");
    EXPECT_TRUE(std::filesystem::is_empty(outputs)) << "outputs were written";
  }

  HostTensor output(const std::string &role, std::vector<int64_t> shape) {
    Expected<HostTensor> tensor = readNpy(outputs + "/" + role + ".npy");
    EXPECT_TRUE(tensor.ok()) << tensor.status().toString();
    if (!tensor.ok())
      return HostTensor();
    EXPECT_EQ(tensor->getDType(), DType::F32) << role;
    EXPECT_EQ(tensor->getShape(), shape) << role;
    return tensor.take();
  }

  static void expectNear(const HostTensor &actual,
                         const std::vector<double> &expected,
                         double tolerance) {
    ASSERT_EQ(actual.numElements(), static_cast<int64_t>(expected.size()));
    const float *values = actual.dataAs<float>();
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_FALSE(std::isnan(values[i])) << i;
      if (std::isinf(expected[i]))
        ASSERT_EQ(values[i], expected[i]) << i;
      else
        ASSERT_NEAR(values[i], expected[i], tolerance) << i;
    }
  }

  TempDir dir;
  std::string inputs = dir.file("in"), outputs = dir.file("out");
  std::string package = dir.file("kernel.mlapkg");
};

class MlaRunPrefillTest : public MlaRunKindTest {
protected:
  void SetUp() override {
    MlaRunKindTest::SetUp();
    writePackage(prefillManifest(shape));
    // More keys than queries, an empty request, more queries than keys.
    data = makePrefillData(shape, {5, 0, 12, 4}, {9, 3, 12, 2}, 31);
    write("q", data.q);
    write("k", data.k);
    write("v", data.v);
    write("cu_seqlens_q", data.cuSeqlensQ);
    write("cu_seqlens_k", data.cuSeqlensK);
  }

  std::vector<std::string> standardArgs() const {
    std::vector<std::string> args = baseArgs();
    args.push_back("--scale=" + std::to_string(data.scale));
    return args;
  }

  PrefillShape shape; // bf16, causal, 2 heads, 24 / 16
  PrefillData data;
};

} // namespace

TEST_F(MlaRunPrefillTest, RunsAPrefillPackage) {
  std::vector<std::string> args = standardArgs();
  args.push_back("--repeat=2");
  expectSuccess(args);
  // The scale went through the command line's text: use what it parsed to.
  data.scale = std::stof(std::to_string(data.scale));
  KindReference ref = referencePrefill(shape, data);
  expectNear(output("o", {21, 2, 16}), ref.o, 1e-2);
  expectNear(output("lse", {2, 21}), ref.lse, 1e-4);
}

TEST_F(MlaRunPrefillTest, ScaleIsRequired) {
  expectFailure(baseArgs(), "missing required option --scale (the softmax "
                            "scale of the prefill kernel)");
}

TEST_F(MlaRunPrefillTest, MissingInputFile) {
  std::filesystem::remove(inputs + "/cu_seqlens_k.npy");
  expectFailure(standardArgs(), inputs + "/cu_seqlens_k.npy: cannot open: No "
                                         "such file or directory");
}

TEST_F(MlaRunPrefillTest, OffsetsAreChecked) {
  data.cuSeqlensK.dataAs<int32_t>()[4] = 25; // Tk is 26
  write("cu_seqlens_k", data.cuSeqlensK);
  expectFailure(standardArgs(), "cu_seqlens_k[4] = 25, expected 26 (the last "
                                "offset is the number of key rows, k dim 0)");
}

TEST_F(MlaRunPrefillTest, KeyAndValueRowsDiffer) {
  HostTensor v = HostTensor::allocate(DType::F32, {25, 2, 16}).take();
  write("v", v);
  expectFailure(standardArgs(), "v: dim 0 is 25, expected 26 (key rows, k "
                                "dim 0)");
}

TEST_F(MlaRunPrefillTest, Int64OffsetsAreConverted) {
  write("cu_seqlens_q", converted(data.cuSeqlensQ, DType::I64));
  write("cu_seqlens_k", converted(data.cuSeqlensK, DType::I64));
  expectSuccess(standardArgs());
  data.scale = std::stof(std::to_string(data.scale));
  KindReference ref = referencePrefill(shape, data);
  expectNear(output("o", {21, 2, 16}), ref.o, 1e-2);
  HostTensor far = converted(data.cuSeqlensQ, DType::I64);
  far.dataAs<int64_t>()[4] = -(int64_t{1} << 40);
  write("cu_seqlens_q", far);
  std::filesystem::remove_all(outputs);
  std::filesystem::create_directory(outputs);
  expectFailure(standardArgs(),
                inputs + "/cu_seqlens_q.npy: element [4] = -1099511627776 "
                         "is outside the int32 range [-2147483648, "
                         "2147483647]");
}

namespace {

class MlaRunMergeTest : public MlaRunKindTest {
protected:
  void SetUp() override {
    MlaRunKindTest::SetUp();
    writePackage(mergeManifest(shape));
    data = makeMergeData(shape, 9, 12);
    write("o_parts", data.oParts);
    write("lse_parts", data.lseParts);
  }

  MergeShape shape; // bf16 o, 2 heads, v_dim 16, 3 parts
  MergeData data;
};

} // namespace

TEST_F(MlaRunMergeTest, RunsAMergePackageWithoutScale) {
  expectSuccess(baseArgs());
  KindReference ref = referenceMerge(shape, data);
  expectNear(output("o", {9, 2, 16}), ref.o, 1e-2);
  expectNear(output("lse", {2, 9}), ref.lse, 1e-5);
}

TEST_F(MlaRunMergeTest, ScaleIsRejected) {
  std::vector<std::string> args = baseArgs();
  args.push_back("--scale=0.5");
  expectFailure(args, "--scale does not apply to a merge kernel (it has no "
                      "scale argument)");
}

TEST_F(MlaRunMergeTest, PartsMustAgreeOnRows) {
  HostTensor lse = HostTensor::allocate(DType::F32, {3, 2, 8}).take();
  write("lse_parts", lse);
  expectFailure(baseArgs(), "lse_parts: dim 2 is 8, expected 9 (query rows, "
                            "o_parts dim 1)");
}

namespace {

class MlaRunAppendKvTest : public MlaRunKindTest {
protected:
  void SetUp() override {
    MlaRunKindTest::SetUp();
    writePackage(appendKvManifest(shape));
    data = makeAppendKvData(shape, {5, -1, 0, 22, 13}, 6, 21);
    write("kv_new", data.kvNew);
    write("slot_mapping", data.slotMapping);
    write("kv", data.kv);
  }

  AppendKvShape shape; // bf16, 24 + 8, page size 4
  AppendKvData data;
};

} // namespace

TEST_F(MlaRunAppendKvTest, WritesTheUpdatedCache) {
  expectSuccess(baseArgs());
  HostTensor kv = output("kv", {6, 4, 32});
  std::vector<float> expected = referenceAppendKv(data);
  ASSERT_EQ(kv.numElements(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(kv.dataAs<float>()[i], expected[i]) << i;
  // Only kv.npy is written; the input file is left alone.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(outputs),
                          std::filesystem::directory_iterator()),
            1);
  Expected<HostTensor> input = readNpy(inputs + "/kv.npy");
  ASSERT_TRUE(input.ok());
  EXPECT_EQ(toFloats(*input), toFloats(data.kv));
}

TEST_F(MlaRunAppendKvTest, SlotOutsideThePool) {
  data.slotMapping.dataAs<int32_t>()[3] = 24;
  write("slot_mapping", data.slotMapping);
  expectFailure(baseArgs(), "slot_mapping[3] = 24 is outside the page pool "
                            "(kv has 6 pages x 4 = 24 slots)");
}

TEST_F(MlaRunAppendKvTest, ScaleIsRejected) {
  std::vector<std::string> args = baseArgs();
  args.push_back("--scale=1");
  expectFailure(args, "--scale does not apply to a append_kv kernel (it has "
                      "no scale argument)");
}

TEST_F(MlaRunKindTest, PackageWithoutATargetForTheHost) {
  std::string manifest = mergeManifest(MergeShape());
  std::string hostTarget = "target host-x86_64 code.host-x86_64";
  manifest.replace(manifest.find(hostTarget), hostTarget.size(),
                   "target gfx942 code.gfx942");
  Expected<std::vector<uint8_t>> bytes =
      encodePackage(manifest, {{"code.gfx942", {7}}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  writeBytes(package, *bytes);
  MergeData data = makeMergeData(MergeShape(), 2, 1);
  write("o_parts", data.oParts);
  write("lse_parts", data.lseParts);
  expectFailure(baseArgs(), "the package has no target for device 'host' "
                            "(its targets: gfx942)");
}
