//===- NpyTest.cpp - .npy reader and writer -------------------------------===//

#include "TestUtils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

/// A .npy file with the given version and header dict, padded like numpy.
std::vector<uint8_t> npyBytes(const std::string &dict,
                              const std::vector<uint8_t> &data, int major = 1,
                              int minor = 0) {
  size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> out = {0x93,
                              'N',
                              'U',
                              'M',
                              'P',
                              'Y',
                              static_cast<uint8_t>(major),
                              static_cast<uint8_t>(minor)};
  for (size_t i = 0; i < prefix - 8; ++i)
    out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> floatBytes(std::vector<float> values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::string npyError(const std::vector<uint8_t> &bytes) {
  Expected<HostTensor> tensor = parseNpy(bytes.data(), bytes.size());
  EXPECT_FALSE(tensor.ok());
  return tensor.ok() ? std::string() : tensor.status().message();
}

} // namespace

TEST(NpyTest, ReadsWhatNumpyWrites) {
  std::vector<uint8_t> bytes =
      npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
               floatBytes({1, 2, 3, 4, 5, 6}));
  Expected<HostTensor> tensor = parseNpy(bytes.data(), bytes.size());
  ASSERT_TRUE(tensor.ok()) << tensor.status().toString();
  EXPECT_EQ(tensor->getDType(), DType::F32);
  EXPECT_EQ(tensor->getShape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tensor->dataAs<float>()[5], 6.0f);

  // Version 2.0, other key order, double quotes, no trailing comma.
  bytes = npyBytes("{\"shape\": (3,), \"fortran_order\": False, \"descr\": "
                   "\"<i8\"}",
                   std::vector<uint8_t>(24, 0), 2, 0);
  tensor = parseNpy(bytes.data(), bytes.size());
  ASSERT_TRUE(tensor.ok()) << tensor.status().toString();
  EXPECT_EQ(tensor->getDType(), DType::I64);
  EXPECT_EQ(tensor->getShape(), (std::vector<int64_t>{3}));
}

TEST(NpyTest, WritesWhatNumpyWrites) {
  HostTensor tensor = HostTensor::allocate(DType::F32, {2, 3}).take();
  Expected<std::vector<uint8_t>> bytes = encodeNpy(tensor.view());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes,
            npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, "
                     "3), }",
                     std::vector<uint8_t>(24, 0)));
}

TEST(NpyTest, RoundTrips) {
  TempDir dir;
  struct Case {
    DType dtype;
    std::vector<int64_t> shape;
  };
  for (const Case &c : {Case{DType::F32, {2, 3, 4}}, Case{DType::F16, {5}},
                        Case{DType::I32, {}}, Case{DType::I64, {0, 4}}}) {
    HostTensor tensor = HostTensor::allocate(c.dtype, c.shape).take();
    for (size_t i = 0; i < tensor.sizeInBytes(); ++i)
      static_cast<uint8_t *>(tensor.data())[i] = static_cast<uint8_t>(i * 7);
    std::string path = dir.file("t.npy");
    ASSERT_TRUE(writeNpy(path, tensor.view()).ok());
    Expected<HostTensor> back = readNpy(path);
    ASSERT_TRUE(back.ok()) << back.status().toString();
    EXPECT_EQ(back->getDType(), c.dtype);
    EXPECT_EQ(back->getShape(), c.shape);
    ASSERT_EQ(back->sizeInBytes(), tensor.sizeInBytes());
    EXPECT_EQ(std::memcmp(back->data(), tensor.data(), tensor.sizeInBytes()),
              0);
  }
}

TEST(NpyTest, LargeHeadersUseVersion2) {
  std::vector<int64_t> shape(25000, 1);
  HostTensor tensor = HostTensor::allocate(DType::I32, shape).take();
  Expected<std::vector<uint8_t>> bytes = encodeNpy(tensor.view());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ((*bytes)[6], 2);
  Expected<HostTensor> back = parseNpy(bytes->data(), bytes->size());
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->getShape(), shape);
}

TEST(NpyTest, RejectsWhatItDoesNotSupport) {
  std::vector<uint8_t> six = floatBytes({1, 2, 3, 4, 5, 6});
  EXPECT_EQ(npyError(npyBytes("{'descr': '<f4', 'fortran_order': True, "
                              "'shape': (2, 3), }",
                              six)),
            "Fortran-order arrays are not supported (save the array in C "
            "order)");
  EXPECT_EQ(npyError(npyBytes("{'descr': '>f4', 'fortran_order': False, "
                              "'shape': (6,), }",
                              six)),
            "unsupported npy dtype '>f4' (supported: little-endian <f4, <f2, "
            "<i4, <i8)");
  EXPECT_EQ(npyError(npyBytes("{'descr': '<f8', 'fortran_order': False, "
                              "'shape': (3,), }",
                              six)),
            "unsupported npy dtype '<f8' (supported: little-endian <f4, <f2, "
            "<i4, <i8)");
  EXPECT_EQ(npyError(npyBytes("{'descr': '<f4', 'fortran_order': False, "
                              "'shape': (6,), }",
                              six, 3, 0)),
            "npy format version 3.0 is not supported (supported: 1.0, 2.0)");
  EXPECT_EQ(npyError(npyBytes("{'descr': '<f4', 'fortran_order': False, "
                              "'shape': (7,), }",
                              six)),
            "npy data is 24 bytes, expected 28 for shape [7] of <f4");
  EXPECT_EQ(npyError(npyBytes("{'descr': '<f4', 'shape': (6,), }", six)),
            "malformed npy header (needs 'descr', 'fortran_order' and "
            "'shape'): {'descr': '<f4', 'shape': (6,), }");
  std::vector<uint8_t> bad = {'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(npyError(bad), "not a .npy file (bad magic)");
  std::vector<uint8_t> cut = npyBytes(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", six);
  cut.resize(30);
  EXPECT_EQ(npyError(cut), "truncated npy header: needs 118 bytes, 20 remain");

  HostTensor bf16 = HostTensor::allocate(DType::BF16, {2}).take();
  Expected<std::vector<uint8_t>> encoded = encodeNpy(bf16.view());
  ASSERT_FALSE(encoded.ok());
  EXPECT_EQ(encoded.status().message(),
            "npy has no bf16 type; convert the tensor to f32 first");
}

namespace {

template <typename T> std::vector<uint8_t> bytesOf(std::vector<T> values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::string npyAsError(const std::vector<uint8_t> &bytes, DType dtype) {
  Expected<HostTensor> tensor = parseNpyAs(bytes.data(), bytes.size(), dtype);
  EXPECT_FALSE(tensor.ok());
  return tensor.ok() ? std::string() : tensor.status().message();
}

} // namespace

TEST(NpyTest, ConvertsNumpyDefaultTypes) {
  // float64 (numpy's default float) to each float dtype, rounded once.
  double tie = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  std::vector<uint8_t> f64 =
      npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }",
               bytesOf<double>({0.5, -2.25, tie, 3e38}));
  Expected<HostTensor> bf16 = parseNpyAs(f64.data(), f64.size(), DType::BF16);
  ASSERT_TRUE(bf16.ok()) << bf16.status().toString();
  EXPECT_EQ(bf16->getShape(), (std::vector<int64_t>{2, 2}));
  const uint16_t *bits = bf16->dataAs<uint16_t>();
  EXPECT_EQ(bf16ToFloat(bits[0]), 0.5f);
  EXPECT_EQ(bf16ToFloat(bits[1]), -2.25f);
  EXPECT_EQ(bits[2], 0x3f81);
  Expected<HostTensor> f32 = parseNpyAs(f64.data(), f64.size(), DType::F32);
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ(f32->dataAs<float>()[3], 3e38f);

  // float32 and float16 files still convert to any float dtype.
  std::vector<uint8_t> f4 =
      npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
               floatBytes({1.5f}));
  Expected<HostTensor> f16 = parseNpyAs(f4.data(), f4.size(), DType::F16);
  ASSERT_TRUE(f16.ok());
  EXPECT_EQ(f16ToFloat(f16->dataAs<uint16_t>()[0]), 1.5f);

  // int64 (numpy's default integer) to int32 when every value fits.
  std::vector<uint8_t> i8 =
      npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
               bytesOf<int64_t>({0, -2147483648LL, 2147483647LL}));
  Expected<HostTensor> i32 = parseNpyAs(i8.data(), i8.size(), DType::I32);
  ASSERT_TRUE(i32.ok()) << i32.status().toString();
  EXPECT_EQ(i32->getDType(), DType::I32);
  EXPECT_EQ(i32->dataAs<int32_t>()[1], INT32_MIN);
  EXPECT_EQ(i32->dataAs<int32_t>()[2], INT32_MAX);
  std::vector<uint8_t> i4 =
      npyBytes("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }",
               bytesOf<int32_t>({-7}));
  Expected<HostTensor> i64 = parseNpyAs(i4.data(), i4.size(), DType::I64);
  ASSERT_TRUE(i64.ok());
  EXPECT_EQ(i64->dataAs<int64_t>()[0], -7);
}

TEST(NpyTest, ConversionErrors) {
  std::vector<uint8_t> big =
      npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }",
               bytesOf<int64_t>({1, 2, 3, 4294967296LL}));
  EXPECT_EQ(npyAsError(big, DType::I32),
            "element [1, 1] = 4294967296 is outside the int32 range "
            "[-2147483648, 2147483647]");
  std::vector<uint8_t> negative =
      npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
               bytesOf<int64_t>({-2147483649LL, 0}));
  EXPECT_EQ(npyAsError(negative, DType::I32),
            "element [0] = -2147483649 is outside the int32 range "
            "[-2147483648, 2147483647]");
  std::vector<uint8_t> f64 =
      npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }",
               bytesOf<double>({1.0}));
  EXPECT_EQ(npyAsError(f64, DType::I32),
            "expected integer data (int64 or int32) for i32, got float64");
  EXPECT_EQ(npyAsError(big, DType::BF16),
            "expected floating-point data (float64, float32 or float16) for "
            "bf16, got int64");
  std::vector<uint8_t> u8 = npyBytes(
      "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }", {1});
  EXPECT_EQ(npyAsError(u8, DType::I32),
            "unsupported npy dtype '|u1' (supported: little-endian <f8, <f4, "
            "<f2, <i8, <i4)");
  std::vector<uint8_t> short64 =
      npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
               bytesOf<double>({1.0}));
  EXPECT_EQ(npyAsError(short64, DType::F32),
            "npy data is 8 bytes, expected 16 for shape [2] of <f8");
}

TEST(NpyTest, ReadErrorsNameTheFile) {
  TempDir dir;
  writeBytes(dir.file("q.npy"), {1, 2, 3});
  Expected<HostTensor> tensor = readNpy(dir.file("q.npy"));
  ASSERT_FALSE(tensor.ok());
  EXPECT_EQ(tensor.status().message(),
            dir.file("q.npy") + ": not a .npy file (bad magic)");
}
