//===- DeviceTensor.cpp ---------------------------------------------------===//

#include "mla/runtime/Device.h"

using namespace mla::rt;

Expected<DeviceTensor> DeviceTensor::allocate(const Device &device, DType dtype,
                                              std::vector<int64_t> shape) {
  int64_t bytes = static_cast<int64_t>(dtypeSize(dtype));
  for (int64_t dim : shape)
    if (dim < 0 || __builtin_mul_overflow(bytes, dim, &bytes))
      return Status::error(ErrorCode::InvalidArgument,
                           "cannot allocate a device tensor of shape " +
                               shapeToString(shape));
  Expected<std::unique_ptr<DeviceBuffer>> buffer =
      device.getBackend().allocate(static_cast<size_t>(bytes));
  if (!buffer.ok())
    return buffer.status();
  DeviceTensor tensor;
  tensor.backend = device.shareBackend();
  tensor.buffer = buffer.take();
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  return tensor;
}

Expected<DeviceTensor> DeviceTensor::upload(const Device &device,
                                            const TensorView &host) {
  Expected<DeviceTensor> tensor = allocate(device, host.dtype, host.shape);
  if (!tensor.ok())
    return tensor;
  if (Status status = tensor->copyFromHost(host.data); !status.ok())
    return status;
  return tensor;
}

Status DeviceTensor::copyFromHost(const void *src) const {
  if (!sizeInBytes())
    return Status::success();
  return backend->copyToDevice(data(), src, sizeInBytes());
}

Status DeviceTensor::copyToHost(void *dst) const {
  if (!sizeInBytes())
    return Status::success();
  return backend->copyToHost(dst, data(), sizeInBytes());
}

Expected<HostTensor> DeviceTensor::download() const {
  Expected<HostTensor> host = HostTensor::allocate(dtype, shape);
  if (!host.ok())
    return host;
  if (Status status = copyToHost(host->data()); !status.ok())
    return status;
  return host;
}

Status DeviceTensor::fillBytes(uint8_t value) const {
  if (!sizeInBytes())
    return Status::success();
  return backend->fillBytes(data(), value, sizeInBytes());
}
