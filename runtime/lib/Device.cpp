//===- Device.cpp ---------------------------------------------------------===//

#include "mla/runtime/Device.h"

using namespace mla::rt;

Expected<Device> Device::open(std::string_view name,
                              const DeviceOptions &options) {
  if (name == "host")
    return Device(createHostBackend({options.hostThreads}));
  std::string available;
  for (const std::string &device : availableDevices())
    available += (available.empty() ? "" : ", ") + device;
  return Status::error(
      ErrorCode::Unsupported,
      "device '" + std::string(name) +
          "' is not available in this build (available: " + available + ")");
}

std::vector<std::string> Device::availableDevices() { return {"host"}; }
