//===- CApiTablesTest.cpp - The C API's tables and helpers ----------------===//
//
// What mla_runtime.h 1.1 added for bindings: the kind table (it is
// Kinds.def), output shapes (the runtime's table, as mla-run uses it),
// mla_convert and mla_device_uses_host_memory, with their error messages.
//
//===----------------------------------------------------------------------===//

#include "KindTestUtils.h"
#include "TestUtils.h"

#include "mla/runtime/Kinds.h"
#include "mla/runtime/mla_runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

std::string lastError() { return mla_last_error(); }

/// A host kernel of a package given as bytes.
struct HostKernel {
  mla_device *device = nullptr;
  mla_package *package = nullptr;
  mla_kernel *kernel = nullptr;
  explicit HostKernel(const std::vector<uint8_t> &bytes) {
    EXPECT_EQ(mla_device_open("host", nullptr, &device), MLA_OK) << lastError();
    EXPECT_EQ(mla_package_load_memory(bytes.data(), bytes.size(), &package),
              MLA_OK)
        << lastError();
    EXPECT_EQ(mla_kernel_load(device, package, nullptr, &kernel), MLA_OK)
        << lastError();
  }
  ~HostKernel() {
    mla_kernel_close(kernel);
    mla_package_close(package);
    mla_device_close(device);
  }
};

mla_arg shapeArg(const char *role, std::vector<int64_t> shape) {
  mla_arg a{};
  a.role = role;
  a.kind = MLA_ARG_TENSOR;
  a.tensor.dtype = MLA_DTYPE_F32;
  a.tensor.rank = static_cast<int32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), a.tensor.shape);
  return a;
}

std::vector<int64_t> shapeOf(const mla_tensor &t) {
  return std::vector<int64_t>(t.shape, t.shape + t.rank);
}

} // namespace

TEST(CApiTablesTest, KindTableIsKindsDef) {
  ASSERT_EQ(mla_num_kinds(), std::size(kKernelKinds));
  for (size_t k = 0; k < mla_num_kinds(); ++k) {
    KernelKind kind = kKernelKinds[k];
    const char *name = mla_kind_name(k);
    ASSERT_STREQ(name, kindName(kind));
    size_t count = 0;
    ASSERT_EQ(mla_kind_num_roles(name, &count), MLA_OK) << lastError();
    ASSERT_EQ(count, kindRoles(kind).size());
    size_t i = 0;
    for (const KindRole &expected : kindRoles(kind)) {
      mla_role_info info;
      ASSERT_EQ(mla_kind_role(name, i++, &info), MLA_OK) << lastError();
      EXPECT_STREQ(info.role, expected.name);
      EXPECT_EQ(info.is_scalar, expected.argKind == ArgKind::Scalar);
      EXPECT_EQ(info.rank, expected.rank);
      EXPECT_EQ(info.use, expected.use == RoleUse::Input    ? MLA_ROLE_INPUT
                          : expected.use == RoleUse::Output ? MLA_ROLE_OUTPUT
                                                            : MLA_ROLE_INOUT);
    }
  }
  EXPECT_EQ(mla_kind_name(mla_num_kinds()), nullptr);

  mla_role_info info;
  ASSERT_EQ(mla_kind_role("append_kv", 2, &info), MLA_OK);
  EXPECT_STREQ(info.role, "kv");
  EXPECT_EQ(info.use, MLA_ROLE_INOUT);
  ASSERT_EQ(mla_kind_role("decode", 4, &info), MLA_OK);
  EXPECT_STREQ(info.role, "scale");
  EXPECT_EQ(info.is_scalar, 1);

  size_t count = 0;
  EXPECT_EQ(mla_kind_num_roles("decoder", &count), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kind_num_roles: unknown kernel kind 'decoder' "
                         "(known: decode, prefill, merge, append_kv)");
  EXPECT_EQ(mla_kind_num_roles(nullptr, &count), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kind_num_roles: kind is null");
  EXPECT_EQ(mla_kind_num_roles("merge", nullptr), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kind_num_roles: out is null");
  EXPECT_EQ(mla_kind_role("merge", 4, &info), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kind_role: index 4 is out of range (kind "
                         "'merge' has 4 arguments)");
  EXPECT_EQ(mla_kind_role("merge", 0, nullptr), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kind_role: out is null");
}

TEST(CApiTablesTest, Convert) {
  const float in[] = {1.0f, -2.5f, 3.14159f, INFINITY, 65536.0f};
  uint16_t bf16[5], f16[5];
  ASSERT_EQ(mla_convert(in, MLA_DTYPE_F32, bf16, MLA_DTYPE_BF16, 5), MLA_OK)
      << lastError();
  ASSERT_EQ(mla_convert(in, MLA_DTYPE_F32, f16, MLA_DTYPE_F16, 5), MLA_OK);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(bf16[i], floatToBF16(in[i])) << i;
    EXPECT_EQ(f16[i], floatToF16(in[i])) << i;
  }
  float back[5];
  ASSERT_EQ(mla_convert(bf16, MLA_DTYPE_BF16, back, MLA_DTYPE_F32, 5), MLA_OK);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_EQ(back[2], bf16ToFloat(floatToBF16(3.14159f)));
  EXPECT_TRUE(std::isinf(back[3]));
  ASSERT_EQ(mla_convert(f16, MLA_DTYPE_F16, back, MLA_DTYPE_F32, 5), MLA_OK);
  EXPECT_TRUE(std::isinf(back[4])) << "65536 overflows f16";

  const int64_t wide[] = {7, -3, int64_t(1) << 40};
  int32_t narrow[3];
  ASSERT_EQ(mla_convert(wide, MLA_DTYPE_I64, narrow, MLA_DTYPE_I32, 2), MLA_OK);
  EXPECT_EQ(narrow[1], -3);
  EXPECT_EQ(mla_convert(wide, MLA_DTYPE_I64, narrow, MLA_DTYPE_I32, 3),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(),
            "mla_convert: element 2 = 1099511627776 does not fit in i32");
  EXPECT_EQ(mla_convert(in, MLA_DTYPE_F32, narrow, MLA_DTYPE_I32, 1),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_convert: cannot convert f32 elements to i32");
  EXPECT_EQ(mla_convert(in, static_cast<mla_dtype>(9), back, MLA_DTYPE_F32, 1),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_convert: src_dtype 9 is not an mla_dtype");
  EXPECT_EQ(mla_convert(nullptr, MLA_DTYPE_F32, back, MLA_DTYPE_F32, 1),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_convert: src is null");
  EXPECT_EQ(mla_convert(nullptr, MLA_DTYPE_F32, nullptr, MLA_DTYPE_BF16, 0),
            MLA_OK);
}

TEST(CApiTablesTest, DeviceUsesHostMemory) {
  for (const char *name : {"host", "emu"}) {
    mla_device *device = nullptr;
    ASSERT_EQ(mla_device_open(name, nullptr, &device), MLA_OK) << lastError();
    int32_t host = -1;
    ASSERT_EQ(mla_device_uses_host_memory(device, &host), MLA_OK);
    EXPECT_EQ(host, 1) << name;
    EXPECT_EQ(mla_device_uses_host_memory(device, nullptr),
              MLA_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(lastError(), "mla_device_uses_host_memory: out is null");
    mla_device_close(device);
  }
  int32_t host = -1;
  EXPECT_EQ(mla_device_uses_host_memory(nullptr, &host),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_device_uses_host_memory: device is null");
}

TEST(CApiTablesTest, DecodeOutputShapes) {
  DecodeShape shape; // bf16, 4 heads, 32 + 8
  HostKernel k(decodePackageBytes(shape));
  ASSERT_NE(k.kernel, nullptr);
  std::vector<mla_arg> args = {shapeArg("q", {3, 1, 4, 40}),
                               shapeArg("kv", {9, 16, 40})};
  mla_arg scale{};
  scale.role = "scale";
  scale.kind = MLA_ARG_F32;
  args.push_back(scale); // ignored
  mla_tensor out;
  ASSERT_EQ(
      mla_kernel_output_shape(k.kernel, "o", args.data(), args.size(), &out),
      MLA_OK)
      << lastError();
  EXPECT_EQ(shapeOf(out), (std::vector<int64_t>{3, 1, 4, 32}));
  EXPECT_EQ(out.dtype, MLA_DTYPE_BF16);
  EXPECT_EQ(out.data, nullptr);
  ASSERT_EQ(mla_kernel_output_shape(k.kernel, "lse", args.data(), 1, &out),
            MLA_OK)
      << lastError();
  EXPECT_EQ(shapeOf(out), (std::vector<int64_t>{3, 1, 4}));
  EXPECT_EQ(out.dtype, MLA_DTYPE_F32);

  EXPECT_EQ(mla_kernel_output_shape(k.kernel, "kv", args.data(), 1, &out),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "'kv' is not an output of a decode kernel");
  EXPECT_EQ(mla_kernel_output_shape(k.kernel, "o", args.data() + 1, 1, &out),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "cannot size output 'o': input 'q' is missing");
  // Dims the manifest fixes come from it (q_len 1 here), the others from
  // the inputs; the launch checks the inputs' ranks.
  mla_arg flat = shapeArg("q", {3});
  ASSERT_EQ(mla_kernel_output_shape(k.kernel, "o", &flat, 1, &out), MLA_OK);
  EXPECT_EQ(shapeOf(out), (std::vector<int64_t>{3, 1, 4, 32}));
  flat = shapeArg("q", {});
  EXPECT_EQ(mla_kernel_output_shape(k.kernel, "o", &flat, 1, &out),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "cannot size output 'o': 'q' has no dim 0");
  EXPECT_EQ(mla_kernel_output_shape(k.kernel, nullptr, &flat, 1, &out),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_kernel_output_shape: role is null");
  EXPECT_EQ(mla_kernel_output_shape(k.kernel, "o", nullptr, 2, &out),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "args is null (num_args is 2)");
}

TEST(CApiTablesTest, PrefillAndMergeOutputShapes) {
  PrefillShape prefill; // 2 heads, 24 / 16
  HostKernel p(kindPackageBytes(prefillManifest(prefill)));
  ASSERT_NE(p.kernel, nullptr);
  mla_arg args[] = {shapeArg("q", {11, 2, 24}), shapeArg("v", {7, 2, 16})};
  mla_tensor out;
  ASSERT_EQ(mla_kernel_output_shape(p.kernel, "o", args, 2, &out), MLA_OK)
      << lastError();
  EXPECT_EQ(shapeOf(out), (std::vector<int64_t>{11, 2, 16}));
  ASSERT_EQ(mla_kernel_output_shape(p.kernel, "lse", args, 1, &out), MLA_OK)
      << lastError();
  EXPECT_EQ(shapeOf(out), (std::vector<int64_t>{2, 11}));

  MergeShape merge; // 2 heads, 16, 3 parts
  HostKernel m(kindPackageBytes(mergeManifest(merge)));
  ASSERT_NE(m.kernel, nullptr);
  mla_arg parts = shapeArg("o_parts", {3, 5, 2, 16});
  ASSERT_EQ(mla_kernel_output_shape(m.kernel, "o", &parts, 1, &out), MLA_OK)
      << lastError();
  EXPECT_EQ(shapeOf(out), (std::vector<int64_t>{5, 2, 16}));
  ASSERT_EQ(mla_kernel_output_shape(m.kernel, "lse", &parts, 1, &out), MLA_OK)
      << lastError();
  EXPECT_EQ(shapeOf(out), (std::vector<int64_t>{2, 5}));
}
