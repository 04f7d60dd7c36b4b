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
// CUDA takes the parameters as an array of pointers (KernelParams::data()).
// HIP takes one kernarg buffer in which each parameter sits at the next
// multiple of its own size (natural alignment: what the compiler's gpu.func
// lowering gives the AMDGPU kernel's explicit arguments); kernargLayout
// computes those offsets from the manifest alone and packKernargBuffer
// fills a buffer.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_KERNELPARAMS_H
#define MLA_RUNTIME_KERNELPARAMS_H

#include "mla/runtime/Manifest.h"
#include "mla/runtime/Status.h"
#include "mla/runtime/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <string>
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

/// One launch argument without its value: what its kernel parameters
/// depend on.
struct LaunchParam {
  bool isTensor = true;
  /// The tensor's element type or the scalar's type.
  DType dtype = DType::F32;
  /// Tensors: the rank.
  int rank = 0;
  /// For messages: the manifest role ("q") or "workspace 7".
  std::string name;
};

/// The arguments of a manifest launch, in its `args` order: memref args and
/// workspaces are tensors of their declared rank, scalar args scalars.
std::vector<LaunchParam> launchParams(const Manifest &manifest,
                                      const TargetSpec &target,
                                      const LaunchSpec &launch);

/// Which part of a launch argument a kernel parameter is.
enum class KernargPart { Allocated, Aligned, Offset, Size, Stride, Scalar };

/// One kernel parameter in a kernarg buffer.
struct KernargSlot {
  size_t offset = 0;
  size_t size = 0;
  /// The allocated and aligned pointers of a memref.
  bool isPointer = false;
  /// The launch argument (index into the LaunchParam list) and the part of
  /// it; `dim` for sizes and strides.
  size_t param = 0;
  KernargPart part = KernargPart::Scalar;
  int dim = 0;
};

/// The kernel parameters of `params` (the expansion of packKernelParams), in
/// order, each at the next multiple of its size.
std::vector<KernargSlot> kernargLayout(const std::vector<LaunchParam> &params);

/// Bytes of a kernarg buffer for `layout`: the end of its last slot rounded
/// up to 8 (0 for no slot).
size_t kernargBufferBytes(const std::vector<KernargSlot> &layout);

/// For messages, e.g. "kernel argument 4 (the aligned pointer of 'q')".
std::string describeKernargSlot(const std::vector<KernargSlot> &layout,
                                size_t index,
                                const std::vector<LaunchParam> &params);

/// Copies each parameter of `params` to its slot of `layout` in `buffer`
/// (resized to `bytes`, zero padding; its storage is reused, so steady-state
/// calls do not allocate). Fails (InvalidArgument, nothing written) when the
/// parameter count or a size differs from the layout, or a slot ends past
/// `bytes`.
Status packKernargBuffer(const KernelParams &params,
                         const std::vector<KernargSlot> &layout, size_t bytes,
                         std::vector<uint8_t> &buffer);

} // namespace mla::rt

#endif // MLA_RUNTIME_KERNELPARAMS_H
