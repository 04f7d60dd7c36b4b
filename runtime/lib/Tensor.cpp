//===- Tensor.cpp ---------------------------------------------------------===//

#include "mla/runtime/Tensor.h"

#include "Memory.h"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <limits>

using namespace mla::rt;

int64_t TensorView::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

std::string mla::rt::shapeToString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

Scalar Scalar::f32(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return Scalar(DType::F32, bits);
}

Scalar Scalar::bf16(float value) {
  return Scalar(DType::BF16, floatToBF16(value));
}

Scalar Scalar::f16(float value) {
  return Scalar(DType::F16, floatToF16(value));
}

Scalar Scalar::i32(int32_t value) {
  return Scalar(DType::I32, static_cast<uint32_t>(value));
}

Scalar Scalar::i64(int64_t value) {
  return Scalar(DType::I64, static_cast<uint64_t>(value));
}

Scalar Scalar::ofFloat(DType dtype, float value) {
  assert(isFloatingPoint(dtype) && "ofFloat needs a floating-point dtype");
  if (dtype == DType::BF16)
    return bf16(value);
  if (dtype == DType::F16)
    return f16(value);
  return f32(value);
}

void *mla::rt::allocateAligned64(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded < bytes)
    return nullptr;
  if (rounded == 0)
    rounded = 64;
  void *ptr = std::aligned_alloc(64, rounded);
  if (ptr)
    std::memset(ptr, 0, rounded);
  return ptr;
}

void HostTensor::FreeDeleter::operator()(void *ptr) const { std::free(ptr); }

Expected<HostTensor> HostTensor::allocate(DType dtype,
                                          std::vector<int64_t> shape) {
  uint64_t bytes = dtypeSize(dtype);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      return Status::error(ErrorCode::InvalidArgument,
                           "cannot allocate a tensor of shape " +
                               shapeToString(shape) + ": dim " +
                               std::to_string(i) + " is negative");
    if (shape[i] != 0 && bytes > std::numeric_limits<int64_t>::max() /
                                     static_cast<uint64_t>(shape[i]))
      return Status::error(ErrorCode::InvalidArgument,
                           "cannot allocate a tensor of shape " +
                               shapeToString(shape) + ": too large");
    bytes *= static_cast<uint64_t>(shape[i]);
  }
  void *storage = allocateAligned64(bytes);
  if (!storage)
    return Status::error(ErrorCode::BackendError,
                         "out of memory allocating " + std::to_string(bytes) +
                             " bytes for a tensor of shape " +
                             shapeToString(shape));
  return HostTensor(dtype, std::move(shape), storage);
}
