//===- KernelParams.h - GPU kernel parameters of a launch -------*- C++ -*-===//
//
// The parameter ABI of the compiler's gpu.func kernels, MLIR's default memref
// lowering: for each launch argument, in order,
//   memref of rank R -> void *allocated, void *aligned, int64_t offset,
//                       int64_t sizes[R], int64_t strides[R]
//                       (2 + 1 + 2R separate parameters; allocated ==
//                       aligned == the tensor's device pointer, offset 0,
//                       row-major contiguous element strides);
//   scalar           -> one parameter of the scalar's type (float for f32,
//                       16-bit bits for bf16/f16, int32_t, int64_t).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_KERNELPARAMS_H
#define MLA_RUNTIME_KERNELPARAMS_H

#include "mla/runtime/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mla::rt {

/// The kernel parameters of one launch, in the form cuLaunchKernel's (and
/// hipModuleLaunchKernel's) `kernelParams` takes them. Movable, not copyable
/// (the pointers point into the object's own storage).
class KernelParams {
public:
  KernelParams() = default;
  KernelParams(KernelParams &&) = default;
  KernelParams &operator=(KernelParams &&) = default;
  KernelParams(const KernelParams &) = delete;
  KernelParams &operator=(const KernelParams &) = delete;

  /// Number of kernel parameters.
  size_t size() const { return pointers.size(); }
  /// `data()[i]` points at the value of parameter i.
  void **data() { return pointers.data(); }
  /// Bytes of parameter i: 8 for pointers and int64_t, else the scalar's.
  size_t sizeOf(size_t i) const { return sizes[i]; }
  /// The bits of parameter i, zero-extended to 64 bits.
  uint64_t rawValue(size_t i) const { return values[i]; }

private:
  friend void packKernelParams(const std::vector<const ArgValue *> &args,
                               KernelParams &params);

  /// One 8-byte slot per parameter; the value sits in its low bytes.
  std::vector<uint64_t> values;
  std::vector<uint8_t> sizes;
  std::vector<void *> pointers;
};

/// Builds the kernel parameters of `args` (see the file comment) into
/// `params`, reusing its storage. Pure: it never touches the data pointers.
void packKernelParams(const std::vector<const ArgValue *> &args,
                      KernelParams &params);

} // namespace mla::rt

#endif // MLA_RUNTIME_KERNELPARAMS_H
