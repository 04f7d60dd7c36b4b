//===- CApiTest.cpp - The C API (mla_runtime.h) ---------------------------===//
//
// Every function of mla_runtime.h, its results and its error paths (codes
// and messages), and that mla_last_error() is per thread. Decode runs the
// reference decode kernel; prefill, merge and append_kv run the f32
// stand-ins of KindTestKernels.cpp, checked against references here.
//
//===----------------------------------------------------------------------===//

#include "CApiTestUtils.h"
#include "TestUtils.h"

#include "mla/runtime/mla_runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {
/// A loaded reference decode kernel (bf16, 4 heads, 32 + 8, page 16).
class CApiDecodeTest : public ::testing::Test {
protected:
  void SetUp() override {
    shape.pageSize = 16;
    bytes = decodePackageBytes(shape);
    mla_device_options options{2};
    ASSERT_EQ(mla_device_open("host", &options, &device), MLA_OK)
        << lastError();
    ASSERT_EQ(mla_package_load_memory(bytes.data(), bytes.size(), &package),
              MLA_OK)
        << lastError();
    ASSERT_EQ(mla_kernel_load(device, package, nullptr, &kernel), MLA_OK)
        << lastError();
    data = makeDecodeData(shape, {5, 0, 40}, 4, 17);
  }
  void TearDown() override {
    mla_kernel_close(kernel);
    mla_package_close(package);
    mla_device_close(device);
  }

  DecodeShape shape;
  std::vector<uint8_t> bytes;
  mla_device *device = nullptr;
  mla_package *package = nullptr;
  mla_kernel *kernel = nullptr;
  DecodeData data;
};

} // namespace

//===----------------------------------------------------------------------===//
// Errors, versions, dtypes
//===----------------------------------------------------------------------===//

TEST(CApiTest, VersionsAndNames) {
  EXPECT_EQ(mla_version(), MLA_RUNTIME_VERSION_MAJOR * 10000 +
                               MLA_RUNTIME_VERSION_MINOR * 100 +
                               MLA_RUNTIME_VERSION_PATCH);
  EXPECT_STREQ(mla_version_string(), "1.1.0");
  EXPECT_EQ(mla_package_format_version(), kPackageFormatVersion);
  EXPECT_STREQ(mla_status_name(MLA_OK), "ok");
  EXPECT_STREQ(mla_status_name(MLA_ERROR_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(mla_status_name(MLA_ERROR_INVALID_PACKAGE), "invalid package");
  EXPECT_STREQ(mla_status_name(MLA_ERROR_INVALID_MANIFEST), "invalid manifest");
  EXPECT_STREQ(mla_status_name(MLA_ERROR_UNSUPPORTED), "unsupported");
  EXPECT_STREQ(mla_status_name(MLA_ERROR_IO), "I/O error");
  EXPECT_STREQ(mla_status_name(MLA_ERROR_BACKEND), "backend error");
  EXPECT_STREQ(mla_status_name(MLA_ERROR_INTERNAL), "internal error");
  EXPECT_STREQ(mla_status_name(static_cast<mla_status>(42)), "unknown status");
  // The C names agree with the runtime's.
  EXPECT_STREQ(mla_status_name(MLA_ERROR_BACKEND),
               errorCodeName(ErrorCode::BackendError));
  EXPECT_STREQ(mla_status_name(MLA_ERROR_IO),
               errorCodeName(ErrorCode::IOError));

  EXPECT_EQ(mla_dtype_size(MLA_DTYPE_BF16), 2u);
  EXPECT_EQ(mla_dtype_size(MLA_DTYPE_F16), 2u);
  EXPECT_EQ(mla_dtype_size(MLA_DTYPE_F32), 4u);
  EXPECT_EQ(mla_dtype_size(MLA_DTYPE_I32), 4u);
  EXPECT_EQ(mla_dtype_size(MLA_DTYPE_I64), 8u);
  EXPECT_EQ(mla_dtype_size(static_cast<mla_dtype>(9)), 0u);
  EXPECT_STREQ(mla_dtype_name(MLA_DTYPE_BF16), "bf16");
  EXPECT_STREQ(mla_dtype_name(MLA_DTYPE_I64), "i64");
  EXPECT_STREQ(mla_dtype_name(static_cast<mla_dtype>(-1)), "unknown");
}

TEST(CApiTest, LastErrorIsClearedBySuccessAndIsPerThread) {
  mla_device *device = nullptr;
  EXPECT_EQ(mla_device_open("tpu", nullptr, &device), MLA_ERROR_UNSUPPORTED);
  EXPECT_EQ(device, nullptr);
  std::string mine = lastError();
  EXPECT_EQ(mine, "device 'tpu' is not available in this build (available: "
                  "host, cuda, cuda:N, hip, hip:N, emu, emu:reverse, "
                  "emu:random[:SEED], emu:check-orders[:SEED], auto)");

  // Another thread's failures and successes leave this thread's message.
  std::string theirs, theirsAfterSuccess;
  std::thread other([&] {
    EXPECT_STREQ(mla_last_error(), "");
    mla_package *package = nullptr;
    EXPECT_EQ(mla_package_load_memory("xx", 2, &package),
              MLA_ERROR_INVALID_PACKAGE);
    theirs = mla_last_error();
    EXPECT_EQ(mla_page_pool_create(0, 1, nullptr), MLA_ERROR_INVALID_ARGUMENT);
    mla_page_pool *pool = nullptr;
    EXPECT_EQ(mla_page_pool_create(2, 2, &pool), MLA_OK);
    theirsAfterSuccess = mla_last_error();
    mla_page_pool_destroy(pool);
  });
  other.join();
  EXPECT_EQ(theirs, "not an mla package (bad magic)");
  EXPECT_EQ(theirsAfterSuccess, "");
  EXPECT_EQ(lastError(), mine);

  // Success clears this thread's message.
  ASSERT_EQ(mla_device_open("host", nullptr, &device), MLA_OK);
  EXPECT_EQ(lastError(), "");
  mla_device_close(device);
}

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

TEST(CApiTest, Devices) {
  mla_device *device = nullptr;
  mla_device_options options{3};
  ASSERT_EQ(mla_device_open("host", &options, &device), MLA_OK);
  const char *name = nullptr;
  ASSERT_EQ(mla_device_name(device, &name), MLA_OK);
  EXPECT_STREQ(name, "host");
  EXPECT_EQ(mla_device_synchronize(device, nullptr), MLA_OK);
  mla_device_close(device);
  mla_device_close(nullptr);

  // "auto" opens something; on this machine a GPU or the host.
  ASSERT_EQ(mla_device_open("auto", nullptr, &device), MLA_OK) << lastError();
  ASSERT_EQ(mla_device_name(device, &name), MLA_OK);
  EXPECT_TRUE(std::string(name) == "host" ||
              std::string(name).rfind("cuda:", 0) == 0 ||
              std::string(name).rfind("hip:", 0) == 0)
      << name;
  mla_device_close(device);

  // "cuda" opens on a machine with a driver and device, else says why.
  device = nullptr;
  mla_status cuda = mla_device_open("cuda:0", nullptr, &device);
  if (cuda == MLA_OK) {
    ASSERT_EQ(mla_device_name(device, &name), MLA_OK);
    EXPECT_STREQ(name, "cuda:0");
    mla_device_close(device);
  } else {
    EXPECT_EQ(cuda, MLA_ERROR_UNSUPPORTED);
    EXPECT_EQ(lastError().rfind("cuda: ", 0), 0u) << lastError();
    EXPECT_EQ(lastError().find('\n'), std::string::npos);
    EXPECT_EQ(device, nullptr);
  }

  EXPECT_EQ(mla_device_open(nullptr, nullptr, &device),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_device_open: name is null");
  EXPECT_EQ(mla_device_open("host", nullptr, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_device_open: out is null");
  EXPECT_EQ(mla_device_open("cuda:x", nullptr, &device), MLA_ERROR_UNSUPPORTED);
  EXPECT_EQ(lastError().rfind("device 'cuda:x' is not available", 0), 0u)
      << lastError();
  EXPECT_EQ(mla_device_open("", nullptr, &device), MLA_ERROR_UNSUPPORTED);
  EXPECT_EQ(mla_device_name(nullptr, &name), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_device_name: device is null");
  EXPECT_EQ(mla_device_synchronize(nullptr, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_device_synchronize: device is null");
}

//===----------------------------------------------------------------------===//
// Packages
//===----------------------------------------------------------------------===//

TEST(CApiTest, PackagesFromFileAndMemory) {
  DecodeShape shape;
  std::vector<uint8_t> bytes = decodePackageBytes(shape);
  TempDir dir;
  writeBytes(dir.file("decode.mlapkg"), bytes);

  mla_package *fromFile = nullptr, *fromMemory = nullptr;
  ASSERT_EQ(mla_package_load_file(dir.file("decode.mlapkg").c_str(), &fromFile),
            MLA_OK)
      << lastError();
  std::vector<uint8_t> copy = bytes;
  ASSERT_EQ(mla_package_load_memory(copy.data(), copy.size(), &fromMemory),
            MLA_OK);
  std::fill(copy.begin(), copy.end(), 0); // the package keeps its own copy
  for (mla_package *package : {fromFile, fromMemory}) {
    const char *kind = nullptr, *target = nullptr;
    size_t targets = 0;
    ASSERT_EQ(mla_package_kind(package, &kind), MLA_OK);
    EXPECT_STREQ(kind, "decode");
    ASSERT_EQ(mla_package_num_targets(package, &targets), MLA_OK);
    EXPECT_EQ(targets, 1u);
    ASSERT_EQ(mla_package_target(package, 0, &target), MLA_OK);
    EXPECT_STREQ(target, "host-x86_64");
    EXPECT_EQ(mla_package_target(package, 1, &target),
              MLA_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(lastError(), "mla_package_target: index 1 is out of range (the "
                           "package has 1 targets)");
  }
  mla_package_close(fromFile);
  mla_package_close(nullptr);

  // A kernel from a package closed right after loading.
  mla_device *device = nullptr;
  mla_kernel *kernel = nullptr;
  ASSERT_EQ(mla_device_open("host", nullptr, &device), MLA_OK);
  ASSERT_EQ(mla_kernel_load(device, fromMemory, nullptr, &kernel), MLA_OK);
  mla_package_close(fromMemory);
  mla_device_close(device);
  DecodeData data = makeDecodeData(shape, {3, 20}, 2, 4);
  mla_decode_args args = decodeArgs(data);
  ASSERT_EQ(mla_launch_decode(kernel, &args, nullptr), MLA_OK) << lastError();
  expectMatchesReference(shape, data);
  mla_kernel_close(kernel);
}

TEST(CApiTest, PackageErrors) {
  mla_package *package = nullptr;
  std::vector<uint8_t> good = decodePackageBytes(DecodeShape());

  std::string missing = "/nonexistent/dir/decode.mlapkg";
  EXPECT_EQ(mla_package_load_file(missing.c_str(), &package), MLA_ERROR_IO);
  EXPECT_EQ(lastError().rfind(missing, 0), 0u) << lastError();

  std::vector<uint8_t> bad = good;
  bad[0] = 'X';
  EXPECT_EQ(mla_package_load_memory(bad.data(), bad.size(), &package),
            MLA_ERROR_INVALID_PACKAGE);
  EXPECT_EQ(lastError(), "not an mla package (bad magic)");

  bad = good;
  bad[8] = 2; // format version 2
  EXPECT_EQ(mla_package_load_memory(bad.data(), bad.size(), &package),
            MLA_ERROR_INVALID_PACKAGE);
  EXPECT_EQ(lastError(),
            "package format version 2 is not supported (this runtime reads 1)");

  EXPECT_EQ(mla_package_load_memory(good.data(), 100, &package),
            MLA_ERROR_INVALID_PACKAGE);
  EXPECT_EQ(lastError().rfind("package truncated: ", 0), 0u) << lastError();

  bad = good;
  bad[good.size() / 2] ^= 0x55;
  EXPECT_EQ(mla_package_load_memory(bad.data(), bad.size(), &package),
            MLA_ERROR_INVALID_PACKAGE);
  EXPECT_EQ(lastError(), "package corrupted: checksum mismatch");

  // A well-formed container with a bad manifest (checksum recomputed).
  std::string manifest = "mla-manifest 1\nkernel decode\nbogus 1\n";
  std::vector<uint8_t> raw = {'M', 'L', 'A', 'P', 'K', 'G', 0, 1};
  auto put = [&](uint64_t value, int n) {
    for (int i = 0; i < n; ++i)
      raw.push_back(static_cast<uint8_t>(value >> (8 * i)));
  };
  put(1, 4);
  put(1, 4);
  put(8, 4);
  raw.insert(raw.end(), {'m', 'a', 'n', 'i', 'f', 'e', 's', 't'});
  put(manifest.size(), 8);
  raw.insert(raw.end(), manifest.begin(), manifest.end());
  put(fnv1a64(raw.data(), raw.size()), 8);
  EXPECT_EQ(mla_package_load_memory(raw.data(), raw.size(), &package),
            MLA_ERROR_INVALID_MANIFEST);
  EXPECT_EQ(lastError().rfind("manifest line 3: ", 0), 0u) << lastError();

  EXPECT_EQ(mla_package_load_memory(nullptr, 0, &package),
            MLA_ERROR_INVALID_PACKAGE);
  EXPECT_EQ(mla_package_load_memory(nullptr, 16, &package),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_package_load_memory: data is null");
  EXPECT_EQ(mla_package_load_memory(good.data(), good.size(), nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_package_load_memory: out is null");
  EXPECT_EQ(mla_package_load_file(nullptr, &package),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_package_load_file: path is null");
  EXPECT_EQ(mla_package_load_file("x", nullptr), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_package_load_file: out is null");
  EXPECT_EQ(package, nullptr);

  const char *text = nullptr;
  size_t count = 0;
  EXPECT_EQ(mla_package_kind(nullptr, &text), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_package_kind: package is null");
  EXPECT_EQ(mla_package_num_targets(nullptr, &count),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_package_num_targets: package is null");
  EXPECT_EQ(mla_package_target(nullptr, 0, &text), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_package_target: package is null");
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

TEST_F(CApiDecodeTest, Queries) {
  const char *text = nullptr;
  ASSERT_EQ(mla_kernel_kind(kernel, &text), MLA_OK);
  EXPECT_STREQ(text, "decode");
  ASSERT_EQ(mla_kernel_target(kernel, &text), MLA_OK);
  EXPECT_STREQ(text, "host-x86_64");

  size_t count = 0;
  ASSERT_EQ(mla_kernel_num_args(kernel, &count), MLA_OK);
  EXPECT_EQ(count, 7u);
  mla_arg_info info;
  ASSERT_EQ(mla_kernel_arg(kernel, 0, &info), MLA_OK);
  EXPECT_EQ(info.index, 0);
  EXPECT_STREQ(info.role, "q");
  EXPECT_EQ(info.is_scalar, 0);
  EXPECT_EQ(info.dtype, MLA_DTYPE_BF16);
  ASSERT_EQ(info.rank, 4);
  EXPECT_EQ(info.dims[0], MLA_DYNAMIC_DIM);
  EXPECT_EQ(info.dims[1], 1);
  EXPECT_EQ(info.dims[2], 4);
  EXPECT_EQ(info.dims[3], 40);
  ASSERT_EQ(mla_kernel_arg(kernel, 4, &info), MLA_OK);
  EXPECT_STREQ(info.role, "scale");
  EXPECT_EQ(info.is_scalar, 1);
  EXPECT_EQ(info.dtype, MLA_DTYPE_F32);
  EXPECT_EQ(info.rank, 0);
  ASSERT_EQ(mla_kernel_find_arg(kernel, "lse", &info), MLA_OK);
  EXPECT_EQ(info.index, 6);
  EXPECT_EQ(info.dtype, MLA_DTYPE_F32);
  EXPECT_EQ(info.rank, 3);
  ASSERT_EQ(mla_kernel_find_arg(kernel, "block_table", &info), MLA_OK);
  EXPECT_EQ(info.dtype, MLA_DTYPE_I32);
  EXPECT_EQ(info.dims[1], MLA_DYNAMIC_DIM);

  int64_t value = 0;
  for (auto [key, expected] :
       {std::pair{"heads", 4}, std::pair{"q_len", 1},
        std::pair{"latent_dim", 32}, std::pair{"rope_dim", 8},
        std::pair{"page_size", 16}}) {
    ASSERT_EQ(mla_kernel_header_int(kernel, key, &value), MLA_OK) << key;
    EXPECT_EQ(value, expected) << key;
  }
  ASSERT_EQ(mla_kernel_header_string(kernel, "kernel", &text), MLA_OK);
  EXPECT_STREQ(text, "decode");
  ASSERT_EQ(mla_kernel_header_string(kernel, "function", &text), MLA_OK);
  EXPECT_STREQ(text, "decode");
  ASSERT_EQ(mla_kernel_header_string(kernel, "dtype", &text), MLA_OK);
  EXPECT_STREQ(text, "bf16");
  ASSERT_EQ(mla_kernel_header_string(kernel, "target", &text), MLA_OK);
  EXPECT_STREQ(text, "host-x86_64");
  ASSERT_EQ(mla_kernel_header_string(kernel, "config.kv_splits", &text),
            MLA_OK);
  EXPECT_STREQ(text, "3");
}

TEST_F(CApiDecodeTest, QueryErrors) {
  const char *text = nullptr;
  size_t count = 0;
  int64_t value = 0;
  mla_arg_info info;
  EXPECT_EQ(mla_kernel_kind(nullptr, &text), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_kind: kernel is null");
  EXPECT_EQ(mla_kernel_kind(kernel, nullptr), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_kind: out is null");
  EXPECT_EQ(mla_kernel_target(nullptr, &text), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_target: kernel is null");
  EXPECT_EQ(mla_kernel_num_args(nullptr, &count), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_num_args: kernel is null");
  EXPECT_EQ(mla_kernel_arg(kernel, 7, &info), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_arg: index 7 is out of range (the "
                         "kernel has 7 arguments)");
  EXPECT_EQ(mla_kernel_arg(kernel, 0, nullptr), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_arg: out is null");
  EXPECT_EQ(mla_kernel_find_arg(kernel, "slot_mapping", &info),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_find_arg: kernel 'decode' has no "
                         "argument with role 'slot_mapping'");
  EXPECT_EQ(mla_kernel_find_arg(kernel, nullptr, &info),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_find_arg: role is null");
  EXPECT_EQ(mla_kernel_header_int(kernel, "qk_dim", &value),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(),
            "mla_kernel_header_int: the manifest has no 'qk_dim' line");
  EXPECT_EQ(mla_kernel_header_int(kernel, "dtype", &value),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_header_int: unknown key 'dtype' "
                         "(integer keys: heads, q_len, latent_dim, rope_dim, "
                         "page_size, qk_dim, v_dim, causal, parts)");
  EXPECT_EQ(mla_kernel_header_int(kernel, nullptr, &value),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_header_int: key is null");
  EXPECT_EQ(mla_kernel_header_string(kernel, "heads", &text),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_header_string: unknown key 'heads' "
                         "(string keys: kernel, function, dtype, target, "
                         "config.NAME)");
  EXPECT_EQ(mla_kernel_header_string(kernel, "config.warps", &text),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_header_string: the manifest's config "
                         "has no 'warps'");
  EXPECT_EQ(mla_kernel_header_string(nullptr, "kernel", &text),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_header_string: kernel is null");
}

TEST_F(CApiDecodeTest, LoadErrors) {
  mla_kernel *other = nullptr;
  EXPECT_EQ(mla_kernel_load(device, package, "sm_90a", &other),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "the package has no target 'sm_90a'");
  EXPECT_EQ(mla_kernel_load(nullptr, package, nullptr, &other),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_load: device is null");
  EXPECT_EQ(mla_kernel_load(device, nullptr, nullptr, &other),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_load: package is null");
  EXPECT_EQ(mla_kernel_load(device, package, nullptr, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_load: out is null");
  EXPECT_EQ(other, nullptr);
  // An explicit target.
  ASSERT_EQ(mla_kernel_load(device, package, "host-x86_64", &other), MLA_OK);
  mla_kernel_close(other);
  mla_kernel_close(nullptr);

  // A package without a host target on the host device.
  Expected<std::vector<uint8_t>> gpuOnly = encodePackage(
      "mla-manifest 1\nkernel custom\nfunction f\narg 0 x memref f32 ?\n"
      "target sm_90a code.sm_90a\nlaunch f args 0 grid 1,1,1\nend-target\n",
      {{"code.sm_90a", {'/', '/', '\n'}}});
  ASSERT_TRUE(gpuOnly.ok()) << gpuOnly.status().toString();
  mla_package *gpuPackage = nullptr;
  ASSERT_EQ(
      mla_package_load_memory(gpuOnly->data(), gpuOnly->size(), &gpuPackage),
      MLA_OK);
  EXPECT_EQ(mla_kernel_load(device, gpuPackage, nullptr, &other),
            MLA_ERROR_UNSUPPORTED);
  EXPECT_NE(lastError().find("sm_90a"), std::string::npos) << lastError();
  mla_package_close(gpuPackage);
}

//===----------------------------------------------------------------------===//
// Launching
//===----------------------------------------------------------------------===//

TEST_F(CApiDecodeTest, LaunchDecodeMatchesTheReference) {
  mla_decode_args args = decodeArgs(data);
  ASSERT_EQ(mla_launch_decode(kernel, &args, nullptr), MLA_OK) << lastError();
  EXPECT_EQ(lastError(), "");
  expectMatchesReference(shape, data);

  // The generic launch, roles in any order, with zeroed options.
  DecodeData again = makeDecodeData(shape, {1, 33, 64}, 4, 18);
  std::vector<mla_arg> roles = decodeRoles(again);
  std::reverse(roles.begin(), roles.end());
  mla_launch_options options{};
  ASSERT_EQ(mla_launch(kernel, roles.data(), roles.size(), &options), MLA_OK)
      << lastError();
  expectMatchesReference(shape, again);

  // Validation alone.
  EXPECT_EQ(mla_kernel_validate(kernel, roles.data(), roles.size(), nullptr),
            MLA_OK);
  again.seqLens.dataAs<int32_t>()[2] = 65;
  EXPECT_EQ(mla_kernel_validate(kernel, roles.data(), roles.size(), nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "seq_lens[2] = 65 exceeds the block table's capacity "
                         "(4 pages x 16 = 64 tokens)");
}

TEST_F(CApiDecodeTest, WorkspaceQueriesAndCallerWorkspaces) {
  std::vector<mla_arg> roles = decodeRoles(data);
  size_t bytes = 0;
  ASSERT_EQ(
      mla_kernel_workspace_bytes(kernel, roles.data(), roles.size(), &bytes),
      MLA_OK);
  // [3,1,4,3,32] + [3,1,4,3] f32, each rounded up to 256.
  EXPECT_EQ(bytes, 4608u + 256u);
  // Only shapes are read.
  for (mla_arg &arg : roles)
    arg.tensor.data = nullptr;
  size_t again = 0;
  ASSERT_EQ(
      mla_kernel_workspace_bytes(kernel, roles.data(), roles.size(), &again),
      MLA_OK);
  EXPECT_EQ(again, bytes);
  EXPECT_EQ(mla_kernel_reserve_workspace(kernel, bytes), MLA_OK);
  EXPECT_EQ(mla_kernel_reserve_workspace(nullptr, bytes),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_reserve_workspace: kernel is null");
  EXPECT_EQ(
      mla_kernel_workspace_bytes(kernel, roles.data(), roles.size(), nullptr),
      MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_workspace_bytes: out is null");
  EXPECT_EQ(mla_kernel_workspace_bytes(kernel, roles.data(), 6, &again),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "missing argument for role 'lse'");

  // A caller workspace: too small, misaligned, then right.
  HostTensor workspace =
      HostTensor::allocate(DType::F32, {static_cast<int64_t>(bytes / 4 + 64)})
          .take();
  uint8_t *aligned = workspace.dataAs<uint8_t>();
  aligned += (256 - reinterpret_cast<uintptr_t>(aligned) % 256) % 256;
  mla_launch_options options{};
  mla_decode_args args = decodeArgs(data);
  options.workspace = aligned;
  options.workspace_bytes = bytes - 1;
  EXPECT_EQ(mla_launch_decode(kernel, &args, &options),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "workspace too small: this launch needs " +
                             std::to_string(bytes) +
                             " bytes, LaunchOptions::workspace has " +
                             std::to_string(bytes - 1));
  options.workspace = aligned + 64;
  options.workspace_bytes = bytes;
  EXPECT_EQ(mla_launch_decode(kernel, &args, &options),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "LaunchOptions::workspace must be 256-byte aligned");
  options.workspace = aligned;
  ASSERT_EQ(mla_launch_decode(kernel, &args, &options), MLA_OK) << lastError();
  expectMatchesReference(shape, data);
}

// mla_launch_with_flags: flags 0 and MLA_LAUNCH_REUSE_PLAN on a kernel
// without a plan (this one: fixed split-KV) launch everything; unknown bits
// and null handles are errors. (Reusing a real plan: the host e2e test
// DecodeChunks.ReusedPlanAcrossLayers.)
TEST_F(CApiDecodeTest, LaunchWithFlags) {
  size_t plans = 7;
  ASSERT_EQ(mla_kernel_plan_launches(kernel, &plans), MLA_OK) << lastError();
  EXPECT_EQ(plans, 0u);
  EXPECT_EQ(mla_kernel_plan_launches(kernel, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_plan_launches: out is null");
  EXPECT_EQ(mla_kernel_plan_launches(nullptr, &plans),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_plan_launches: kernel is null");

  std::vector<mla_arg> roles = decodeRoles(data);
  for (uint32_t flags : {0u, MLA_LAUNCH_REUSE_PLAN}) {
    ASSERT_EQ(mla_launch_with_flags(kernel, roles.data(), roles.size(), nullptr,
                                    flags),
              MLA_OK)
        << lastError();
    expectMatchesReference(shape, data);
  }
  EXPECT_EQ(
      mla_launch_with_flags(kernel, roles.data(), roles.size(), nullptr, 0x6u),
      MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(),
            "flags: unknown bits 0x6 (known: MLA_LAUNCH_REUSE_PLAN = 0x1)");
  EXPECT_EQ(
      mla_launch_with_flags(nullptr, roles.data(), roles.size(), nullptr, 0),
      MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_launch_with_flags: kernel is null");
}

TEST_F(CApiDecodeTest, LaunchErrorsNameTheArgument) {
  mla_decode_args args = decodeArgs(data);
  std::vector<mla_arg> roles = decodeRoles(data);

  auto expectLaunchError = [&](std::vector<mla_arg> a, mla_status code,
                               const std::string &message) {
    EXPECT_EQ(mla_launch(kernel, a.data(), a.size(), nullptr), code) << message;
    EXPECT_EQ(lastError(), message);
  };
  // Wrong roles.
  std::vector<mla_arg> a = roles;
  a.pop_back();
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT,
                    "missing argument for role 'lse'");
  a = roles;
  a.push_back(floatArg("softcap", 30.0f));
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT,
                    "unknown role 'softcap' (kernel 'decode' has no such "
                    "argument)");
  a = roles;
  a[6].role = "o";
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT,
                    "args[6]: role 'o' is given twice");
  a = roles;
  a[2].role = nullptr;
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT, "args[2].role is null");
  // Wrong kinds and types.
  a = roles;
  a[4].kind = MLA_ARG_INT;
  a[4].i64 = 1;
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT,
                    "scale: expected a floating-point scalar (f32, "
                    "MLA_ARG_F32), got MLA_ARG_INT");
  a = roles;
  a[1] = floatArg("kv", 1.0f);
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT,
                    "kv: expected a tensor, got a scalar");
  a = roles;
  a[4] = tensorArg("scale", data.lse);
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT,
                    "scale: expected a scalar, got a tensor");
  a = roles;
  a[0].kind = static_cast<mla_arg_kind>(7);
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT,
                    "args[0] ('q'): kind 7 is not an mla_arg_kind");
  a = roles;
  a[0].tensor.dtype = static_cast<mla_dtype>(12);
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT,
                    "q: dtype 12 is not an mla_dtype");
  a = roles;
  a[0].tensor.rank = MLA_MAX_RANK + 1;
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT,
                    "q: rank 9 is outside [0, 8]");
  a = roles;
  a[3].tensor.dtype = MLA_DTYPE_I64;
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT,
                    "seq_lens: expected dtype i32, got i64");
  a = roles;
  a[5].tensor.rank = 3;
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT, "o: expected rank 4, got 3");
  a = roles;
  a[5].tensor.shape[3] = 31;
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT,
                    "o: dim 3 is 31, expected 32");
  a = roles;
  a[6].tensor.data = nullptr;
  expectLaunchError(a, MLA_ERROR_INVALID_ARGUMENT, "lse: data is null");
  expectLaunchError({}, MLA_ERROR_INVALID_ARGUMENT,
                    "missing argument for role 'q'");
  EXPECT_EQ(mla_launch(kernel, nullptr, 3, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "args is null (num_args is 3)");
  EXPECT_EQ(mla_launch(nullptr, roles.data(), roles.size(), nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_launch: kernel is null");
  EXPECT_EQ(mla_kernel_validate(nullptr, roles.data(), roles.size(), nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_validate: kernel is null");

  // No default scale: a zero (e.g. a zero-initialized mla_decode_args)
  // or non-finite scale is refused, naming the argument.
  mla_decode_args unscaled = args;
  unscaled.scale = 0.0f;
  EXPECT_EQ(mla_launch_decode(kernel, &unscaled, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "scale: 0 is not a softmax scale (every score would "
                         "be 0); there is no default: pass the scale the "
                         "model uses, e.g. 1/sqrt of the q.k length");
  unscaled.scale = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(mla_launch_decode(kernel, &unscaled, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "scale: nan is not a finite number (the softmax "
                         "scale)");

  // Content checks: a block-table entry outside the pool.
  int32_t saved = data.blockTable.dataAs<int32_t>()[0];
  data.blockTable.dataAs<int32_t>()[0] = 1000;
  EXPECT_EQ(mla_launch_decode(kernel, &args, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "block_table[0][0] = 1000 is outside the page pool "
                         "(kv has 12 pages)");
  data.blockTable.dataAs<int32_t>()[0] = saved;

  // Nothing was written by the failed launches.
  std::vector<uint8_t> before(data.o.dataAs<uint8_t>(),
                              data.o.dataAs<uint8_t>() + data.o.sizeInBytes());
  EXPECT_EQ(std::vector<uint8_t>(before.size(), 0), before);

  // The convenience launchers check the kind and their arguments.
  EXPECT_EQ(mla_launch_decode(kernel, nullptr, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_launch_decode: args is null");
  EXPECT_EQ(mla_launch_decode(nullptr, &args, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_launch_decode: kernel is null");
  mla_merge_args merge{};
  EXPECT_EQ(mla_launch_merge(kernel, &merge, nullptr), MLA_ERROR_UNSUPPORTED);
  EXPECT_EQ(lastError(),
            "mla_launch_merge needs a 'merge' kernel, this one is 'decode'");
  mla_prefill_args prefill{};
  EXPECT_EQ(mla_launch_prefill(kernel, &prefill, nullptr),
            MLA_ERROR_UNSUPPORTED);
  EXPECT_EQ(lastError(), "mla_launch_prefill needs a 'prefill' kernel, this "
                         "one is 'decode'");
  mla_append_kv_args append{};
  EXPECT_EQ(mla_launch_append_kv(kernel, &append, nullptr),
            MLA_ERROR_UNSUPPORTED);
  EXPECT_EQ(lastError(), "mla_launch_append_kv needs an 'append_kv' kernel, "
                         "this one is 'decode'");
  args.kv.rank = 2;
  EXPECT_EQ(mla_launch_decode(kernel, &args, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "kv: expected rank 3, got 2");
}
