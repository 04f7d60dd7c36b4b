//===- DType.cpp - Element types and conversions --------------------------===//

#include "mla/runtime/DType.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

using namespace mla::rt;

size_t mla::rt::dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::I64:
    return 8;
  }
  return 0;
}

const char *mla::rt::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::F32:
    return "f32";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

std::optional<DType> mla::rt::parseDType(std::string_view name) {
  for (DType dtype :
       {DType::BF16, DType::F16, DType::F32, DType::I32, DType::I64})
    if (name == dtypeName(dtype))
      return dtype;
  return std::nullopt;
}

bool mla::rt::isFloatingPoint(DType dtype) {
  return dtype == DType::BF16 || dtype == DType::F16 || dtype == DType::F32;
}

static uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

static float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint16_t mla::rt::floatToBF16(float value) {
  uint32_t bits = floatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float mla::rt::bf16ToFloat(uint16_t bits) {
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

/// Shifts `mantissa` right by `shift` bits, rounding to nearest even.
static uint32_t shiftRoundEven(uint32_t mantissa, unsigned shift) {
  uint32_t kept = mantissa >> shift;
  uint32_t rest = mantissa & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u)))
    ++kept;
  return kept;
}

uint16_t mla::rt::floatToF16(float value) {
  uint32_t bits = floatBits(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) // NaN: keep it quiet and keep the top payload bits.
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) // >= 65520 rounds to infinity (also infinity).
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs >= 0x38800000u) { // Normal f16: rebias the exponent by 127 - 15.
    uint32_t rebased = abs - (112u << 23);
    return static_cast<uint16_t>(sign | shiftRoundEven(rebased, 13));
  }
  // Subnormal f16 (or zero): the result counts units of 2^-24.
  unsigned exponent = abs >> 23;
  if (exponent < 102) // Below 2^-25: rounds to zero.
    return static_cast<uint16_t>(sign);
  uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | shiftRoundEven(mantissa, 126 - exponent));
}

float mla::rt::f16ToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return bitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  return bitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

static float loadFloat(const void *src, DType type, size_t i) {
  switch (type) {
  case DType::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(src)[i]);
  case DType::F16:
    return f16ToFloat(static_cast<const uint16_t *>(src)[i]);
  default:
    return static_cast<const float *>(src)[i];
  }
}

static void storeFloat(void *dst, DType type, size_t i, float value) {
  switch (type) {
  case DType::BF16:
    static_cast<uint16_t *>(dst)[i] = floatToBF16(value);
    return;
  case DType::F16:
    static_cast<uint16_t *>(dst)[i] = floatToF16(value);
    return;
  default:
    static_cast<float *>(dst)[i] = value;
  }
}

Status mla::rt::convertElements(const void *src, DType srcType, void *dst,
                                DType dstType, size_t count) {
  if (srcType == dstType) {
    if (src != dst)
      std::memcpy(dst, src, count * dtypeSize(srcType));
    return Status::success();
  }
  if (isFloatingPoint(srcType) != isFloatingPoint(dstType))
    return Status::error(ErrorCode::InvalidArgument,
                         std::string("cannot convert ") + dtypeName(srcType) +
                             " elements to " + dtypeName(dstType));
  if (isFloatingPoint(srcType)) {
    for (size_t i = 0; i < count; ++i)
      storeFloat(dst, dstType, i, loadFloat(src, srcType, i));
    return Status::success();
  }
  if (srcType == DType::I32) {
    for (size_t i = 0; i < count; ++i)
      static_cast<int64_t *>(dst)[i] = static_cast<const int32_t *>(src)[i];
    return Status::success();
  }
  const auto *in = static_cast<const int64_t *>(src);
  for (size_t i = 0; i < count; ++i)
    if (in[i] < std::numeric_limits<int32_t>::min() ||
        in[i] > std::numeric_limits<int32_t>::max())
      return Status::error(ErrorCode::InvalidArgument,
                           "element " + std::to_string(i) + " = " +
                               std::to_string(in[i]) + " does not fit in i32");
  for (size_t i = 0; i < count; ++i)
    static_cast<int32_t *>(dst)[i] = static_cast<int32_t>(in[i]);
  return Status::success();
}

/// `value` as a float32 rounded to odd: truncated towards zero, with the
/// lowest mantissa bit set when that lost anything. Rounding this to a type
/// at least two bits narrower (bf16, f16) to nearest even gives the same
/// result as rounding `value` directly.
static float roundToOddFloat(double value) {
  if (std::isnan(value))
    return std::numeric_limits<float>::quiet_NaN();
  float rounded = static_cast<float>(value);
  if (static_cast<double>(rounded) == value)
    return rounded;
  if (std::isinf(rounded) ||
      std::fabs(static_cast<double>(rounded)) > std::fabs(value))
    rounded = std::nextafter(rounded, 0.0f);
  return bitsToFloat(floatBits(rounded) | 1u);
}

Status mla::rt::convertF64Elements(const double *src, void *dst, DType dstType,
                                   size_t count) {
  if (!isFloatingPoint(dstType))
    return Status::error(ErrorCode::InvalidArgument,
                         std::string("cannot convert f64 elements to ") +
                             dtypeName(dstType));
  for (size_t i = 0; i < count; ++i)
    storeFloat(dst, dstType, i,
               dstType == DType::F32 ? static_cast<float>(src[i])
                                     : roundToOddFloat(src[i]));
  return Status::success();
}
