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

#include <algorithm>
#include <cstring>
#include <mutex>

using namespace mla::rt;
using namespace mla::rt::cuda;

namespace {

Status backendError(const std::string &message) {
  return Status::error(ErrorCode::BackendError, "cuda: " + message);
}

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

class CudaModule : public Module {
public:
  CudaModule(const Backend &backend, std::shared_ptr<Context> context,
             CUmodule module)
      : Module(backend), context(std::move(context)), module(module) {}
  ~CudaModule() override {
    ScopedContext scope(*context);
    context->api.cuModuleUnload(module);
  }

  std::shared_ptr<Context> context;
  CUmodule module;
  std::vector<CUfunction> functions;
  /// The dynamic shared memory limit set on each function (0: default).
  std::vector<int64_t> sharedLimits;
};

class CudaBuffer : public DeviceBuffer {
public:
  CudaBuffer(std::shared_ptr<Context> context, CUdeviceptr pointer,
             size_t bytes)
      : context(std::move(context)), pointer(pointer), bytes(bytes) {}
  ~CudaBuffer() override {
    if (!pointer)
      return;
    ScopedContext scope(*context);
    context->api.cuMemFree(pointer);
  }
  void *data() const override {
    return reinterpret_cast<void *>(static_cast<uintptr_t>(pointer));
  }
  size_t size() const override { return bytes; }

private:
  std::shared_ptr<Context> context;
  CUdeviceptr pointer;
  size_t bytes;
};

class CudaStream : public Stream {
public:
  CudaStream(std::shared_ptr<Context> context, CUstream stream)
      : context(std::move(context)), stream(stream) {}
  ~CudaStream() override {
    ScopedContext scope(*context);
    context->api.cuStreamDestroy(stream);
  }
  void *handle() const override { return stream; }

private:
  std::shared_ptr<Context> context;
  CUstream stream;
};

class CudaTimer : public Timer {
public:
  CudaTimer(std::shared_ptr<Context> context, CUevent begin, CUevent end)
      : context(std::move(context)), begin(begin), end(end) {}
  ~CudaTimer() override {
    ScopedContext scope(*context);
    context->api.cuEventDestroy(begin);
    context->api.cuEventDestroy(end);
  }
  Status start(void *stream) override { return record(begin, stream); }
  Status stop(void *stream) override { return record(end, stream); }
  Expected<double> elapsedMs() override {
    const DriverApi &api = context->api;
    ScopedContext scope(*context);
    if (CUresult r = api.cuEventSynchronize(end))
      return callError(api, "cuEventSynchronize", r);
    float ms = 0;
    if (CUresult r = api.cuEventElapsedTime(&ms, begin, end))
      return callError(api, "cuEventElapsedTime", r);
    return static_cast<double>(ms);
  }

private:
  Status record(CUevent event, void *stream) {
    ScopedContext scope(*context);
    if (CUresult r =
            context->api.cuEventRecord(event, static_cast<CUstream>(stream)))
      return callError(context->api, "cuEventRecord", r);
    return Status::success();
  }

  std::shared_ptr<Context> context;
  CUevent begin, end;
};

class CudaGraph : public Graph {
public:
  CudaGraph(std::shared_ptr<Context> context, CUgraph graph, CUgraphExec exec)
      : context(std::move(context)), graph(graph), exec(exec) {}
  ~CudaGraph() override {
    ScopedContext scope(*context);
    context->api.cuGraphExecDestroy(exec);
    context->api.cuGraphDestroy(graph);
  }
  Status launch(void *stream) override {
    ScopedContext scope(*context);
    if (CUresult r =
            context->api.cuGraphLaunch(exec, static_cast<CUstream>(stream)))
      return callError(context->api, "cuGraphLaunch", r);
    return Status::success();
  }

private:
  std::shared_ptr<Context> context;
  CUgraph graph;
  CUgraphExec exec;
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

class CudaBackend : public Backend {
public:
  explicit CudaBackend(std::shared_ptr<Context> context)
      : context(std::move(context)),
        name("cuda:" + std::to_string(this->context->ordinal)) {}

  std::string_view getName() const override { return name; }
  std::string getDescription() const override {
    return name + " (" + context->deviceName + ", compute capability " +
           std::to_string(context->ccMajor) + "." +
           std::to_string(context->ccMinor) + ")";
  }
  bool supportsTarget(std::string_view target) const override {
    return cudaTargetRuns(context->ccMajor, context->ccMinor, target);
  }
  Expected<std::string>
  selectTarget(const std::vector<std::string> &targets) const override {
    Expected<std::string> target =
        selectCudaTarget(context->ccMajor, context->ccMinor, targets);
    if (!target.ok())
      return target.status().withContext("device '" + name + "' (" +
                                         context->deviceName + ")");
    return target;
  }
  bool usesHostMemory() const override { return false; }
  bool isAsynchronous() const override { return true; }

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
  const DriverApi &api() const { return context->api; }

  std::shared_ptr<Context> context;
  std::string name;
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
  ScopedContext scope(*context);
  CUmodule handle = nullptr;
  if (CUresult r =
          api().cuModuleLoadDataEx(&handle, image, 4, options, values)) {
    std::string log = oneLine(errorLog.data());
    return backendError(
        "loading the code object failed: " + errorString(api(), r) +
        (log.empty() ? "" : ": " + log));
  }
  auto module = std::make_unique<CudaModule>(*this, context, handle);
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
  auto &cudaModule = static_cast<CudaModule &>(module);
  if (&module.getBackend() != this || entryIndex >= cudaModule.functions.size())
    return backendError("prepareLaunch: not an entry of this device");
  CUfunction function = cudaModule.functions[entryIndex];
  ScopedContext scope(*context);
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
  if (config.sharedBytes + staticShared > context->maxSharedOptin)
    return backendError("shared " + std::to_string(config.sharedBytes) +
                        " bytes (plus " + std::to_string(staticShared) +
                        " static) exceed the device's limit of " +
                        std::to_string(context->maxSharedOptin) +
                        " bytes per block");
  int64_t &limit = cudaModule.sharedLimits[entryIndex];
  if (config.sharedBytes <= limit)
    return Status::success();
  if (CUresult r = api().cuFuncSetAttribute(
          function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
          static_cast<int>(config.sharedBytes)))
    return callError(api(), "cuFuncSetAttribute", r);
  limit = config.sharedBytes;
  return Status::success();
}

Expected<std::unique_ptr<DeviceBuffer>> CudaBackend::allocate(size_t bytes) {
  CUdeviceptr pointer = 0;
  if (bytes) {
    ScopedContext scope(*context);
    if (CUresult r = api().cuMemAlloc(&pointer, bytes)) {
      if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return backendError("out of device memory allocating " +
                            std::to_string(bytes) + " bytes");
      return callError(api(), "cuMemAlloc", r);
    }
  }
  return std::unique_ptr<DeviceBuffer>(
      std::make_unique<CudaBuffer>(context, pointer, bytes));
}

Status CudaBackend::copyToHost(void *dst, const void *src, size_t bytes) {
  if (!bytes)
    return Status::success();
  ScopedContext scope(*context);
  if (CUresult r = api().cuMemcpyDtoH(dst, devicePointer(src), bytes))
    return callError(api(), "cuMemcpyDtoH", r);
  return Status::success();
}

Status CudaBackend::copyToDevice(void *dst, const void *src, size_t bytes) {
  if (!bytes)
    return Status::success();
  ScopedContext scope(*context);
  if (CUresult r = api().cuMemcpyHtoD(devicePointer(dst), src, bytes))
    return callError(api(), "cuMemcpyHtoD", r);
  return Status::success();
}

Status CudaBackend::fillBytes(void *dst, uint8_t value, size_t bytes) {
  if (!bytes)
    return Status::success();
  ScopedContext scope(*context);
  if (CUresult r = api().cuMemsetD8(devicePointer(dst), value, bytes))
    return callError(api(), "cuMemsetD8", r);
  return Status::success();
}

Status CudaBackend::launch(const Module &module, size_t entryIndex,
                           const LaunchConfig &config,
                           const std::vector<const ArgValue *> &args) {
  if (&module.getBackend() != this)
    return backendError("module was loaded by another backend");
  const auto &cudaModule = static_cast<const CudaModule &>(module);
  if (entryIndex >= cudaModule.functions.size())
    return backendError("entry index " + std::to_string(entryIndex) +
                        " is out of range");
  const Grid &grid = config.grid;
  const Block &block = config.block;
  for (int64_t dim : grid)
    if (dim < 0)
      return argError("invalid grid " +
                      shapeToString({grid[0], grid[1], grid[2]}));
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
    return Status::success();
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
  ScopedContext scope(*context);
  if (CUresult r = api().cuLaunchKernel(
          cudaModule.functions[entryIndex], static_cast<unsigned>(grid[0]),
          static_cast<unsigned>(grid[1]), static_cast<unsigned>(grid[2]),
          static_cast<unsigned>(block[0]), static_cast<unsigned>(block[1]),
          static_cast<unsigned>(block[2]),
          static_cast<unsigned>(config.sharedBytes),
          static_cast<CUstream>(config.stream), params.data(), nullptr))
    return callError(api(), "cuLaunchKernel", r);
  return Status::success();
}

Status CudaBackend::synchronize(void *stream) {
  ScopedContext scope(*context);
  if (stream) {
    if (CUresult r = api().cuStreamSynchronize(static_cast<CUstream>(stream)))
      return callError(api(), "cuStreamSynchronize", r);
    return Status::success();
  }
  if (CUresult r = api().cuCtxSynchronize())
    return callError(api(), "cuCtxSynchronize", r);
  return Status::success();
}

Expected<std::unique_ptr<Stream>> CudaBackend::createStream() {
  ScopedContext scope(*context);
  CUstream stream = nullptr;
  if (CUresult r = api().cuStreamCreate(&stream, CU_STREAM_DEFAULT))
    return callError(api(), "cuStreamCreate", r);
  return std::unique_ptr<Stream>(std::make_unique<CudaStream>(context, stream));
}

Expected<std::unique_ptr<Timer>> CudaBackend::createTimer() {
  ScopedContext scope(*context);
  CUevent begin = nullptr, end = nullptr;
  if (CUresult r = api().cuEventCreate(&begin, CU_EVENT_DEFAULT))
    return callError(api(), "cuEventCreate", r);
  if (CUresult r = api().cuEventCreate(&end, CU_EVENT_DEFAULT)) {
    api().cuEventDestroy(begin);
    return callError(api(), "cuEventCreate", r);
  }
  return std::unique_ptr<Timer>(
      std::make_unique<CudaTimer>(context, begin, end));
}

Expected<std::unique_ptr<Graph>>
CudaBackend::captureGraph(void *stream, const std::function<Status()> &work) {
  if (!api().hasGraphs())
    return Status::error(ErrorCode::Unsupported,
                         "cuda: the NVIDIA driver has no graph API "
                         "(cuGraphInstantiateWithFlags)");
  if (!stream)
    return argError("graph capture needs a stream (the default stream "
                    "cannot be captured)");
  auto cuStream = static_cast<CUstream>(stream);
  ScopedContext scope(*context);
  if (CUresult r = api().cuStreamBeginCapture(
          cuStream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
    return callError(api(), "cuStreamBeginCapture", r);
  Status status = work();
  CUgraph graph = nullptr;
  // Always ended, so that the stream is usable again whatever happened.
  CUresult ended = api().cuStreamEndCapture(cuStream, &graph);
  if (!status.ok() || ended) {
    if (graph)
      api().cuGraphDestroy(graph);
    if (!status.ok())
      return status.withContext("during graph capture");
    return callError(api(), "cuStreamEndCapture", ended);
  }
  CUgraphExec exec = nullptr;
  if (CUresult r = api().cuGraphInstantiateWithFlags(&exec, graph, 0)) {
    api().cuGraphDestroy(graph);
    return callError(api(), "cuGraphInstantiateWithFlags", r);
  }
  return std::unique_ptr<Graph>(
      std::make_unique<CudaGraph>(context, graph, exec));
}

Expected<MemoryInfo> CudaBackend::getMemoryInfo() {
  ScopedContext scope(*context);
  MemoryInfo info;
  if (CUresult r = api().cuMemGetInfo(&info.freeBytes, &info.totalBytes))
    return callError(api(), "cuMemGetInfo", r);
  return info;
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
  if (count == 0)
    return Status::error(ErrorCode::Unsupported, "cuda: no CUDA device");
  if (options.ordinal < 0 || options.ordinal >= count)
    return Status::error(
        ErrorCode::Unsupported,
        "cuda: no CUDA device " + std::to_string(options.ordinal) +
            " (this machine has " + std::to_string(count) + ")");
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
  for (char &c : context->deviceName)
    if (c == '\n' || c == '\r')
      c = ' ';
  return std::shared_ptr<Backend>(
      std::make_shared<CudaBackend>(std::move(context)));
}

std::optional<int> mla::rt::parseCudaDeviceName(std::string_view name) {
  if (name == "cuda")
    return 0;
  if (name.substr(0, 5) != "cuda:" || name.size() == 5 || name.size() > 11)
    return std::nullopt;
  int ordinal = 0;
  for (char c : name.substr(5)) {
    if (c < '0' || c > '9')
      return std::nullopt;
    ordinal = ordinal * 10 + (c - '0');
  }
  return ordinal;
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
  std::string names;
  for (const std::string &target : targets)
    names += (names.empty() ? "" : ", ") + target;
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
