//===- CApiTestUtils.h - helpers of the C API tests ---------*- C++ -*-===//
#ifndef MLA_RUNTIME_TEST_CAPITESTUTILS_H
#define MLA_RUNTIME_TEST_CAPITESTUTILS_H

#include "TestUtils.h"

#include "mla/runtime/mla_runtime.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace mla::rt::test {

inline std::string lastError() { return mla_last_error(); }

inline mla_dtype toC(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return MLA_DTYPE_BF16;
  case DType::F16:
    return MLA_DTYPE_F16;
  case DType::F32:
    return MLA_DTYPE_F32;
  case DType::I32:
    return MLA_DTYPE_I32;
  case DType::I64:
    return MLA_DTYPE_I64;
  }
  return MLA_DTYPE_F32;
}

inline mla_tensor toC(const HostTensor &t) {
  mla_tensor c{};
  c.data = t.data();
  c.dtype = toC(t.getDType());
  c.rank = static_cast<int32_t>(t.getShape().size());
  for (size_t d = 0; d < t.getShape().size(); ++d)
    c.shape[d] = t.getShape()[d];
  return c;
}

inline mla_arg tensorArg(const char *role, const HostTensor &t) {
  mla_arg a{};
  a.role = role;
  a.kind = MLA_ARG_TENSOR;
  a.tensor = toC(t);
  return a;
}

inline mla_arg floatArg(const char *role, float value) {
  mla_arg a{};
  a.role = role;
  a.kind = MLA_ARG_F32;
  a.f32 = value;
  return a;
}

inline mla_decode_args decodeArgs(const DecodeData &d) {
  return {toC(d.q), toC(d.kv), toC(d.blockTable), toC(d.seqLens),
          d.scale,  toC(d.o),  toC(d.lse)};
}

inline std::vector<mla_arg> decodeRoles(const DecodeData &d) {
  return {tensorArg("q", d.q),
          tensorArg("kv", d.kv),
          tensorArg("block_table", d.blockTable),
          tensorArg("seq_lens", d.seqLens),
          floatArg("scale", d.scale),
          tensorArg("o", d.o),
          tensorArg("lse", d.lse)};
}

inline HostTensor f32Tensor(std::vector<int64_t> shape, std::mt19937 &rng) {
  HostTensor t = HostTensor::allocate(DType::F32, std::move(shape)).take();
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.dataAs<float>()[i] = dist(rng);
  return t;
}

inline HostTensor i32Tensor(const std::vector<int32_t> &values) {
  HostTensor t =
      HostTensor::allocate(DType::I32, {static_cast<int64_t>(values.size())})
          .take();
  std::copy(values.begin(), values.end(), t.dataAs<int32_t>());
  return t;
}

/// Loads `manifest` with the kind test kernels as its host code.
struct Loaded {
  mla_device *device = nullptr;
  mla_package *package = nullptr;
  mla_kernel *kernel = nullptr;
  ~Loaded() {
    mla_kernel_close(kernel);
    mla_package_close(package);
    mla_device_close(device);
  }
};

inline void loadKindKernel(const std::string &manifest, Loaded &out) {
  Expected<std::vector<uint8_t>> bytes = encodePackage(
      manifest, {{"code.host-x86_64", readBytes(MLA_TEST_KIND_KERNELS_PATH)}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  ASSERT_EQ(mla_device_open("host", nullptr, &out.device), MLA_OK)
      << lastError();
  ASSERT_EQ(mla_package_load_memory(bytes->data(), bytes->size(), &out.package),
            MLA_OK)
      << lastError();
  ASSERT_EQ(mla_kernel_load(out.device, out.package, nullptr, &out.kernel),
            MLA_OK)
      << lastError();
}

} // namespace mla::rt::test

#endif // MLA_RUNTIME_TEST_CAPITESTUTILS_H
