//===- Device.h - A device that loads and runs kernels ----------*- C++ -*-===//

#ifndef MLA_RUNTIME_DEVICE_H
#define MLA_RUNTIME_DEVICE_H

#include "mla/runtime/Backend.h"
#include "mla/runtime/Kernel.h"
#include "mla/runtime/Package.h"
#include "mla/runtime/Status.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mla::rt {

struct DeviceOptions {
  /// Host device: workgroup threads, 0 = std::thread::hardware_concurrency().
  unsigned hostThreads = 0;
};

/// A handle to a backend. Copies share the backend (and, for the host, its
/// thread pool); the backend lives until the last Device or Kernel using it
/// is gone.
class Device {
public:
  /// Opens a device by name; this build knows "host".
  static Expected<Device> open(std::string_view name,
                               const DeviceOptions &options = {});

  /// Device names open() accepts in this build.
  static std::vector<std::string> availableDevices();

  /// Wraps a backend, e.g. one implemented outside the runtime.
  explicit Device(std::shared_ptr<Backend> backend)
      : backend(std::move(backend)) {}

  std::string_view getName() const { return backend->getName(); }
  Backend &getBackend() const { return *backend; }

  /// Loads the package's first target this device supports.
  Expected<Kernel> loadKernel(const Package &package) const;

  /// Loads the package's target named `target`.
  Expected<Kernel> loadKernel(const Package &package,
                              std::string_view target) const;

private:
  std::shared_ptr<Backend> backend;
};

} // namespace mla::rt

#endif // MLA_RUNTIME_DEVICE_H
