//===- Npy.h - NumPy .npy reader and writer ---------------------*- C++ -*-===//
//
// Format versions 1.0 and 2.0, C order, little-endian <f4, <f2, <i4, <i8
// (f32, f16, i32, i64); parseNpyAs / readNpyAs also read <f8 (float64) and
// convert to a given dtype. Anything else is rejected with a message that
// says what was found.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_NPY_H
#define MLA_RUNTIME_NPY_H

#include "mla/runtime/Status.h"
#include "mla/runtime/Tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mla::rt {

/// Parses .npy bytes (InvalidArgument errors).
Expected<HostTensor> parseNpy(const uint8_t *data, size_t size);

/// Reads a .npy file; messages start with the path.
Expected<HostTensor> readNpy(const std::string &path);

/// Parses .npy bytes of any dtype parseNpy reads or <f8 (float64, numpy's
/// default float) and converts the elements to `dtype`: floats to a float
/// dtype (rounded once to nearest even; float64 through convertF64Elements),
/// integers to an integer dtype (int64 to int32 only when every value fits:
/// the error names the first element that does not, e.g. "element [1, 2] =
/// 4294967296 is outside the int32 range [-2147483648, 2147483647]"). Float
/// data for an integer dtype, or integer data for a float dtype, is an
/// InvalidArgument error ("expected integer data (int64 or int32) for i32,
/// got float64").
Expected<HostTensor> parseNpyAs(const uint8_t *data, size_t size, DType dtype);

/// readNpy with the conversions of parseNpyAs; messages start with the path.
Expected<HostTensor> readNpyAs(const std::string &path, DType dtype);

/// Serializes a tensor (f32, f16, i32 or i64) as .npy version 1.0 (2.0 when
/// the header needs it).
Expected<std::vector<uint8_t>> encodeNpy(const TensorView &tensor);

/// encodeNpy, written to a temporary file renamed over `path`.
Status writeNpy(const std::string &path, const TensorView &tensor);

} // namespace mla::rt

#endif // MLA_RUNTIME_NPY_H
