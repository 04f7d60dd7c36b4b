//===- Memory.h - Aligned host allocation -----------------------*- C++ -*-===//

#ifndef MLA_RUNTIME_LIB_MEMORY_H
#define MLA_RUNTIME_LIB_MEMORY_H

#include <cstddef>

namespace mla::rt {

/// Allocates `bytes` (rounded up to a multiple of 64, at least 64) of zeroed
/// host memory aligned to 64 bytes; release it with std::free. Returns
/// nullptr on failure.
void *allocateAligned64(size_t bytes);

} // namespace mla::rt

#endif // MLA_RUNTIME_LIB_MEMORY_H
