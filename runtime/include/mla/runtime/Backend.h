//===- Backend.h - Device backend interface ---------------------*- C++ -*-===//
//
// A Backend runs compiled code objects for one family of targets. The host,
// CUDA (sm_*) and HIP (gfx*) backends ship with the runtime; others
// implement the same interface and are wrapped in a Device.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_BACKEND_H
#define MLA_RUNTIME_BACKEND_H

#include "mla/runtime/Manifest.h"
#include "mla/runtime/Status.h"
#include "mla/runtime/Tensor.h"

#include <array>
#include <cstdint>
#include <functional>
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

/// Device memory owned by a backend: workspaces, and tensors of tools and
/// tests (DeviceTensor). Freed by the destructor; a buffer keeps what it needs
/// of its backend alive.
class DeviceBuffer {
public:
  virtual ~DeviceBuffer();
  /// A device address (host address for the host backend); nullptr when
  /// size() is 0 on a GPU backend.
  virtual void *data() const = 0;
  virtual size_t size() const = 0;
};

/// Grid size of one launch: workgroups (bx, by, bz) in [0,X) x [0,Y) x [0,Z).
using Grid = std::array<int64_t, 3>;

/// Threads per workgroup of a GPU launch.
using Block = std::array<int64_t, 3>;

/// How one entry is launched.
struct LaunchConfig {
  Grid grid = {1, 1, 1};
  /// GPU backends: threads per workgroup and dynamic shared memory bytes.
  Block block = {1, 1, 1};
  int64_t sharedBytes = 0;
  /// The kernel waits for the launches before it (LaunchSpec::dependent):
  /// CUDA starts it with programmatic stream serialization where the driver
  /// has cuLaunchKernelEx; other backends launch it as any other.
  bool dependent = false;
  /// GPU backends: the native stream (a CUstream for CUDA, a hipStream_t
  /// for HIP); nullptr is the default stream. The host backend ignores it.
  void *stream = nullptr;
};

/// A stream owned by the caller (Backend::createStream).
class Stream {
public:
  virtual ~Stream();
  /// The native handle for LaunchConfig::stream / LaunchOptions::stream
  /// (nullptr on the host).
  virtual void *handle() const = 0;
};

/// Times work on a stream: device events on a GPU, a steady clock on the
/// host (whose launches are synchronous).
class Timer {
public:
  virtual ~Timer();
  /// Records the start / stop point on `stream` (enqueued on a GPU).
  virtual Status start(void *stream) = 0;
  virtual Status stop(void *stream) = 0;
  /// Waits for the stop point and returns the milliseconds between the two.
  virtual Expected<double> elapsedMs() = 0;
};

/// Work captured from a stream (a CUDA graph), replayable on any stream of
/// the same device. Replays reuse the captured kernel parameters: the same
/// pointers, shapes and scalars; only the memory contents may change.
class Graph {
public:
  virtual ~Graph();
  /// Enqueues one replay on `stream`.
  virtual Status launch(void *stream) = 0;
};

struct MemoryInfo {
  size_t freeBytes = 0;
  size_t totalBytes = 0;
};

/// Implementations must be safe to call from several threads at once.
class Backend {
public:
  virtual ~Backend();

  /// Device name, e.g. "host" or "cuda:0".
  virtual std::string_view getName() const = 0;

  /// A one-line description for tools, e.g. "cuda:0 (NVIDIA H200, compute
  /// capability 9.0)". Defaults to the name.
  virtual std::string getDescription() const;

  /// Whether code objects for manifest target `target` run here (the host
  /// backend takes "host-x86_64" on x86-64 builds).
  virtual bool supportsTarget(std::string_view target) const = 0;

  /// Picks the target Device::loadKernel(package) loads among a package's
  /// target names. The default takes the first supported one; the error
  /// (Unsupported) names the device and the package's targets.
  virtual Expected<std::string>
  selectTarget(const std::vector<std::string> &targets) const;

  /// Whether tensor memory is host memory (the host reads argument contents
  /// directly). False for GPU backends: tensor data pointers are device
  /// addresses there.
  virtual bool usesHostMemory() const = 0;

  /// Whether launch() only enqueues work (GPU backends) instead of returning
  /// when it finished (the host).
  virtual bool isAsynchronous() const = 0;

  /// Called by Device::loadKernel before loadModule, with the code object of
  /// manifest target `target`: a backend whose code objects describe their
  /// kernels (HIP: the AMDGPU metadata) checks them against the manifest and
  /// the device, so that a mismatching package is rejected before anything
  /// is loaded. The default accepts everything.
  virtual Status checkCodeObject(const std::vector<uint8_t> &code,
                                 const Manifest &manifest,
                                 const TargetSpec &target) const;

  /// Loads a code object and resolves `entries`; an error names the missing
  /// entry or the loader's complaint.
  virtual Expected<std::unique_ptr<Module>>
  loadModule(const std::vector<uint8_t> &code,
             const std::vector<std::string> &entries) = 0;

  /// Called once per manifest launch after loadModule, with the launch's
  /// block and shared bytes (grid and stream unset): a GPU backend checks
  /// them against the entry's limits and raises its dynamic shared memory
  /// limit where needed. The default accepts everything.
  virtual Status prepareLaunch(Module &module, size_t entryIndex,
                               const LaunchConfig &config);

  /// Allocates `bytes` of device memory, at least 64-byte (GPU: 256-byte)
  /// aligned, contents undefined.
  virtual Expected<std::unique_ptr<DeviceBuffer>> allocate(size_t bytes) = 0;

  /// Synchronous copies between host memory and device memory, and a
  /// synchronous byte fill of device memory (tools and tests; never used on
  /// the launch path).
  virtual Status copyToHost(void *dst, const void *src, size_t bytes) = 0;
  virtual Status copyToDevice(void *dst, const void *src, size_t bytes) = 0;
  virtual Status fillBytes(void *dst, uint8_t value, size_t bytes) = 0;

  /// Runs (host) or enqueues on config.stream (GPU) entry `entryIndex` of
  /// `module` once per workgroup of config.grid; a grid with a 0 dim does
  /// nothing. `args` follow the entry's parameter order; tensors become MLIR
  /// strided memref descriptors, scalars are passed by value as the
  /// backend's ABI dictates. Never allocates device memory and never waits
  /// for the device.
  virtual Status launch(const Module &module, size_t entryIndex,
                        const LaunchConfig &config,
                        const std::vector<const ArgValue *> &args) = 0;

  /// Waits until the work enqueued on `stream` (nullptr: all work of the
  /// device) has finished, and reports its asynchronous errors. For tools
  /// and tests. Immediate on the host.
  virtual Status synchronize(void *stream = nullptr) = 0;

  /// A new stream. The default (synchronous backends) returns a stream
  /// whose handle is nullptr.
  virtual Expected<std::unique_ptr<Stream>> createStream();

  /// A new timer. The default (synchronous backends) reads a steady clock.
  virtual Expected<std::unique_ptr<Timer>> createTimer();

  /// Captures the work `work` enqueues on `stream` (it must enqueue on
  /// `stream` only, without allocating or synchronizing) into a replayable
  /// graph; nothing runs during capture. `stream` must not be nullptr. The
  /// default returns Unsupported.
  virtual Expected<std::unique_ptr<Graph>>
  captureGraph(void *stream, const std::function<Status()> &work);

  /// Free and total device memory. The default returns Unsupported.
  virtual Expected<MemoryInfo> getMemoryInfo();
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
