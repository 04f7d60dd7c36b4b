//===- CudaBackend.cpp - Runs PTX through the CUDA driver API -------------===//
//
// Every driver call runs with the device's primary context current (pushed
// for the call when the calling thread has another one, popped after). The
// context, modules, buffers, streams, events and graphs are released by
// their owners' destructors; each holds the context alive.
//
//===----------------------------------------------------------------------===//

#include "mla/runtime/CudaBackend.h"
#include "mla/runtime/KernelParams.h"

#include "CudaDriver.h"
#include "DynamicLibrary.h"
#include "GpuBackend.h"

#include <algorithm>
#include <cstring>
#include <mutex>

using namespace mla::rt;
using namespace mla::rt::cuda;

namespace {

Status argError(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, message);
}

/// A device's primary context and what the backend needs to know about the
/// device.
struct Context {
  Context(const DriverApi &api, CUdevice device, CUcontext context)
      : api(api), device(device), context(context) {}
  ~Context() { api.cuDevicePrimaryCtxRelease(device); }

  const DriverApi &api;
  CUdevice device;
  CUcontext context;
  int ordinal = 0;
  int ccMajor = 0, ccMinor = 0;
  int maxSharedOptin = 0;
  std::string deviceName;
};

/// Makes the context current on this thread for a scope.
class ScopedContext {
public:
  explicit ScopedContext(const Context &c) : api(c.api) {
    CUcontext current = nullptr;
    if (api.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == c.context)
      return;
    pushed = api.cuCtxPushCurrent(c.context) == CUDA_SUCCESS;
  }
  ~ScopedContext() {
    CUcontext popped;
    if (pushed)
      api.cuCtxPopCurrent(&popped);
  }
  ScopedContext(const ScopedContext &) = delete;
  ScopedContext &operator=(const ScopedContext &) = delete;

private:
  const DriverApi &api;
  bool pushed = false;
};

CUdeviceptr devicePointer(const void *pointer) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(pointer));
}

/// The driver API for GpuBackend.
struct CudaTraits {
  using Api = DriverApi;
  using State = Context;
  using Scope = ScopedContext;
  using Result = CUresult;
  using StreamHandle = CUstream;
  using EventHandle = CUevent;
  using GraphHandle = CUgraph;
  using GraphExecHandle = CUgraphExec;

  static constexpr const char *kPrefix = "cuda";
  static constexpr const char *kNoGraphApi =
      "cuda: the NVIDIA driver has no graph API (cuGraphInstantiateWithFlags)";
  static constexpr const char *kMemAlloc = "cuMemAlloc";
  static constexpr Result kOutOfMemory = CUDA_ERROR_OUT_OF_MEMORY;

  static Status callError(const Api &api, const char *call, Result result) {
    return cuda::callError(api, call, result);
  }
  static Status check(const Api &api, const char *call, Result result) {
    return gpu::check<CudaTraits>(api, call, result);
  }

  static Result allocate(const Api &api, void **pointer, size_t bytes) {
    CUdeviceptr device = 0;
    Result r = api.cuMemAlloc(&device, bytes);
    *pointer = reinterpret_cast<void *>(static_cast<uintptr_t>(device));
    return r;
  }
  static void freeMemory(const Api &api, void *pointer) {
    api.cuMemFree(devicePointer(pointer));
  }
  static Status copyToHost(const Api &api, void *dst, const void *src,
                           size_t bytes) {
    return check(api, "cuMemcpyDtoH",
                 api.cuMemcpyDtoH(dst, devicePointer(src), bytes));
  }
  static Status copyToDevice(const Api &api, void *dst, const void *src,
                             size_t bytes) {
    return check(api, "cuMemcpyHtoD",
                 api.cuMemcpyHtoD(devicePointer(dst), src, bytes));
  }
  static Status fillBytes(const Api &api, void *dst, uint8_t value,
                          size_t bytes) {
    return check(api, "cuMemsetD8",
                 api.cuMemsetD8(devicePointer(dst), value, bytes));
  }
  static Status memoryInfo(const Api &api, size_t *freeBytes,
                           size_t *totalBytes) {
    return check(api, "cuMemGetInfo", api.cuMemGetInfo(freeBytes, totalBytes));
  }
  static Status synchronizeStream(const Api &api, CUstream stream) {
    return check(api, "cuStreamSynchronize", api.cuStreamSynchronize(stream));
  }
  static Status synchronizeDevice(const Api &api) {
    return check(api, "cuCtxSynchronize", api.cuCtxSynchronize());
  }
  static Status createStream(const Api &api, CUstream *stream) {
    return check(api, "cuStreamCreate",
                 api.cuStreamCreate(stream, CU_STREAM_DEFAULT));
  }
  static void destroyStream(const Api &api, CUstream stream) {
    api.cuStreamDestroy(stream);
  }
  static Status createEvent(const Api &api, CUevent *event) {
    return check(api, "cuEventCreate",
                 api.cuEventCreate(event, CU_EVENT_DEFAULT));
  }
  static void destroyEvent(const Api &api, CUevent event) {
    api.cuEventDestroy(event);
  }
  static Status recordEvent(const Api &api, CUevent event, CUstream stream) {
    return check(api, "cuEventRecord", api.cuEventRecord(event, stream));
  }
  static Status synchronizeEvent(const Api &api, CUevent event) {
    return check(api, "cuEventSynchronize", api.cuEventSynchronize(event));
  }
  static Status elapsedTime(const Api &api, float *ms, CUevent begin,
                            CUevent end) {
    return check(api, "cuEventElapsedTime",
                 api.cuEventElapsedTime(ms, begin, end));
  }
  static Status beginCapture(const Api &api, CUstream stream) {
    return check(
        api, "cuStreamBeginCapture",
        api.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  }
  static Status endCapture(const Api &api, CUstream stream, CUgraph *graph) {
    return check(api, "cuStreamEndCapture",
                 api.cuStreamEndCapture(stream, graph));
  }
  static Status instantiateGraph(const Api &api, CUgraphExec *exec,
                                 CUgraph graph) {
    return check(api, "cuGraphInstantiateWithFlags",
                 api.cuGraphInstantiateWithFlags(exec, graph, 0));
  }
  static Status launchGraph(const Api &api, CUgraphExec exec, CUstream stream) {
    return check(api, "cuGraphLaunch", api.cuGraphLaunch(exec, stream));
  }
  static void destroyGraphExec(const Api &api, CUgraphExec exec) {
    api.cuGraphExecDestroy(exec);
  }
  static void destroyGraph(const Api &api, CUgraph graph) {
    api.cuGraphDestroy(graph);
  }
};

class CudaModule : public Module {
public:
  CudaModule(const Backend &backend, std::shared_ptr<Context> context,
             CUmodule module)
      : Module(backend), context(std::move(context)), module(module) {}
  ~CudaModule() override {
    ScopedContext scope(*context);
    context->api.cuModuleUnload(module);
  }
  size_t entryCount() const { return functions.size(); }

  std::shared_ptr<Context> context;
  CUmodule module;
  std::vector<CUfunction> functions;
  /// The dynamic shared memory limit set on each function (0: default).
  std::vector<int64_t> sharedLimits;
};

/// The JIT log as one line: its non-empty lines joined by "; ".
std::string oneLine(const char *log) {
  std::string joined, line;
  auto flush = [&] {
    size_t first = line.find_first_not_of(" \t");
    size_t last = line.find_last_not_of(" \t");
    if (first != std::string::npos)
      joined +=
          (joined.empty() ? "" : "; ") + line.substr(first, last - first + 1);
    line.clear();
  };
  for (const char *c = log; *c; ++c) {
    if (*c == '\n' || *c == '\r')
      flush();
    else
      line += *c;
  }
  flush();
  return joined;
}

class CudaBackend : public gpu::GpuBackend<CudaTraits> {
public:
  explicit CudaBackend(std::shared_ptr<Context> context)
      : GpuBackend(std::move(context)) {}

  std::string getDescription() const override {
    return name + " (" + state->deviceName + ", compute capability " +
           std::to_string(state->ccMajor) + "." +
           std::to_string(state->ccMinor) + ")";
  }
  bool supportsTarget(std::string_view target) const override {
    return cudaTargetRuns(state->ccMajor, state->ccMinor, target);
  }
  Expected<std::string>
  selectTarget(const std::vector<std::string> &targets) const override {
    return onThisDevice(
        selectCudaTarget(state->ccMajor, state->ccMinor, targets));
  }

  Expected<std::unique_ptr<Module>>
  loadModule(const std::vector<uint8_t> &code,
             const std::vector<std::string> &entries) override;
  Status prepareLaunch(Module &module, size_t entryIndex,
                       const LaunchConfig &config) override;
  Status launch(const Module &module, size_t entryIndex,
                const LaunchConfig &config,
                const std::vector<const ArgValue *> &args) override;
};

} // namespace

Expected<std::unique_ptr<Module>>
CudaBackend::loadModule(const std::vector<uint8_t> &code,
                        const std::vector<std::string> &entries) {
  static const uint8_t kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
  std::string ptx;
  const void *image = code.data();
  if (code.size() < 4 || std::memcmp(code.data(), kElfMagic, 4) != 0) {
    // PTX text, possibly without its terminating NUL.
    size_t end = code.size();
    while (end && code[end - 1] == 0)
      --end;
    if (end == 0)
      return backendError("the code object is empty");
    for (size_t i = 0; i < end; ++i)
      if (code[i] == 0 || code[i] >= 0x80)
        return backendError("the code object is neither PTX text nor a "
                            "cubin (byte " +
                            std::to_string(i) + " is not ASCII)");
    ptx.assign(code.begin(), code.begin() + end);
    image = ptx.c_str();
  }

  std::vector<char> errorLog(16384, 0), infoLog(16384, 0);
  int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                   CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {
      errorLog.data(), reinterpret_cast<void *>(uintptr_t{errorLog.size() - 1}),
      infoLog.data(), reinterpret_cast<void *>(uintptr_t{infoLog.size() - 1})};
  ScopedContext scope(*state);
  CUmodule handle = nullptr;
  if (CUresult r =
          api().cuModuleLoadDataEx(&handle, image, 4, options, values)) {
    std::string log = oneLine(errorLog.data());
    return backendError(
        "loading the code object failed: " + errorString(api(), r) +
        (log.empty() ? "" : ": " + log));
  }
  auto module = std::make_unique<CudaModule>(*this, state, handle);
  for (const std::string &entry : entries) {
    CUfunction function = nullptr;
    CUresult r = api().cuModuleGetFunction(&function, handle, entry.c_str());
    if (r == CUDA_ERROR_NOT_FOUND)
      return backendError("the code object has no entry '" + entry + "'");
    if (r)
      return callError(api(), "cuModuleGetFunction", r);
    module->functions.push_back(function);
    module->sharedLimits.push_back(0);
  }
  return std::unique_ptr<Module>(std::move(module));
}

Status CudaBackend::prepareLaunch(Module &module, size_t entryIndex,
                                  const LaunchConfig &config) {
  auto *cudaModule = preparedModule<CudaModule>(module, entryIndex);
  if (!cudaModule)
    return backendError("prepareLaunch: not an entry of this device");
  CUfunction function = cudaModule->functions[entryIndex];
  ScopedContext scope(*state);
  int maxThreads = 0;
  if (CUresult r = api().cuFuncGetAttribute(
          &maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function))
    return callError(api(), "cuFuncGetAttribute", r);
  const Block &b = config.block;
  int64_t threads = b[0] * b[1] * b[2];
  if (threads > maxThreads)
    return backendError(
        "block " + std::to_string(b[0]) + "," + std::to_string(b[1]) + "," +
        std::to_string(b[2]) + " has " + std::to_string(threads) +
        " threads, the entry allows at most " + std::to_string(maxThreads));
  if (config.sharedBytes <= kDefaultMaxDynamicShared)
    return Status::success();
  int staticShared = 0;
  if (CUresult r = api().cuFuncGetAttribute(
          &staticShared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function))
    return callError(api(), "cuFuncGetAttribute", r);
  if (config.sharedBytes + staticShared > state->maxSharedOptin)
    return backendError("shared " + std::to_string(config.sharedBytes) +
                        " bytes (plus " + std::to_string(staticShared) +
                        " static) exceed the device's limit of " +
                        std::to_string(state->maxSharedOptin) +
                        " bytes per block");
  int64_t &limit = cudaModule->sharedLimits[entryIndex];
  if (config.sharedBytes <= limit)
    return Status::success();
  if (CUresult r = api().cuFuncSetAttribute(
          function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
          static_cast<int>(config.sharedBytes)))
    return callError(api(), "cuFuncSetAttribute", r);
  limit = config.sharedBytes;
  return Status::success();
}

Status CudaBackend::launch(const Module &module, size_t entryIndex,
                           const LaunchConfig &config,
                           const std::vector<const ArgValue *> &args) {
  Expected<const CudaModule *> cudaModule =
      launchedModule<CudaModule>(module, entryIndex);
  if (!cudaModule.ok())
    return cudaModule.status();
  const Grid &grid = config.grid;
  const Block &block = config.block;
  bool empty = false;
  if (Status status = gpu::checkGrid(grid, empty); !status.ok() || empty)
    return status;
  if (grid[0] > INT32_MAX || grid[1] > 65535 || grid[2] > 65535)
    return argError("grid " + shapeToString({grid[0], grid[1], grid[2]}) +
                    " exceeds CUDA's limits (x < 2^31, y and z <= 65535)");
  if (block[0] < 1 || block[1] < 1 || block[2] < 1 || block[0] > 1024 ||
      block[1] > 1024 || block[2] > 64 || config.sharedBytes < 0 ||
      config.sharedBytes > INT32_MAX)
    return argError("invalid block " +
                    shapeToString({block[0], block[1], block[2]}) +
                    " or shared bytes " + std::to_string(config.sharedBytes));

  // Reused per thread: steady-state launches do not allocate.
  thread_local KernelParams params;
  packKernelParams(args, params);
  ScopedContext scope(*state);
  if (config.dependent && api().cuLaunchKernelEx) {
    // Programmatic dependent launch: the kernel may start while the one
    // before it in the stream runs; its griddepcontrol.wait keeps every
    // memory access after that kernel's end.
    CUlaunchAttribute attr = {};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig launch = {};
    launch.gridDimX = static_cast<unsigned>(grid[0]);
    launch.gridDimY = static_cast<unsigned>(grid[1]);
    launch.gridDimZ = static_cast<unsigned>(grid[2]);
    launch.blockDimX = static_cast<unsigned>(block[0]);
    launch.blockDimY = static_cast<unsigned>(block[1]);
    launch.blockDimZ = static_cast<unsigned>(block[2]);
    launch.sharedMemBytes = static_cast<unsigned>(config.sharedBytes);
    launch.hStream = static_cast<CUstream>(config.stream);
    launch.attrs = &attr;
    launch.numAttrs = 1;
    if (CUresult r = api().cuLaunchKernelEx(
            &launch, (*cudaModule)->functions[entryIndex], params.data(),
            nullptr))
      return callError(api(), "cuLaunchKernelEx", r);
    return Status::success();
  }
  if (CUresult r = api().cuLaunchKernel(
          (*cudaModule)->functions[entryIndex], static_cast<unsigned>(grid[0]),
          static_cast<unsigned>(grid[1]), static_cast<unsigned>(grid[2]),
          static_cast<unsigned>(block[0]), static_cast<unsigned>(block[1]),
          static_cast<unsigned>(block[2]),
          static_cast<unsigned>(config.sharedBytes),
          static_cast<CUstream>(config.stream), params.data(), nullptr))
    return callError(api(), "cuLaunchKernel", r);
  return Status::success();
}

Expected<std::shared_ptr<Backend>>
mla::rt::createCudaBackend(const CudaBackendOptions &options) {
  Expected<const DriverApi *> loaded = loadDriver(options.driverPath);
  if (!loaded.ok())
    return loaded.status();
  const DriverApi &api = **loaded;
  int count = 0;
  if (CUresult r = api.cuDeviceGetCount(&count))
    return callError(api, "cuDeviceGetCount", r);
  if (Status status =
          gpu::checkOrdinal("cuda: no CUDA device", options.ordinal, count);
      !status.ok())
    return status;
  CUdevice device = 0;
  if (CUresult r = api.cuDeviceGet(&device, options.ordinal))
    return callError(api, "cuDeviceGet", r);
  char deviceName[256] = {};
  if (CUresult r =
          api.cuDeviceGetName(deviceName, sizeof(deviceName) - 1, device))
    return callError(api, "cuDeviceGetName", r);
  int major = 0, minor = 0, optin = 0;
  for (auto [attribute, value] :
       {std::pair{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major},
        std::pair{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor},
        std::pair{CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                  &optin}})
    if (CUresult r = api.cuDeviceGetAttribute(value, attribute, device))
      return callError(api, "cuDeviceGetAttribute", r);
  CUcontext primary = nullptr;
  if (CUresult r = api.cuDevicePrimaryCtxRetain(&primary, device))
    return callError(api, "cuDevicePrimaryCtxRetain", r);
  auto context = std::make_shared<Context>(api, device, primary);
  context->ordinal = options.ordinal;
  context->ccMajor = major;
  context->ccMinor = minor;
  context->maxSharedOptin = optin;
  context->deviceName = deviceName;
  dylib::flattenLines(context->deviceName);
  return std::shared_ptr<Backend>(
      std::make_shared<CudaBackend>(std::move(context)));
}

std::optional<int> mla::rt::parseCudaDeviceName(std::string_view name) {
  return gpu::parseOrdinalName(name, "cuda");
}

bool mla::rt::cudaTargetRuns(int major, int minor, std::string_view target) {
  if (target == "sm_90a")
    return major == 9 && minor == 0;
  if (target == "sm_80")
    return major >= 8;
  return false;
}

Expected<std::string>
mla::rt::selectCudaTarget(int major, int minor,
                          const std::vector<std::string> &targets) {
  for (const char *preferred : {"sm_90a", "sm_80"})
    if (cudaTargetRuns(major, minor, preferred) &&
        std::find(targets.begin(), targets.end(), preferred) != targets.end())
      return std::string(preferred);
  std::string names = gpu::joinNames(targets);
  std::string runs = major == 9 && minor == 0 ? "sm_90a or sm_80"
                     : major >= 8             ? "sm_80"
                                              : "";
  std::string cc = std::to_string(major) + "." + std::to_string(minor);
  return Status::error(
      ErrorCode::Unsupported,
      "the package has no target for CUDA compute capability " + cc +
          " (its targets: " + names + "; " +
          (runs.empty() ? "the CUDA backend needs compute capability 8.0 or "
                          "newer"
                        : "this device runs " + runs) +
          ")");
}
