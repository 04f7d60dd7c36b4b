//===- Device.cpp ---------------------------------------------------------===//

#include "mla/runtime/Device.h"
#include "mla/runtime/CudaBackend.h"
#include "mla/runtime/EmuBackend.h"
#include "mla/runtime/HipBackend.h"

#include <cstdlib>

using namespace mla::rt;

/// CUDA backend options for device `ordinal`; MLA_CUDA_DRIVER overrides the
/// driver library (tests run tools against a fake driver with it).
static CudaBackendOptions cudaOptions(int ordinal) {
  CudaBackendOptions options;
  options.ordinal = ordinal;
  if (const char *path = std::getenv("MLA_CUDA_DRIVER"); path && *path)
    options.driverPath = path;
  return options;
}

/// HIP backend options for device `ordinal`; MLA_HIP_LIBRARY overrides the
/// HIP runtime library (tests run tools against a fake runtime with it).
static HipBackendOptions hipOptions(int ordinal) {
  HipBackendOptions options;
  options.ordinal = ordinal;
  if (const char *path = std::getenv("MLA_HIP_LIBRARY"); path && *path)
    options.libraryPath = path;
  return options;
}

Expected<Device> Device::open(std::string_view name,
                              const DeviceOptions &options) {
  if (name == "host")
    return Device(createHostBackend({options.hostThreads}));
  if (std::optional<EmuBackendOptions> emu = parseEmuDeviceName(name)) {
    emu->threads = options.hostThreads;
    return Device(createEmuBackend(*emu));
  }
  if (std::optional<int> ordinal = parseCudaDeviceName(name)) {
    Expected<std::shared_ptr<Backend>> backend =
        createCudaBackend(cudaOptions(*ordinal));
    if (!backend.ok())
      return backend.status();
    return Device(backend.take());
  }
  if (std::optional<int> ordinal = parseHipDeviceName(name)) {
    Expected<std::shared_ptr<Backend>> backend =
        createHipBackend(hipOptions(*ordinal));
    if (!backend.ok())
      return backend.status();
    return Device(backend.take());
  }
  if (name == "auto") {
    Expected<std::shared_ptr<Backend>> cuda = createCudaBackend(cudaOptions(0));
    if (cuda.ok())
      return Device(cuda.take());
    Expected<std::shared_ptr<Backend>> hip = createHipBackend(hipOptions(0));
    if (hip.ok())
      return Device(hip.take());
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
  return {"host",
          "cuda",
          "cuda:N",
          "hip",
          "hip:N",
          "emu",
          "emu:reverse",
          "emu:random[:SEED]",
          "emu:check-orders[:SEED]",
          "auto"};
}
