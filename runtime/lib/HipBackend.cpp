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

#include "DynamicLibrary.h"
#include "GpuBackend.h"
#include "HipRuntime.h"

#include <algorithm>
#include <cstring>

using namespace mla::rt;
using namespace mla::rt::hip;

namespace {

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

/// The HIP runtime API for GpuBackend.
struct HipTraits {
  using Api = RuntimeApi;
  using State = DeviceState;
  using Scope = ScopedDevice;
  using Result = hipError_t;
  using StreamHandle = hipStream_t;
  using EventHandle = hipEvent_t;
  using GraphHandle = hipGraph_t;
  using GraphExecHandle = hipGraphExec_t;

  static constexpr const char *kPrefix = "hip";
  static constexpr const char *kNoGraphApi =
      "hip: the HIP runtime has no graph API (hipGraphInstantiateWithFlags)";
  static constexpr const char *kMemAlloc = "hipMalloc";
  static constexpr Result kOutOfMemory = hipErrorOutOfMemory;

  static Status callError(const Api &api, const char *call, Result result) {
    return hip::callError(api, call, result);
  }
  static Status check(const Api &api, const char *call, Result result) {
    return gpu::check<HipTraits>(api, call, result);
  }

  static Result allocate(const Api &api, void **pointer, size_t bytes) {
    return api.hipMalloc(pointer, bytes);
  }
  static void freeMemory(const Api &api, void *pointer) {
    api.hipFree(pointer);
  }
  static Status copyToHost(const Api &api, void *dst, const void *src,
                           size_t bytes) {
    return check(api, "hipMemcpy",
                 api.hipMemcpy(dst, src, bytes, hipMemcpyDeviceToHost));
  }
  static Status copyToDevice(const Api &api, void *dst, const void *src,
                             size_t bytes) {
    return check(api, "hipMemcpy",
                 api.hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice));
  }
  static Status fillBytes(const Api &api, void *dst, uint8_t value,
                          size_t bytes) {
    return check(api, "hipMemset", api.hipMemset(dst, value, bytes));
  }
  static Status memoryInfo(const Api &api, size_t *freeBytes,
                           size_t *totalBytes) {
    return check(api, "hipMemGetInfo",
                 api.hipMemGetInfo(freeBytes, totalBytes));
  }
  static Status synchronizeStream(const Api &api, hipStream_t stream) {
    return check(api, "hipStreamSynchronize", api.hipStreamSynchronize(stream));
  }
  static Status synchronizeDevice(const Api &api) {
    return check(api, "hipDeviceSynchronize", api.hipDeviceSynchronize());
  }
  static Status createStream(const Api &api, hipStream_t *stream) {
    return check(api, "hipStreamCreate", api.hipStreamCreate(stream));
  }
  static void destroyStream(const Api &api, hipStream_t stream) {
    api.hipStreamDestroy(stream);
  }
  static Status createEvent(const Api &api, hipEvent_t *event) {
    return check(api, "hipEventCreate", api.hipEventCreate(event));
  }
  static void destroyEvent(const Api &api, hipEvent_t event) {
    api.hipEventDestroy(event);
  }
  static Status recordEvent(const Api &api, hipEvent_t event,
                            hipStream_t stream) {
    return check(api, "hipEventRecord", api.hipEventRecord(event, stream));
  }
  static Status synchronizeEvent(const Api &api, hipEvent_t event) {
    return check(api, "hipEventSynchronize", api.hipEventSynchronize(event));
  }
  static Status elapsedTime(const Api &api, float *ms, hipEvent_t begin,
                            hipEvent_t end) {
    return check(api, "hipEventElapsedTime",
                 api.hipEventElapsedTime(ms, begin, end));
  }
  static Status beginCapture(const Api &api, hipStream_t stream) {
    return check(
        api, "hipStreamBeginCapture",
        api.hipStreamBeginCapture(stream, hipStreamCaptureModeThreadLocal));
  }
  static Status endCapture(const Api &api, hipStream_t stream,
                           hipGraph_t *graph) {
    return check(api, "hipStreamEndCapture",
                 api.hipStreamEndCapture(stream, graph));
  }
  static Status instantiateGraph(const Api &api, hipGraphExec_t *exec,
                                 hipGraph_t graph) {
    return check(api, "hipGraphInstantiateWithFlags",
                 api.hipGraphInstantiateWithFlags(exec, graph, 0));
  }
  static Status launchGraph(const Api &api, hipGraphExec_t exec,
                            hipStream_t stream) {
    return check(api, "hipGraphLaunch", api.hipGraphLaunch(exec, stream));
  }
  static void destroyGraphExec(const Api &api, hipGraphExec_t exec) {
    api.hipGraphExecDestroy(exec);
  }
  static void destroyGraph(const Api &api, hipGraph_t graph) {
    api.hipGraphDestroy(graph);
  }
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

  size_t entryCount() const { return entries.size(); }
};

std::string blockText(const LaunchConfig &config) {
  const Block &b = config.block;
  return std::to_string(b[0]) + "," + std::to_string(b[1]) + "," +
         std::to_string(b[2]);
}

class HipBackend : public gpu::GpuBackend<HipTraits> {
public:
  explicit HipBackend(std::shared_ptr<DeviceState> device)
      : GpuBackend(std::move(device)) {}

  std::string getDescription() const override {
    return name + " (" + state->deviceName + ", " + state->arch + ", " +
           std::to_string(state->computeUnits) + " compute units)";
  }
  bool supportsTarget(std::string_view target) const override {
    return amdgpuProcessor(target) == state->processor;
  }
  Expected<std::string>
  selectTarget(const std::vector<std::string> &targets) const override {
    return onThisDevice(selectHipTarget(state->arch, targets));
  }

  Status checkCodeObject(const std::vector<uint8_t> &code,
                         const Manifest &manifest,
                         const TargetSpec &target) const override;
  Expected<std::unique_ptr<Module>>
  loadModule(const std::vector<uint8_t> &code,
             const std::vector<std::string> &entries) override;
  Status prepareLaunch(Module &module, size_t entryIndex,
                       const LaunchConfig &config) override;
  Status launch(const Module &module, size_t entryIndex,
                const LaunchConfig &config,
                const std::vector<const ArgValue *> &args) override;

private:
  /// The code object's metadata, checked to be for this device.
  Expected<AmdgpuMetadata> readMetadata(const std::vector<uint8_t> &code) const;
};

} // namespace

Expected<AmdgpuMetadata>
HipBackend::readMetadata(const std::vector<uint8_t> &code) const {
  Expected<AmdgpuMetadata> metadata =
      parseAmdgpuMetadata(code.data(), code.size());
  if (!metadata.ok())
    return Status::error(ErrorCode::InvalidPackage,
                         metadata.status().message());
  if (!amdgpuTargetRuns(metadata->target, state->arch))
    return Status::error(ErrorCode::Unsupported,
                         "hip: the code object is for " + metadata->target +
                             ", device '" + name + "' is " + state->arch);
  return metadata;
}

Status HipBackend::checkCodeObject(const std::vector<uint8_t> &code,
                                   const Manifest &manifest,
                                   const TargetSpec &target) const {
  Expected<AmdgpuMetadata> metadata = readMetadata(code);
  if (!metadata.ok())
    return metadata.status();
  AmdgpuDeviceLimits limits;
  limits.ldsBytes = state->ldsBytes;
  limits.wavefrontSize = state->wavefrontSize;
  limits.allowScratch = state->allowScratch;
  return checkAmdgpuCodeObject(*metadata, manifest, target, limits);
}

Expected<std::unique_ptr<Module>>
HipBackend::loadModule(const std::vector<uint8_t> &code,
                       const std::vector<std::string> &entries) {
  Expected<AmdgpuMetadata> metadata = readMetadata(code);
  if (!metadata.ok())
    return metadata.status();
  auto module = std::make_unique<HipModule>(*this, state, code);
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

  ScopedDevice scope(*state);
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
  auto *hipModule = preparedModule<HipModule>(module, entryIndex);
  if (!hipModule)
    return backendError("prepareLaunch: not an entry of this device");
  const HipEntry &entry = hipModule->entries[entryIndex];
  const Block &b = config.block;
  int64_t threads = b[0] * b[1] * b[2];
  int64_t limit =
      std::min<int64_t>(static_cast<int64_t>(entry.maxFlatWorkgroupSize),
                        state->maxThreadsPerBlock);
  if (threads > limit)
    return backendError(
        "block " + blockText(config) + " has " + std::to_string(threads) +
        " threads, the entry allows at most " + std::to_string(limit));
  if (config.sharedBytes + static_cast<int64_t>(entry.groupSegmentFixedSize) >
      state->ldsBytes)
    return backendError(
        "shared " + std::to_string(config.sharedBytes) + " bytes (plus " +
        std::to_string(entry.groupSegmentFixedSize) +
        " static) exceed the device's " + std::to_string(state->ldsBytes) +
        " bytes of LDS per workgroup");
  return Status::success();
}

Status HipBackend::launch(const Module &module, size_t entryIndex,
                          const LaunchConfig &config,
                          const std::vector<const ArgValue *> &args) {
  Expected<const HipModule *> hipModule =
      launchedModule<HipModule>(module, entryIndex);
  if (!hipModule.ok())
    return hipModule.status();
  const HipEntry &entry = (*hipModule)->entries[entryIndex];
  const Grid &grid = config.grid;
  const Block &block = config.block;
  bool empty = false;
  if (Status status = gpu::checkGrid(grid, empty); !status.ok() || empty)
    return status;
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
  ScopedDevice scope(*state);
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
  if (Status status =
          gpu::checkOrdinal("hip: no AMD GPU", options.ordinal, count);
      !status.ok())
    return status;
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
  dylib::flattenLines(device->deviceName);

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
  return gpu::parseOrdinalName(name, "hip");
}

Expected<std::string>
mla::rt::selectHipTarget(std::string_view deviceArch,
                         const std::vector<std::string> &targets) {
  std::string processor = amdgpuProcessor(deviceArch);
  for (const std::string &target : targets)
    if (amdgpuProcessor(target) == processor)
      return target;
  std::string names = gpu::joinNames(targets);
  return Status::error(ErrorCode::Unsupported,
                       "the package has no target for " + processor +
                           " (its targets: " + names + ")");
}
