//===- DType.h - Element types and conversions ------------------*- C++ -*-===//
//
// Element types of kernel arguments, and the bf16/f16 <-> f32 conversions the
// runtime, its tests and mla-run use to prepare and read back buffers.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_DTYPE_H
#define MLA_RUNTIME_DTYPE_H

#include "mla/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mla::rt {

enum class DType : uint8_t { BF16, F16, F32, I32, I64 };

/// Size of one element in bytes.
size_t dtypeSize(DType dtype);

/// Manifest spelling: "bf16", "f16", "f32", "i32", "i64".
const char *dtypeName(DType dtype);

/// Parses a manifest spelling; std::nullopt for anything else.
std::optional<DType> parseDType(std::string_view name);

bool isFloatingPoint(DType dtype);

/// f32 -> bf16, round to nearest even; NaN stays a (quiet) NaN.
uint16_t floatToBF16(float value);
float bf16ToFloat(uint16_t bits);

/// f32 -> IEEE 754 binary16, round to nearest even, with subnormals; values
/// beyond the f16 range become infinities.
uint16_t floatToF16(float value);
float f16ToFloat(uint16_t bits);

/// Converts `count` elements from `src` (of type `srcType`) to `dst` (of type
/// `dstType`). Floating types convert among themselves (rounding as above),
/// integer types among themselves (values must fit the destination); mixing
/// the two kinds is an InvalidArgument error. `src` and `dst` must not
/// overlap unless the types are equal and the pointers are equal.
Status convertElements(const void *src, DType srcType, void *dst, DType dstType,
                       size_t count);

/// Converts `count` float64 values (numpy's default float type) to the
/// floating-point `dstType`, each rounded once to nearest even (bf16 and f16
/// through a round-to-odd float32, so never twice); beyond the range of
/// `dstType` they become infinities. An integer `dstType` is an
/// InvalidArgument error.
Status convertF64Elements(const double *src, void *dst, DType dstType,
                          size_t count);

} // namespace mla::rt

#endif // MLA_RUNTIME_DTYPE_H
