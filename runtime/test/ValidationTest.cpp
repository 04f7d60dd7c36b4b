//===- ValidationTest.cpp - Launch argument checks ------------------------===//
//
// One test per check: each breaks one argument of an otherwise valid decode
// launch and expects the exact message, and that nothing was launched.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

/// A bf16 decode kernel (4 heads, latent 32 + rope 8, page size 16) and valid
/// data: batch 4, block table 4 x 4 over a pool of 16 pages.
class ValidationTest : public ::testing::Test {
protected:
  void SetUp() override {
    Expected<Kernel> loaded =
        Device::open("host", {2})->loadKernel(decodePackage(shape));
    ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
    kernel = loaded.take();
    data = makeDecodeData(shape, {10, 64, 0, 33}, 4, 5);
    args = data.args();
    // A launch would overwrite lse; the tests check that it did not.
    std::fill_n(data.lse.dataAs<float>(), data.lse.numElements(), 42.0f);
  }

  /// Launches with `args` and expects InvalidArgument with `message`.
  void expectError(const std::string &message) {
    Status status = kernel->launchDecode(args);
    EXPECT_EQ(status.code(), ErrorCode::InvalidArgument);
    EXPECT_EQ(status.message(), message);
    expectNotLaunched();
  }

  void expectNotLaunched() {
    for (int64_t i = 0; i < data.lse.numElements(); ++i)
      ASSERT_EQ(data.lse.dataAs<float>()[i], 42.0f) << "a kernel ran";
  }

  std::vector<ArgValue> positional() const {
    return {
        args.q, args.kv, args.blockTable, args.seqLens, Scalar::f32(args.scale),
        args.o, args.lse};
  }

  int32_t &tableEntry(int64_t b, int64_t p) {
    return data.blockTable.dataAs<int32_t>()[b * 4 + p];
  }

  DecodeShape shape;
  std::optional<Kernel> kernel;
  DecodeData data;
  DecodeArgs args;
};

} // namespace

TEST_F(ValidationTest, ValidArgumentsLaunch) {
  Status status = kernel->launchDecode(args);
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_NE(data.lse.dataAs<float>()[0], 42.0f);
}

// No silent default: a DecodeArgs whose scale was never set is refused
// before anything runs, by launchDecode, bindDecode and workspaceBytes.
TEST_F(ValidationTest, ScaleMustBeSet) {
  EXPECT_TRUE(std::isnan(DecodeArgs().scale));
  args.scale = DecodeArgs().scale;
  const char *message = "scale: not set (DecodeArgs::scale starts as NaN, "
                        "not a default value: set the softmax scale the model "
                        "uses)";
  expectError(message);
  EXPECT_EQ(kernel->bindDecode(args).status().message(), message);
  EXPECT_EQ(kernel->workspaceBytes(args).status().message(), message);
}

TEST_F(ValidationTest, ScaleMustBeFinite) {
  args.scale = std::numeric_limits<float>::infinity();
  expectError("scale: inf is not a finite number (the softmax scale)");
  std::vector<ArgValue> nan = positional();
  nan[4] = Scalar::f32(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(kernel->launch(nan).message(),
            "scale: nan is not a finite number (the softmax scale)");
  expectNotLaunched();
}

// Nor is 0 a default: every score would be 0.
TEST_F(ValidationTest, ScaleMustNotBeZero) {
  args.scale = 0.0f;
  expectError("scale: 0 is not a softmax scale (every score would be 0); "
              "there is no default: pass the scale the model uses, e.g. "
              "1/sqrt of the q.k length");
  args.scale = -0.0f;
  EXPECT_FALSE(kernel->launchDecode(args).ok());
  expectNotLaunched();
}

TEST_F(ValidationTest, ArgumentCount) {
  std::vector<ArgValue> six = positional();
  six.pop_back();
  Status status = kernel->launch(six);
  EXPECT_EQ(status.message(), "expected 7 arguments, got 6");
  // The count is checked even when validation is off.
  status = kernel->launch(six, {/*validate=*/false});
  EXPECT_EQ(status.message(), "expected 7 arguments, got 6");
  expectNotLaunched();
}

TEST_F(ValidationTest, TensorDType) {
  HostTensor q = HostTensor::allocate(DType::F32, data.q.getShape()).take();
  args.q = q.view();
  expectError("q: expected dtype bf16, got f32");
}

TEST_F(ValidationTest, TensorRank) {
  args.q.shape = {4, 4, 40};
  expectError("q: expected rank 4, got 3");
}

TEST_F(ValidationTest, StaticDim) {
  args.q.shape[3] = 32;
  expectError("q: dim 3 is 32, expected 40");
}

TEST_F(ValidationTest, NegativeDim) {
  args.o.shape[0] = -1;
  expectError("o: dim 0 is -1 (negative)");
}

TEST_F(ValidationTest, NullData) {
  args.o.data = nullptr;
  expectError("o: data is null");
}

TEST_F(ValidationTest, ScalarGivenForTensor) {
  std::vector<ArgValue> all = positional();
  all[1] = Scalar::f32(1.0f);
  EXPECT_EQ(kernel->launch(all).message(),
            "kv: expected a tensor, got a scalar");
  expectNotLaunched();
}

TEST_F(ValidationTest, TensorGivenForScalar) {
  std::vector<ArgValue> all = positional();
  all[4] = args.lse;
  EXPECT_EQ(kernel->launch(all).message(),
            "scale: expected a scalar, got a tensor");
  expectNotLaunched();
}

TEST_F(ValidationTest, ScalarDType) {
  std::vector<ArgValue> all = positional();
  all[4] = Scalar::i32(1);
  EXPECT_EQ(kernel->launch(all).message(),
            "scale: expected dtype f32, got i32");
  expectNotLaunched();
}

TEST_F(ValidationTest, BlockTableBatch) {
  args.blockTable.shape[0] = 3;
  expectError("block_table: dim 0 is 3, expected 4 (the batch size, q dim 0)");
}

TEST_F(ValidationTest, SeqLensBatch) {
  args.seqLens.shape[0] = 2;
  expectError("seq_lens: dim 0 is 2, expected 4 (the batch size, q dim 0)");
}

TEST_F(ValidationTest, OutputBatch) {
  args.o.shape[0] = 5;
  expectError("o: dim 0 is 5, expected 4 (the batch size, q dim 0)");
}

TEST_F(ValidationTest, LseBatch) {
  args.lse.shape[0] = 1;
  expectError("lse: dim 0 is 1, expected 4 (the batch size, q dim 0)");
}

TEST_F(ValidationTest, EmptyPagePool) {
  args.kv.shape[0] = 0;
  expectError("kv: the page pool is empty (dim 0 is 0)");
}

TEST_F(ValidationTest, PageSize) {
  args.kv.shape[1] = 8;
  expectError("kv: dim 1 is 8, expected 16");
}

TEST_F(ValidationTest, BlockTableEntryOutsideThePool) {
  tableEntry(3, 2) = 912;
  expectError("block_table[3][2] = 912 is outside the page pool (kv has 16 "
              "pages)");
}

TEST_F(ValidationTest, NegativeBlockTableEntry) {
  tableEntry(1, 3) = -1;
  expectError("block_table[1][3] = -1 is outside the page pool (kv has 16 "
              "pages)");
}

TEST_F(ValidationTest, UnusedBlockTableEntriesAreNotChecked) {
  // Sequence 0 holds 10 tokens (page 0 only), sequence 2 none.
  tableEntry(0, 1) = 912;
  tableEntry(2, 0) = -1;
  Status status = kernel->launchDecode(args);
  EXPECT_TRUE(status.ok()) << status.toString();
}

TEST_F(ValidationTest, SeqLenBeyondCapacity) {
  data.seqLens.dataAs<int32_t>()[1] = 65;
  expectError("seq_lens[1] = 65 exceeds the block table's capacity (4 pages x "
              "16 = 64 tokens)");
}

TEST_F(ValidationTest, NegativeSeqLen) {
  data.seqLens.dataAs<int32_t>()[2] = -1;
  expectError("seq_lens[2] = -1 is negative");
}

TEST_F(ValidationTest, MissingRole) {
  std::map<std::string, ArgValue> byRole = {{"q", args.q},
                                            {"kv", args.kv},
                                            {"block_table", args.blockTable},
                                            {"seq_lens", args.seqLens},
                                            {"scale", Scalar::f32(1)},
                                            {"o", args.o}};
  EXPECT_EQ(kernel->launchByRole(byRole).message(),
            "missing argument for role 'lse'");
  byRole.emplace("lse", args.lse);
  byRole.emplace("bias", args.lse);
  EXPECT_EQ(kernel->launchByRole(byRole).message(),
            "unknown role 'bias' (kernel 'decode' has no such argument)");
  expectNotLaunched();
}

TEST_F(ValidationTest, ValidationCanBeTurnedOff) {
  // Lengths are content checks: skipped when validation is off (a valid
  // launch here, since the kernel only reads used entries).
  tableEntry(0, 1) = 912;
  EXPECT_TRUE(kernel->launchDecode(args, {/*validate=*/false}).ok());
}

namespace {

/// The validation test's kernel with `max-bytes` lines for its host target.
Kernel withMaxBytes(const DecodeShape &shape, const std::string &lines) {
  std::string manifest = decodeManifest(shape);
  manifest.insert(manifest.find("end-target"), lines);
  Expected<std::vector<uint8_t>> bytes =
      encodePackage(manifest, {{"code.host-x86_64", testKernelCode()}});
  EXPECT_TRUE(bytes.ok()) << bytes.status().toString();
  Expected<Kernel> kernel =
      Device::open("host", {1})
          ->loadKernel(*parsePackage(bytes->data(), bytes->size()));
  EXPECT_TRUE(kernel.ok()) << kernel.status().toString();
  return kernel.take();
}

} // namespace

TEST_F(ValidationTest, MaxBytesOfAnArgument) {
  // kv is [16 pages, 16, 40] bf16 = 20480 bytes.
  kernel = withMaxBytes(shape, "max-bytes 1 20479\n");
  expectError("kv: 20480 bytes exceed the 20479-byte limit of the "
              "host-x86_64 code object (32-bit buffer offsets)");
  EXPECT_EQ(kernel->validate(*kernel->bindDecode(args)).message(),
            "kv: 20480 bytes exceed the 20479-byte limit of the host-x86_64 "
            "code object (32-bit buffer offsets)");
  // Checked even when validation is off: past it the code would address the
  // wrong memory.
  Status status = kernel->launchDecode(args, {/*validate=*/false});
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument);
  expectNotLaunched();

  kernel = withMaxBytes(shape, "max-bytes 1 20480\n");
  Status ok = kernel->launchDecode(args);
  EXPECT_TRUE(ok.ok()) << ok.toString();
}

TEST_F(ValidationTest, MaxBytesOfAWorkspace) {
  // Workspace 8 is f32 [batch 4, 1, 4 heads, 3 splits] = 192 bytes.
  kernel = withMaxBytes(shape, "max-bytes 7 1000000\nmax-bytes 8 191\n");
  expectError("workspace 8: 192 bytes exceed the 191-byte limit of the "
              "host-x86_64 code object (32-bit buffer offsets)");
  kernel = withMaxBytes(shape, "max-bytes 8 192\n");
  EXPECT_TRUE(kernel->launchDecode(args).ok());
}

TEST(DynamicPageSizeValidationTest, ZeroPageSize) {
  DecodeShape shape;
  shape.pageSize = 0;
  Expected<Kernel> kernel =
      Device::open("host", {1})->loadKernel(decodePackage(shape));
  ASSERT_TRUE(kernel.ok());
  DecodeData data = makeDecodeData(shape, {0, 0}, 2, 1);
  DecodeArgs args = data.args();
  args.kv.shape[1] = 0;
  Status status = kernel->launchDecode(args);
  EXPECT_EQ(status.message(), "kv: the page size (dim 1) is 0");
}

TEST(GenericKindTest, LaunchesByRoleWithoutKindRules) {
  // A kind the runtime has no rules for gets the generic checks only.
  DecodeShape shape;
  std::string manifest = decodeManifest(shape);
  manifest.replace(manifest.find("kernel decode"), 13, "kernel custom");
  Expected<std::vector<uint8_t>> bytes =
      encodePackage(manifest, {{"code.host-x86_64", testKernelCode()}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  Expected<Kernel> kernel =
      Device::open("host", {1})
          ->loadKernel(*parsePackage(bytes->data(), bytes->size()));
  ASSERT_TRUE(kernel.ok());
  DecodeData data = makeDecodeData(shape, {7}, 1, 1);
  DecodeArgs a = data.args();

  Status status = kernel->launchDecode(a);
  EXPECT_EQ(status.code(), ErrorCode::Unsupported);
  EXPECT_EQ(status.message(),
            "launchDecode needs a 'decode' kernel, this one is 'custom'");
  status = kernel->launchByRole({{"q", a.q},
                                 {"kv", a.kv},
                                 {"block_table", a.blockTable},
                                 {"seq_lens", a.seqLens},
                                 {"scale", Scalar::f32(a.scale)},
                                 {"o", a.o},
                                 {"lse", a.lse}});
  EXPECT_TRUE(status.ok()) << status.toString();
}

namespace {

/// The validation test's decode kernel with '?' for every dim the header
/// fixes (q_len, heads, row sizes): the decode rules check them at launch.
class DynamicDimsValidationTest : public ValidationTest {
protected:
  void SetUp() override {
    ValidationTest::SetUp();
    std::string manifest = decodeManifest(shape);
    for (auto [from, to] :
         {std::pair<std::string, std::string>{"bf16 ?,1,4,40", "bf16 ?,?,?,?"},
          {"bf16 ?,16,40", "bf16 ?,16,?"},
          {"bf16 ?,1,4,32", "bf16 ?,?,?,?"},
          {"f32 ?,1,4\n", "f32 ?,?,?\n"}}) {
      ASSERT_NE(manifest.find(from), std::string::npos) << from;
      manifest.replace(manifest.find(from), from.size(), to);
    }
    Expected<std::vector<uint8_t>> bytes =
        encodePackage(manifest, {{"code.host-x86_64", testKernelCode()}});
    ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
    Expected<Kernel> loaded =
        Device::open("host", {1})
            ->loadKernel(*parsePackage(bytes->data(), bytes->size()));
    ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
    kernel = loaded.take();
  }
};

} // namespace

TEST_F(DynamicDimsValidationTest, ValidArgumentsLaunch) {
  Status status = kernel->launchDecode(args);
  ASSERT_TRUE(status.ok()) << status.toString();
}

TEST_F(DynamicDimsValidationTest, OutputQueryLength) {
  args.o.shape[1] = 2;
  expectError("o: dim 1 is 2, expected 1 (q_len, q dim 1)");
}

TEST_F(DynamicDimsValidationTest, LseHeads) {
  args.lse.shape[2] = 3;
  expectError("lse: dim 2 is 3, expected 4 (heads, q dim 2)");
}

TEST_F(DynamicDimsValidationTest, CacheRowSize) {
  args.kv.shape[2] = 36;
  expectError("kv: dim 2 is 36, expected 40 (the row size, q dim 3)");
}

TEST_F(DynamicDimsValidationTest, QueryRowSize) {
  args.q.shape[3] = 36;
  args.kv.shape[2] = 36;
  expectError("q: dim 3 is 36, expected 40 (latent_dim + rope_dim)");
}

TEST_F(DynamicDimsValidationTest, OutputLatentDim) {
  args.o.shape[3] = 16;
  expectError("o: dim 3 is 16, expected 32 (latent_dim)");
}

TEST_F(ValidationTest, ShapeTooLarge) {
  args.kv.shape[0] = INT64_MAX / 64;
  std::string message =
      "kv: shape " + shapeToString(args.kv.shape) + " is too large";
  expectError(message);
  // Checked even when validation is off: the runtime computes byte sizes.
  EXPECT_EQ(kernel->launchDecode(args, {/*validate=*/false}).message(),
            message);
  expectNotLaunched();
}

TEST_F(ValidationTest, WorkspaceTooLarge) {
  // Every tensor's size fits in an int64, workspace 7 (f32 [batch, 1, 4
  // heads, 3 splits, 32]) does not.
  int64_t batch = INT64_MAX / 1000;
  for (TensorView *t :
       {&args.q, &args.blockTable, &args.seqLens, &args.o, &args.lse})
    t->shape[0] = batch;
  Expected<size_t> bytes = kernel->workspaceBytes(args);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().message(), "workspace 7: shape " +
                                          shapeToString({batch, 1, 4, 3, 32}) +
                                          " is too large");
}
