//===- Npy.h - NumPy .npy reader and writer ---------------------*- C++ -*-===//
//
// Format versions 1.0 and 2.0, C order, little-endian <f4, <f2, <i4, <i8
// (f32, f16, i32, i64). Anything else is rejected with a message that says
// what was found.
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

/// Serializes a tensor (f32, f16, i32 or i64) as .npy version 1.0 (2.0 when
/// the header needs it).
Expected<std::vector<uint8_t>> encodeNpy(const TensorView &tensor);

/// encodeNpy, written to a temporary file renamed over `path`.
Status writeNpy(const std::string &path, const TensorView &tensor);

} // namespace mla::rt

#endif // MLA_RUNTIME_NPY_H
