//===- Device.cpp ---------------------------------------------------------===//

#include "mla/runtime/Device.h"
#include "mla/runtime/CudaBackend.h"

using namespace mla::rt;

Expected<Device> Device::open(std::string_view name,
                              const DeviceOptions &options) {
  if (name == "host")
    return Device(createHostBackend({options.hostThreads}));
  if (std::optional<int> ordinal = parseCudaDeviceName(name)) {
    CudaBackendOptions cuda;
    cuda.ordinal = *ordinal;
    Expected<std::shared_ptr<Backend>> backend = createCudaBackend(cuda);
    if (!backend.ok())
      return backend.status();
    return Device(backend.take());
  }
  if (name == "auto") {
    Expected<std::shared_ptr<Backend>> cuda = createCudaBackend();
    if (cuda.ok())
      return Device(cuda.take());
    return Device(createHostBackend({options.hostThreads}));
  }
  std::string available;
  for (const std::string &device : availableDevices())
    available += (available.empty() ? "" : ", ") + device;
  return Status::error(
      ErrorCode::Unsupported,
      "device '" + std::string(name) +
          "' is not available in this build (available: " + available + ")");
}

std::vector<std::string> Device::availableDevices() {
  return {"host", "cuda", "cuda:N", "auto"};
}
