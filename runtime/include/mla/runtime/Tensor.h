//===- Tensor.h - Tensor views, scalars and kernel arguments ----*- C++ -*-===//

#ifndef MLA_RUNTIME_TENSOR_H
#define MLA_RUNTIME_TENSOR_H

#include "mla/runtime/DType.h"
#include "mla/runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace mla::rt {

/// A non-owning view of a contiguous, row-major tensor in memory the device
/// can access (host memory for the host device). The caller keeps the memory
/// alive for the duration of any call that receives the view.
struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// Product of the dims (1 for rank 0).
  int64_t numElements() const;
  size_t sizeInBytes() const { return numElements() * dtypeSize(dtype); }
};

/// Renders a shape as "[2, 1, 16, 576]".
std::string shapeToString(const std::vector<int64_t> &shape);

/// A scalar kernel argument: its dtype and value bits.
class Scalar {
public:
  static Scalar f32(float value);
  static Scalar bf16(float value);
  static Scalar f16(float value);
  static Scalar i32(int32_t value);
  static Scalar i64(int64_t value);
  /// `value` rounded to floating type `dtype` (bf16, f16 or f32).
  static Scalar ofFloat(DType dtype, float value);

  DType getDType() const { return dtype; }
  /// The value, stored as the dtype's native little-endian bytes.
  const void *data() const { return &bits; }

private:
  Scalar(DType dtype, uint64_t bits) : dtype(dtype), bits(bits) {}

  DType dtype;
  uint64_t bits;
};

/// One kernel argument: a tensor (manifest kind `memref`) or a scalar.
class ArgValue {
public:
  ArgValue(TensorView tensor) : value(std::move(tensor)) {}
  ArgValue(Scalar scalar) : value(scalar) {}

  bool isTensor() const { return std::holds_alternative<TensorView>(value); }
  bool isScalar() const { return std::holds_alternative<Scalar>(value); }
  const TensorView &tensor() const { return std::get<TensorView>(value); }
  const Scalar &scalar() const { return std::get<Scalar>(value); }

private:
  std::variant<TensorView, Scalar> value;
};

/// An owning, zero-initialized, 64-byte aligned host tensor. Movable.
class HostTensor {
public:
  /// An empty f32 tensor of shape [0].
  HostTensor() = default;

  /// Fails on negative dims or a byte size that does not fit in memory.
  static Expected<HostTensor> allocate(DType dtype, std::vector<int64_t> shape);

  /// A view of the whole tensor; valid while this object is alive.
  TensorView view() const { return {storage.get(), dtype, shape}; }
  void *data() const { return storage.get(); }
  template <typename T> T *dataAs() const {
    return static_cast<T *>(storage.get());
  }
  DType getDType() const { return dtype; }
  const std::vector<int64_t> &getShape() const { return shape; }
  int64_t numElements() const { return view().numElements(); }
  size_t sizeInBytes() const { return view().sizeInBytes(); }

private:
  struct FreeDeleter {
    void operator()(void *ptr) const;
  };
  HostTensor(DType dtype, std::vector<int64_t> shape, void *storage)
      : dtype(dtype), shape(std::move(shape)), storage(storage) {}

  DType dtype = DType::F32;
  std::vector<int64_t> shape = {0};
  std::unique_ptr<void, FreeDeleter> storage;
};

} // namespace mla::rt

#endif // MLA_RUNTIME_TENSOR_H
