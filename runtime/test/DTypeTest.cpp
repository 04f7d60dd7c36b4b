//===- DTypeTest.cpp - Element types and conversions ----------------------===//

#include "mla/runtime/DType.h"
#include "mla/runtime/Tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace mla::rt;

namespace {
float fromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}
} // namespace

TEST(DTypeTest, NamesSizesAndParsing) {
  for (DType dtype :
       {DType::BF16, DType::F16, DType::F32, DType::I32, DType::I64})
    EXPECT_EQ(parseDType(dtypeName(dtype)), dtype);
  EXPECT_EQ(dtypeSize(DType::BF16), 2u);
  EXPECT_EQ(dtypeSize(DType::F16), 2u);
  EXPECT_EQ(dtypeSize(DType::F32), 4u);
  EXPECT_EQ(dtypeSize(DType::I32), 4u);
  EXPECT_EQ(dtypeSize(DType::I64), 8u);
  EXPECT_EQ(parseDType("float32"), std::nullopt);
  EXPECT_TRUE(isFloatingPoint(DType::BF16));
  EXPECT_FALSE(isFloatingPoint(DType::I64));
}

TEST(DTypeTest, BF16RoundsToNearestEven) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even 1.
  EXPECT_EQ(floatToBF16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6 (even).
  EXPECT_EQ(floatToBF16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(floatToBF16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(floatToBF16(-2.5f), 0xc020);
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::infinity()), 0x7f80);
  // The largest float rounds up to infinity.
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(NAN))));
  // A NaN whose payload lives only in the low bits stays a NaN.
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(fromBits(0x7f800001)))));
}

TEST(DTypeTest, BF16RoundTripsEveryValue) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    float value = bf16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(value))
      continue;
    ASSERT_EQ(floatToBF16(value), bits) << std::hex << bits;
  }
}

TEST(DTypeTest, F16RoundsToNearestEven) {
  EXPECT_EQ(floatToF16(1.0f), 0x3c00);
  EXPECT_EQ(floatToF16(-2.0f), 0xc000);
  EXPECT_EQ(floatToF16(1.0f + 0x1p-11f), 0x3c00);     // tie -> even
  EXPECT_EQ(floatToF16(1.0f + 3 * 0x1p-11f), 0x3c02); // tie -> even
  EXPECT_EQ(floatToF16(65504.0f), 0x7bff);            // largest finite
  EXPECT_EQ(floatToF16(65519.0f), 0x7bff);
  EXPECT_EQ(floatToF16(65520.0f), 0x7c00); // rounds to infinity
  EXPECT_EQ(floatToF16(-1e10f), 0xfc00);
  EXPECT_EQ(floatToF16(0x1p-14f), 0x0400);            // smallest normal
  EXPECT_EQ(floatToF16(0x1p-24f), 0x0001);            // smallest subnormal
  EXPECT_EQ(floatToF16(0x1p-25f), 0x0000);            // tie -> even (zero)
  EXPECT_EQ(floatToF16(1.5f * 0x1p-25f), 0x0001);     // above the tie
  EXPECT_EQ(floatToF16(3 * 0x1p-25f), 0x0002);        // tie -> even
  EXPECT_EQ(floatToF16(0x1p-14f - 0x1p-25f), 0x0400); // rounds up to normal
  EXPECT_EQ(floatToF16(-0.0f), 0x8000);
  EXPECT_EQ(floatToF16(1e-30f), 0x0000);
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(NAN))));
}

TEST(DTypeTest, F16RoundTripsEveryValue) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    float value = f16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(value)) {
      EXPECT_TRUE((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff)) << bits;
      continue;
    }
    ASSERT_EQ(floatToF16(value), bits) << std::hex << bits;
  }
  EXPECT_EQ(f16ToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(f16ToFloat(0x8400), -0x1p-14f);
  EXPECT_EQ(f16ToFloat(0x7c00), std::numeric_limits<float>::infinity());
}

TEST(DTypeTest, ConvertElements) {
  float in[3] = {1.0f, -0.5f, 3.0f};
  uint16_t half[3];
  float back[3];
  ASSERT_TRUE(convertElements(in, DType::F32, half, DType::F16, 3).ok());
  ASSERT_TRUE(convertElements(half, DType::F16, half, DType::F16, 3).ok());
  uint16_t bf[3];
  ASSERT_TRUE(convertElements(half, DType::F16, bf, DType::BF16, 3).ok());
  ASSERT_TRUE(convertElements(bf, DType::BF16, back, DType::F32, 3).ok());
  EXPECT_EQ(std::memcmp(in, back, sizeof(in)), 0);

  int32_t narrow[2] = {-7, 1 << 30};
  int64_t wide[2];
  ASSERT_TRUE(convertElements(narrow, DType::I32, wide, DType::I64, 2).ok());
  EXPECT_EQ(wide[1], 1 << 30);
  wide[0] = int64_t(1) << 40;
  Status status = convertElements(wide, DType::I64, narrow, DType::I32, 2);
  EXPECT_EQ(status.message(), "element 0 = 1099511627776 does not fit in i32");
  status = convertElements(in, DType::F32, narrow, DType::I32, 1);
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(status.message(), "cannot convert f32 elements to i32");
}

TEST(DTypeTest, F64RoundsOnce) {
  // Just above the midpoint of two bf16 (resp. f16) neighbours, by less
  // than float32 keeps: a float32 step first would make it a tie and round
  // it down to even; one rounding goes up.
  double bf16Case = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  double f16Case = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30);
  double values[] = {bf16Case, -bf16Case,    1.0 + std::ldexp(1.0, -8),
                     1e300,    std::nan(""), 0.1};
  uint16_t bf16[6];
  ASSERT_TRUE(convertF64Elements(values, bf16, DType::BF16, 6).ok());
  EXPECT_EQ(bf16[0], 0x3f81); // 1 + 2^-7
  EXPECT_EQ(bf16[1], 0xbf81); // its negation
  EXPECT_EQ(bf16[2], 0x3f80); // an exact tie: to even (1.0)
  EXPECT_EQ(bf16[3], 0x7f80); // beyond the range: infinity
  EXPECT_TRUE(std::isnan(bf16ToFloat(bf16[4])));
  EXPECT_EQ(bf16[5], floatToBF16(0.1f));
  uint16_t f16[2];
  double f16Values[] = {f16Case, 70000.0};
  ASSERT_TRUE(convertF64Elements(f16Values, f16, DType::F16, 2).ok());
  EXPECT_EQ(f16[0], 0x3c01); // 1 + 2^-10
  EXPECT_EQ(f16[1], 0x7c00); // infinity
  float f32[1];
  ASSERT_TRUE(convertF64Elements(&bf16Case, f32, DType::F32, 1).ok());
  EXPECT_EQ(f32[0], static_cast<float>(bf16Case));
  int32_t i32[1];
  Status status = convertF64Elements(values, i32, DType::I32, 1);
  EXPECT_EQ(status.message(), "cannot convert f64 elements to i32");
}

TEST(DTypeTest, ScalarsAndStatus) {
  Scalar scale = Scalar::f32(0.125f);
  EXPECT_EQ(scale.getDType(), DType::F32);
  EXPECT_EQ(*static_cast<const float *>(scale.data()), 0.125f);
  EXPECT_EQ(*static_cast<const uint16_t *>(Scalar::bf16(1.0f).data()), 0x3f80);
  EXPECT_EQ(*static_cast<const int64_t *>(Scalar::i64(-3).data()), -3);
  Scalar half = Scalar::ofFloat(DType::F16, 2.0f);
  EXPECT_EQ(half.getDType(), DType::F16);
  EXPECT_EQ(*static_cast<const uint16_t *>(half.data()), 0x4000);

  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.toString(), "ok");
  Status error = Status::error(ErrorCode::IOError, "x: gone");
  EXPECT_EQ(error.withContext("reading").toString(),
            "I/O error: reading: x: gone");
  EXPECT_TRUE(ok.withContext("reading").ok());
}

TEST(DTypeTest, HostTensor) {
  Expected<HostTensor> tensor = HostTensor::allocate(DType::BF16, {3, 5});
  ASSERT_TRUE(tensor.ok());
  EXPECT_EQ(tensor->sizeInBytes(), 30u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tensor->data()) % 64, 0u);
  for (int i = 0; i < 15; ++i)
    EXPECT_EQ(tensor->dataAs<uint16_t>()[i], 0);
  EXPECT_EQ(shapeToString(tensor->getShape()), "[3, 5]");
  Expected<HostTensor> negative = HostTensor::allocate(DType::F32, {2, -1});
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(),
            "cannot allocate a tensor of shape [2, -1]: dim 1 is negative");
  Expected<HostTensor> huge =
      HostTensor::allocate(DType::F32, {int64_t(1) << 40, int64_t(1) << 40});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().message(),
            "cannot allocate a tensor of shape [1099511627776, "
            "1099511627776]: too large");
}
