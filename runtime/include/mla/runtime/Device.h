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
  /// Host and emulator devices: workgroup threads, 0 =
  /// std::thread::hardware_concurrency().
  unsigned hostThreads = 0;
};

/// A handle to a backend. Copies share the backend (and, for the host, its
/// thread pool); the backend lives until the last Device, Kernel or
/// DeviceTensor using it is gone.
class Device {
public:
  /// Opens a device by name:
  ///  * "host": the host backend;
  ///  * "cuda", "cuda:N": CUDA device 0 / N (libcuda.so.1 is loaded at run
  ///    time); the error is one line, e.g. "cuda: no CUDA device";
  ///  * "hip", "hip:N": HIP device 0 / N (libamdhip64 is loaded at run
  ///    time); the error is one line, e.g. "hip: no AMD GPU";
  ///  * "emu", "emu:reverse", "emu:random[:SEED]", "emu:check-orders[:SEED]":
  ///    the AMD emulator on the host (EmuBackend.h), running waves forward,
  ///    reversed or in a seeded random order between barriers, or every
  ///    launch in all three with the results compared;
  ///  * "auto": "cuda" when it opens, else "hip" when it opens, else "host"
  ///    (never the emulator).
  static Expected<Device> open(std::string_view name,
                               const DeviceOptions &options = {});

  /// Device names open() accepts in this build.
  static std::vector<std::string> availableDevices();

  /// Wraps a backend, e.g. one implemented outside the runtime.
  explicit Device(std::shared_ptr<Backend> backend)
      : backend(std::move(backend)) {}

  std::string_view getName() const { return backend->getName(); }
  Backend &getBackend() const { return *backend; }
  const std::shared_ptr<Backend> &shareBackend() const { return backend; }

  /// Loads the package's target this device prefers (Backend::selectTarget:
  /// the first supported one on the host; sm_90a, then sm_80 on CUDA; the
  /// device's gfx processor on HIP).
  Expected<Kernel> loadKernel(const Package &package) const;

  /// Loads the package's target named `target`.
  Expected<Kernel> loadKernel(const Package &package,
                              std::string_view target) const;

private:
  std::shared_ptr<Backend> backend;
};

/// An owning tensor in a device's memory (host memory for the host device),
/// for tools and tests: allocation and the copies are synchronous. Movable.
class DeviceTensor {
public:
  DeviceTensor() = default;

  /// Contents undefined. Fails on negative dims or a size that overflows.
  static Expected<DeviceTensor> allocate(const Device &device, DType dtype,
                                         std::vector<int64_t> shape);
  /// allocate() of the view's dtype and shape, then its contents copied in.
  static Expected<DeviceTensor> upload(const Device &device,
                                       const TensorView &host);

  /// The device view to pass to a launch; valid while this object is alive.
  TensorView view() const { return {data(), dtype, shape}; }
  void *data() const { return buffer ? buffer->data() : nullptr; }
  DType getDType() const { return dtype; }
  const std::vector<int64_t> &getShape() const { return shape; }
  size_t sizeInBytes() const { return view().sizeInBytes(); }

  /// Copies sizeInBytes() bytes from / to host memory.
  Status copyFromHost(const void *src) const;
  Status copyToHost(void *dst) const;
  /// A host copy of the contents.
  Expected<HostTensor> download() const;
  /// Sets every byte to `value`.
  Status fillBytes(uint8_t value) const;

private:
  std::shared_ptr<Backend> backend;
  std::unique_ptr<DeviceBuffer> buffer;
  DType dtype = DType::F32;
  std::vector<int64_t> shape = {0};
};

} // namespace mla::rt

#endif // MLA_RUNTIME_DEVICE_H
