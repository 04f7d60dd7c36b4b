//===- Backend.h - Device backend interface ---------------------*- C++ -*-===//
//
// A Backend runs compiled code objects for one family of targets. The host
// backend ships with the runtime; GPU backends (HIP for gfx*, CUDA for sm_*)
// implement the same interface and are wrapped in a Device.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_BACKEND_H
#define MLA_RUNTIME_BACKEND_H

#include "mla/runtime/Status.h"
#include "mla/runtime/Tensor.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mla::rt {

class Backend;

/// A code object loaded by a backend, with its entries resolved in the order
/// they were requested from Backend::loadModule.
class Module {
public:
  virtual ~Module();
  const Backend &getBackend() const { return backend; }

protected:
  explicit Module(const Backend &backend) : backend(backend) {}

private:
  const Backend &backend;
};

/// Device memory owned by a backend (workspaces).
class DeviceBuffer {
public:
  virtual ~DeviceBuffer();
  virtual void *data() const = 0;
  virtual size_t size() const = 0;
};

/// Grid size of one launch: workgroups (bx, by, bz) in [0,X) x [0,Y) x [0,Z).
using Grid = std::array<int64_t, 3>;

/// Implementations must be safe to call from several threads at once.
class Backend {
public:
  virtual ~Backend();

  /// Device name as accepted by Device::open, e.g. "host".
  virtual std::string_view getName() const = 0;

  /// Whether code objects for manifest target `target` run here (the host
  /// backend takes "host-x86_64" on x86-64 builds).
  virtual bool supportsTarget(std::string_view target) const = 0;

  /// Loads a code object and resolves `entries`; an error names the missing
  /// entry or the loader's complaint.
  virtual Expected<std::unique_ptr<Module>>
  loadModule(const std::vector<uint8_t> &code,
             const std::vector<std::string> &entries) = 0;

  /// Allocates `bytes` of device memory, 64-byte aligned, contents undefined.
  virtual Expected<std::unique_ptr<DeviceBuffer>> allocate(size_t bytes) = 0;

  /// Copies device memory to host memory (argument checks read block tables
  /// and lengths through it).
  virtual Status copyToHost(void *dst, const void *src, size_t bytes) = 0;

  /// Runs entry `entryIndex` of `module` once per workgroup of `grid` and
  /// returns when every workgroup has finished. `args` follow the entry's
  /// parameter order; tensors become MLIR strided memref descriptors, scalars
  /// are passed by value as the backend's ABI dictates.
  virtual Status launch(const Module &module, size_t entryIndex,
                        const Grid &grid,
                        const std::vector<const ArgValue *> &args) = 0;
};

struct HostBackendOptions {
  /// Worker threads that run workgroups; 0 means
  /// std::thread::hardware_concurrency().
  unsigned threads = 0;
};

/// The host backend: code objects are x86-64 ELF shared objects, loaded from
/// memory (memfd_create + dlopen); every entry has the C signature
///   void entry(void **args, int64_t bx, int64_t by, int64_t bz);
/// and workgroups run on a thread pool shared by every launch.
std::shared_ptr<Backend> createHostBackend(const HostBackendOptions &options);

/// The manifest target name of host code objects for this build, e.g.
/// "host-x86_64".
std::string_view hostTargetName();

} // namespace mla::rt

#endif // MLA_RUNTIME_BACKEND_H
