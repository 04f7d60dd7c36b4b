//===- HipBackend.cpp - Runs AMD code objects through the HIP module API --===//
//
// HIP keeps a current device per thread: every call runs with the backend's
// device current (set for the call when the calling thread has another one,
// restored after). Modules, buffers, streams, events and graphs are released
// by their owners' destructors; each holds the device state alive.
//
// Kernel arguments go to hipModuleLaunchKernel as one kernarg buffer (the
// `extra` HIP_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END form), each
// parameter at the offset the code object's metadata declares; loading has
// checked that those offsets are the natural-alignment layout of the
// compiler's memref ABI (checkAmdgpuCodeObject).
//
//===----------------------------------------------------------------------===//

#include "mla/runtime/HipBackend.h"
#include "mla/runtime/AmdgpuMetadata.h"
#include "mla/runtime/KernelParams.h"

#include "HipRuntime.h"

#include <algorithm>
#include <cstring>

using namespace mla::rt;
using namespace mla::rt::hip;

namespace {

Status backendError(const std::string &message) {
  return Status::error(ErrorCode::BackendError, "hip: " + message);
}

Status argError(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, message);
}

/// What the backend knows about its device.
struct DeviceState {
  DeviceState(const RuntimeApi &api, int ordinal)
      : api(api), ordinal(ordinal) {}

  const RuntimeApi &api;
  int ordinal;
  std::string deviceName;
  /// "gfx942:sramecc+:xnack-" and "gfx942".
  std::string arch;
  std::string processor;
  int64_t ldsBytes = 0;
  int64_t wavefrontSize = 0;
  int64_t maxThreadsPerBlock = 0;
  int computeUnits = 0;
  bool allowScratch = false;
};

/// Makes the device current on this thread for a scope.
class ScopedDevice {
public:
  explicit ScopedDevice(const DeviceState &d) : api(d.api) {
    int current = -1;
    if (api.hipGetDevice(&current) == hipSuccess && current == d.ordinal)
      return;
    if (api.hipSetDevice(d.ordinal) == hipSuccess)
      previous = current;
  }
  ~ScopedDevice() {
    if (previous >= 0)
      api.hipSetDevice(previous);
  }
  ScopedDevice(const ScopedDevice &) = delete;
  ScopedDevice &operator=(const ScopedDevice &) = delete;

private:
  const RuntimeApi &api;
  int previous = -1;
};

/// One resolved entry and what its launches need from the metadata.
struct HipEntry {
  hipFunction_t function = nullptr;
  std::string name;
  /// Explicit arguments, at the metadata's offsets.
  std::vector<KernargSlot> kernargs;
  size_t kernargBytes = 0;
  uint64_t maxFlatWorkgroupSize = 0;
  uint64_t groupSegmentFixedSize = 0;
};

class HipModule : public Module {
public:
  HipModule(const Backend &backend, std::shared_ptr<DeviceState> device,
            std::vector<uint8_t> image)
      : Module(backend), device(std::move(device)), image(std::move(image)) {}
  ~HipModule() override {
    if (!module)
      return;
    ScopedDevice scope(*device);
    device->api.hipModuleUnload(module);
  }

  std::shared_ptr<DeviceState> device;
  /// The code object, alive as long as the module.
  std::vector<uint8_t> image;
  hipModule_t module = nullptr;
  std::vector<HipEntry> entries;
};

class HipBuffer : public DeviceBuffer {
public:
  HipBuffer(std::shared_ptr<DeviceState> device, void *pointer, size_t bytes)
      : device(std::move(device)), pointer(pointer), bytes(bytes) {}
  ~HipBuffer() override {
    if (!pointer)
      return;
    ScopedDevice scope(*device);
    device->api.hipFree(pointer);
  }
  void *data() const override { return pointer; }
  size_t size() const override { return bytes; }

private:
  std::shared_ptr<DeviceState> device;
  void *pointer;
  size_t bytes;
};

class HipStream : public Stream {
public:
  HipStream(std::shared_ptr<DeviceState> device, hipStream_t stream)
      : device(std::move(device)), stream(stream) {}
  ~HipStream() override {
    ScopedDevice scope(*device);
    device->api.hipStreamDestroy(stream);
  }
  void *handle() const override { return stream; }

private:
  std::shared_ptr<DeviceState> device;
  hipStream_t stream;
};

class HipTimer : public Timer {
public:
  HipTimer(std::shared_ptr<DeviceState> device, hipEvent_t begin,
           hipEvent_t end)
      : device(std::move(device)), begin(begin), end(end) {}
  ~HipTimer() override {
    ScopedDevice scope(*device);
    device->api.hipEventDestroy(begin);
    device->api.hipEventDestroy(end);
  }
  Status start(void *stream) override { return record(begin, stream); }
  Status stop(void *stream) override { return record(end, stream); }
  Expected<double> elapsedMs() override {
    const RuntimeApi &api = device->api;
    ScopedDevice scope(*device);
    if (hipError_t r = api.hipEventSynchronize(end))
      return callError(api, "hipEventSynchronize", r);
    float ms = 0;
    if (hipError_t r = api.hipEventElapsedTime(&ms, begin, end))
      return callError(api, "hipEventElapsedTime", r);
    return static_cast<double>(ms);
  }

private:
  Status record(hipEvent_t event, void *stream) {
    ScopedDevice scope(*device);
    if (hipError_t r =
            device->api.hipEventRecord(event, static_cast<hipStream_t>(stream)))
      return callError(device->api, "hipEventRecord", r);
    return Status::success();
  }

  std::shared_ptr<DeviceState> device;
  hipEvent_t begin, end;
};

class HipGraph : public Graph {
public:
  HipGraph(std::shared_ptr<DeviceState> device, hipGraph_t graph,
           hipGraphExec_t exec)
      : device(std::move(device)), graph(graph), exec(exec) {}
  ~HipGraph() override {
    ScopedDevice scope(*device);
    device->api.hipGraphExecDestroy(exec);
    device->api.hipGraphDestroy(graph);
  }
  Status launch(void *stream) override {
    ScopedDevice scope(*device);
    if (hipError_t r =
            device->api.hipGraphLaunch(exec, static_cast<hipStream_t>(stream)))
      return callError(device->api, "hipGraphLaunch", r);
    return Status::success();
  }

private:
  std::shared_ptr<DeviceState> device;
  hipGraph_t graph;
  hipGraphExec_t exec;
};

std::string blockText(const LaunchConfig &config) {
  const Block &b = config.block;
  return std::to_string(b[0]) + "," + std::to_string(b[1]) + "," +
         std::to_string(b[2]);
}

class HipBackend : public Backend {
public:
  explicit HipBackend(std::shared_ptr<DeviceState> device)
      : device(std::move(device)),
        name("hip:" + std::to_string(this->device->ordinal)) {}

  std::string_view getName() const override { return name; }
  std::string getDescription() const override {
    return name + " (" + device->deviceName + ", " + device->arch + ", " +
           std::to_string(device->computeUnits) + " compute units)";
  }
  bool supportsTarget(std::string_view target) const override {
    return amdgpuProcessor(target) == device->processor;
  }
  Expected<std::string>
  selectTarget(const std::vector<std::string> &targets) const override {
    Expected<std::string> target = selectHipTarget(device->arch, targets);
    if (!target.ok())
      return target.status().withContext("device '" + name + "' (" +
                                         device->deviceName + ")");
    return target;
  }
  bool usesHostMemory() const override { return false; }
  bool isAsynchronous() const override { return true; }

  Status checkCodeObject(const std::vector<uint8_t> &code,
                         const Manifest &manifest,
                         const TargetSpec &target) const override;
  Expected<std::unique_ptr<Module>>
  loadModule(const std::vector<uint8_t> &code,
             const std::vector<std::string> &entries) override;
  Status prepareLaunch(Module &module, size_t entryIndex,
                       const LaunchConfig &config) override;
  Expected<std::unique_ptr<DeviceBuffer>> allocate(size_t bytes) override;
  Status copyToHost(void *dst, const void *src, size_t bytes) override;
  Status copyToDevice(void *dst, const void *src, size_t bytes) override;
  Status fillBytes(void *dst, uint8_t value, size_t bytes) override;
  Status launch(const Module &module, size_t entryIndex,
                const LaunchConfig &config,
                const std::vector<const ArgValue *> &args) override;
  Status synchronize(void *stream) override;
  Expected<std::unique_ptr<Stream>> createStream() override;
  Expected<std::unique_ptr<Timer>> createTimer() override;
  Expected<std::unique_ptr<Graph>>
  captureGraph(void *stream, const std::function<Status()> &work) override;
  Expected<MemoryInfo> getMemoryInfo() override;

private:
  const RuntimeApi &api() const { return device->api; }
  /// The code object's metadata, checked to be for this device.
  Expected<AmdgpuMetadata> readMetadata(const std::vector<uint8_t> &code) const;

  std::shared_ptr<DeviceState> device;
  std::string name;
};

} // namespace

Expected<AmdgpuMetadata>
HipBackend::readMetadata(const std::vector<uint8_t> &code) const {
  Expected<AmdgpuMetadata> metadata =
      parseAmdgpuMetadata(code.data(), code.size());
  if (!metadata.ok())
    return Status::error(ErrorCode::InvalidPackage,
                         metadata.status().message());
  if (!amdgpuTargetRuns(metadata->target, device->arch))
    return Status::error(ErrorCode::Unsupported,
                         "hip: the code object is for " + metadata->target +
                             ", device '" + name + "' is " + device->arch);
  return metadata;
}

Status HipBackend::checkCodeObject(const std::vector<uint8_t> &code,
                                   const Manifest &manifest,
                                   const TargetSpec &target) const {
  Expected<AmdgpuMetadata> metadata = readMetadata(code);
  if (!metadata.ok())
    return metadata.status();
  AmdgpuDeviceLimits limits;
  limits.ldsBytes = device->ldsBytes;
  limits.wavefrontSize = device->wavefrontSize;
  limits.allowScratch = device->allowScratch;
  return checkAmdgpuCodeObject(*metadata, manifest, target, limits);
}

Expected<std::unique_ptr<Module>>
HipBackend::loadModule(const std::vector<uint8_t> &code,
                       const std::vector<std::string> &entries) {
  Expected<AmdgpuMetadata> metadata = readMetadata(code);
  if (!metadata.ok())
    return metadata.status();
  auto module = std::make_unique<HipModule>(*this, device, code);
  for (const std::string &entry : entries) {
    const AmdgpuKernelMetadata *kernel = metadata->findKernel(entry);
    if (!kernel)
      return backendError("the code object has no entry '" + entry + "'");
    HipEntry resolved;
    resolved.name = entry;
    for (const AmdgpuKernelArg &arg : kernel->args)
      if (!arg.isHidden())
        resolved.kernargs.push_back(
            {static_cast<size_t>(arg.offset), static_cast<size_t>(arg.size),
             arg.valueKind == "global_buffer", resolved.kernargs.size()});
    resolved.kernargBytes = kernargBufferBytes(resolved.kernargs);
    resolved.maxFlatWorkgroupSize = kernel->maxFlatWorkgroupSize;
    resolved.groupSegmentFixedSize = kernel->groupSegmentFixedSize;
    module->entries.push_back(std::move(resolved));
  }

  ScopedDevice scope(*device);
  if (hipError_t r =
          api().hipModuleLoadData(&module->module, module->image.data())) {
    module->module = nullptr;
    return backendError("loading the code object failed: " +
                        errorString(api(), r));
  }
  for (HipEntry &entry : module->entries) {
    hipError_t r = api().hipModuleGetFunction(&entry.function, module->module,
                                              entry.name.c_str());
    if (r == hipErrorNotFound)
      return backendError("the code object has no entry '" + entry.name + "'");
    if (r)
      return callError(api(), "hipModuleGetFunction", r);
  }
  return std::unique_ptr<Module>(std::move(module));
}

Status HipBackend::prepareLaunch(Module &module, size_t entryIndex,
                                 const LaunchConfig &config) {
  auto &hipModule = static_cast<HipModule &>(module);
  if (&module.getBackend() != this || entryIndex >= hipModule.entries.size())
    return backendError("prepareLaunch: not an entry of this device");
  const HipEntry &entry = hipModule.entries[entryIndex];
  const Block &b = config.block;
  int64_t threads = b[0] * b[1] * b[2];
  int64_t limit =
      std::min<int64_t>(static_cast<int64_t>(entry.maxFlatWorkgroupSize),
                        device->maxThreadsPerBlock);
  if (threads > limit)
    return backendError(
        "block " + blockText(config) + " has " + std::to_string(threads) +
        " threads, the entry allows at most " + std::to_string(limit));
  if (config.sharedBytes + static_cast<int64_t>(entry.groupSegmentFixedSize) >
      device->ldsBytes)
    return backendError(
        "shared " + std::to_string(config.sharedBytes) + " bytes (plus " +
        std::to_string(entry.groupSegmentFixedSize) +
        " static) exceed the device's " + std::to_string(device->ldsBytes) +
        " bytes of LDS per workgroup");
  return Status::success();
}

Expected<std::unique_ptr<DeviceBuffer>> HipBackend::allocate(size_t bytes) {
  void *pointer = nullptr;
  if (bytes) {
    ScopedDevice scope(*device);
    if (hipError_t r = api().hipMalloc(&pointer, bytes)) {
      if (r == hipErrorOutOfMemory)
        return backendError("out of device memory allocating " +
                            std::to_string(bytes) + " bytes");
      return callError(api(), "hipMalloc", r);
    }
  }
  return std::unique_ptr<DeviceBuffer>(
      std::make_unique<HipBuffer>(device, pointer, bytes));
}

Status HipBackend::copyToHost(void *dst, const void *src, size_t bytes) {
  if (!bytes)
    return Status::success();
  ScopedDevice scope(*device);
  if (hipError_t r = api().hipMemcpy(dst, src, bytes, hipMemcpyDeviceToHost))
    return callError(api(), "hipMemcpy", r);
  return Status::success();
}

Status HipBackend::copyToDevice(void *dst, const void *src, size_t bytes) {
  if (!bytes)
    return Status::success();
  ScopedDevice scope(*device);
  if (hipError_t r = api().hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice))
    return callError(api(), "hipMemcpy", r);
  return Status::success();
}

Status HipBackend::fillBytes(void *dst, uint8_t value, size_t bytes) {
  if (!bytes)
    return Status::success();
  ScopedDevice scope(*device);
  if (hipError_t r = api().hipMemset(dst, value, bytes))
    return callError(api(), "hipMemset", r);
  return Status::success();
}

Status HipBackend::launch(const Module &module, size_t entryIndex,
                          const LaunchConfig &config,
                          const std::vector<const ArgValue *> &args) {
  if (&module.getBackend() != this)
    return backendError("module was loaded by another backend");
  const auto &hipModule = static_cast<const HipModule &>(module);
  if (entryIndex >= hipModule.entries.size())
    return backendError("entry index " + std::to_string(entryIndex) +
                        " is out of range");
  const HipEntry &entry = hipModule.entries[entryIndex];
  const Grid &grid = config.grid;
  const Block &block = config.block;
  for (int64_t dim : grid)
    if (dim < 0)
      return argError("invalid grid " +
                      shapeToString({grid[0], grid[1], grid[2]}));
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
    return Status::success();
  if (block[0] < 1 || block[1] < 1 || block[2] < 1 || block[0] > 1024 ||
      block[1] > 1024 || block[2] > 1024 || config.sharedBytes < 0 ||
      config.sharedBytes > INT32_MAX)
    return argError("invalid block " +
                    shapeToString({block[0], block[1], block[2]}) +
                    " or shared bytes " + std::to_string(config.sharedBytes));
  // The dispatch packet counts work-items in 32 bits per dimension.
  for (int d = 0; d < 3; ++d)
    if (grid[d] > static_cast<int64_t>(UINT32_MAX) / block[d])
      return argError("grid " + shapeToString({grid[0], grid[1], grid[2]}) +
                      " with block " +
                      shapeToString({block[0], block[1], block[2]}) +
                      " exceeds HIP's limits (grid x block < 2^32 "
                      "work-items per dimension)");

  // Reused per thread: steady-state launches do not allocate.
  thread_local KernelParams params;
  thread_local std::vector<uint8_t> kernargs;
  packKernelParams(args, params);
  if (Status status = packKernargBuffer(params, entry.kernargs,
                                        entry.kernargBytes, kernargs);
      !status.ok())
    return status.withContext("'" + entry.name + "'");
  size_t kernargBytes = kernargs.size();
  void *extra[] = {kLaunchParamBufferPointer, kernargs.data(),
                   kLaunchParamBufferSize, &kernargBytes, kLaunchParamEnd};
  ScopedDevice scope(*device);
  if (hipError_t r = api().hipModuleLaunchKernel(
          entry.function, static_cast<unsigned>(grid[0]),
          static_cast<unsigned>(grid[1]), static_cast<unsigned>(grid[2]),
          static_cast<unsigned>(block[0]), static_cast<unsigned>(block[1]),
          static_cast<unsigned>(block[2]),
          static_cast<unsigned>(config.sharedBytes),
          static_cast<hipStream_t>(config.stream), nullptr, extra))
    return callError(api(), "hipModuleLaunchKernel", r);
  return Status::success();
}

Status HipBackend::synchronize(void *stream) {
  ScopedDevice scope(*device);
  if (stream) {
    if (hipError_t r =
            api().hipStreamSynchronize(static_cast<hipStream_t>(stream)))
      return callError(api(), "hipStreamSynchronize", r);
    return Status::success();
  }
  if (hipError_t r = api().hipDeviceSynchronize())
    return callError(api(), "hipDeviceSynchronize", r);
  return Status::success();
}

Expected<std::unique_ptr<Stream>> HipBackend::createStream() {
  ScopedDevice scope(*device);
  hipStream_t stream = nullptr;
  if (hipError_t r = api().hipStreamCreate(&stream))
    return callError(api(), "hipStreamCreate", r);
  return std::unique_ptr<Stream>(std::make_unique<HipStream>(device, stream));
}

Expected<std::unique_ptr<Timer>> HipBackend::createTimer() {
  ScopedDevice scope(*device);
  hipEvent_t begin = nullptr, end = nullptr;
  if (hipError_t r = api().hipEventCreate(&begin))
    return callError(api(), "hipEventCreate", r);
  if (hipError_t r = api().hipEventCreate(&end)) {
    api().hipEventDestroy(begin);
    return callError(api(), "hipEventCreate", r);
  }
  return std::unique_ptr<Timer>(std::make_unique<HipTimer>(device, begin, end));
}

Expected<std::unique_ptr<Graph>>
HipBackend::captureGraph(void *stream, const std::function<Status()> &work) {
  if (!api().hasGraphs())
    return Status::error(ErrorCode::Unsupported,
                         "hip: the HIP runtime has no graph API "
                         "(hipGraphInstantiateWithFlags)");
  if (!stream)
    return argError("graph capture needs a stream (the default stream "
                    "cannot be captured)");
  auto hipStream = static_cast<hipStream_t>(stream);
  ScopedDevice scope(*device);
  if (hipError_t r = api().hipStreamBeginCapture(
          hipStream, hipStreamCaptureModeThreadLocal))
    return callError(api(), "hipStreamBeginCapture", r);
  Status status = work();
  hipGraph_t graph = nullptr;
  // Always ended, so that the stream is usable again whatever happened.
  hipError_t ended = api().hipStreamEndCapture(hipStream, &graph);
  if (!status.ok() || ended) {
    if (graph)
      api().hipGraphDestroy(graph);
    if (!status.ok())
      return status.withContext("during graph capture");
    return callError(api(), "hipStreamEndCapture", ended);
  }
  hipGraphExec_t exec = nullptr;
  if (hipError_t r = api().hipGraphInstantiateWithFlags(&exec, graph, 0)) {
    api().hipGraphDestroy(graph);
    return callError(api(), "hipGraphInstantiateWithFlags", r);
  }
  return std::unique_ptr<Graph>(
      std::make_unique<HipGraph>(device, graph, exec));
}

Expected<MemoryInfo> HipBackend::getMemoryInfo() {
  ScopedDevice scope(*device);
  MemoryInfo info;
  if (hipError_t r = api().hipMemGetInfo(&info.freeBytes, &info.totalBytes))
    return callError(api(), "hipMemGetInfo", r);
  return info;
}

Expected<std::shared_ptr<Backend>>
mla::rt::createHipBackend(const HipBackendOptions &options) {
  Expected<const RuntimeApi *> loaded = loadRuntime(options.libraryPath);
  if (!loaded.ok())
    return loaded.status();
  const RuntimeApi &api = **loaded;
  int count = 0;
  if (hipError_t r = api.hipGetDeviceCount(&count)) {
    if (r == hipErrorNoDevice)
      return Status::error(ErrorCode::Unsupported, "hip: no AMD GPU");
    return callError(api, "hipGetDeviceCount", r);
  }
  if (count == 0)
    return Status::error(ErrorCode::Unsupported, "hip: no AMD GPU");
  if (options.ordinal < 0 || options.ordinal >= count)
    return Status::error(ErrorCode::Unsupported,
                         "hip: no AMD GPU " + std::to_string(options.ordinal) +
                             " (this machine has " + std::to_string(count) +
                             ")");
  auto device = std::make_shared<DeviceState>(api, options.ordinal);
  device->allowScratch = options.allowScratch;
  hipDevice_t handle = 0;
  if (hipError_t r = api.hipDeviceGet(&handle, options.ordinal))
    return callError(api, "hipDeviceGet", r);
  char deviceName[256] = {};
  if (hipError_t r =
          api.hipDeviceGetName(deviceName, sizeof(deviceName) - 1, handle))
    return callError(api, "hipDeviceGetName", r);
  device->deviceName = deviceName;
  for (char &c : device->deviceName)
    if (c == '\n' || c == '\r')
      c = ' ';

  int lds = 0, warp = 0, threads = 0, units = 0;
  for (auto [attribute, value] :
       {std::pair{hipDeviceAttributeMaxSharedMemoryPerBlock, &lds},
        std::pair{hipDeviceAttributeWarpSize, &warp},
        std::pair{hipDeviceAttributeMaxThreadsPerBlock, &threads},
        std::pair{hipDeviceAttributeMultiprocessorCount, &units}})
    if (hipError_t r =
            api.hipDeviceGetAttribute(value, attribute, options.ordinal))
      return callError(api, "hipDeviceGetAttribute", r);
  if ((warp != 32 && warp != 64) || lds <= 0 || threads <= 0)
    return Status::error(
        ErrorCode::Unsupported,
        "hip: unexpected device attributes (warp size " + std::to_string(warp) +
            ", " + std::to_string(lds) +
            " bytes of LDS per block): the HIP runtime's attribute numbering "
            "is not ROCm 5.0 or newer");
  device->ldsBytes = lds;
  device->wavefrontSize = warp;
  device->maxThreadsPerBlock = threads;
  device->computeUnits = units;

  // Only gcnArchName is read, from a zeroed buffer larger than any layout.
  std::vector<unsigned char> properties(kDevicePropBufferBytes, 0);
  bool r0600 = api.hipGetDevicePropertiesR0600 != nullptr;
  auto getProperties =
      r0600 ? api.hipGetDevicePropertiesR0600 : api.hipGetDevicePropertiesR0000;
  if (hipError_t r = getProperties(properties.data(), options.ordinal))
    return callError(
        api, r0600 ? "hipGetDevicePropertiesR0600" : "hipGetDeviceProperties",
        r);
  device->arch = archNameFromProperties(properties, r0600);
  if (device->arch.empty())
    return Status::error(
        ErrorCode::Unsupported,
        std::string("hip: cannot read the device's architecture name "
                    "(gcnArchName of ") +
            (r0600 ? "hipGetDevicePropertiesR0600" : "hipGetDeviceProperties") +
            " is not 'gfx...'; the hipDeviceProp_t layouts of ROCm 5.x to 7.x "
            "are assumed)");
  device->processor = amdgpuProcessor(device->arch);
  return std::shared_ptr<Backend>(
      std::make_shared<HipBackend>(std::move(device)));
}

std::optional<int> mla::rt::parseHipDeviceName(std::string_view name) {
  if (name == "hip")
    return 0;
  if (name.substr(0, 4) != "hip:" || name.size() == 4 || name.size() > 10)
    return std::nullopt;
  int ordinal = 0;
  for (char c : name.substr(4)) {
    if (c < '0' || c > '9')
      return std::nullopt;
    ordinal = ordinal * 10 + (c - '0');
  }
  return ordinal;
}

Expected<std::string>
mla::rt::selectHipTarget(std::string_view deviceArch,
                         const std::vector<std::string> &targets) {
  std::string processor = amdgpuProcessor(deviceArch);
  for (const std::string &target : targets)
    if (amdgpuProcessor(target) == processor)
      return target;
  std::string names;
  for (const std::string &target : targets)
    names += (names.empty() ? "" : ", ") + target;
  return Status::error(ErrorCode::Unsupported,
                       "the package has no target for " + processor +
                           " (its targets: " + names + ")");
}
