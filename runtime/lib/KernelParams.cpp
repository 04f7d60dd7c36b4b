//===- KernelParams.cpp - GPU kernel parameter packing --------------------===//

#include "mla/runtime/KernelParams.h"

#include <cstring>

using namespace mla::rt;

void mla::rt::packKernelParams(const std::vector<const ArgValue *> &args,
                               KernelParams &params) {
  size_t count = 0;
  for (const ArgValue *arg : args)
    count += arg->isTensor() ? 3 + 2 * arg->tensor().shape.size() : 1;
  // Sized before any pointer is taken: the slots never move afterwards.
  params.values.assign(count, 0);
  params.sizes.assign(count, 8);
  params.pointers.resize(count);

  size_t i = 0;
  for (const ArgValue *arg : args) {
    if (arg->isScalar()) {
      const Scalar &scalar = arg->scalar();
      size_t bytes = dtypeSize(scalar.getDType());
      std::memcpy(&params.values[i], scalar.data(), bytes);
      params.sizes[i++] = static_cast<uint8_t>(bytes);
      continue;
    }
    const TensorView &t = arg->tensor();
    size_t rank = t.shape.size();
    uint64_t address = reinterpret_cast<uintptr_t>(t.data);
    params.values[i] = address;     // allocated
    params.values[i + 1] = address; // aligned
    params.values[i + 2] = 0;       // offset
    int64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      params.values[i + 3 + d] = static_cast<uint64_t>(t.shape[d]);
      params.values[i + 3 + rank + d] = static_cast<uint64_t>(stride);
      stride *= t.shape[d];
    }
    i += 3 + 2 * rank;
  }
  for (size_t p = 0; p < count; ++p)
    params.pointers[p] = &params.values[p];
}
