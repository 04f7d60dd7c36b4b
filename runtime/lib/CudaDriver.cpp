//===- CudaDriver.cpp - Loading libcuda and its symbol table --------------===//

#include "CudaDriver.h"

#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>

using namespace mla::rt;
using namespace mla::rt::cuda;

namespace {

Status unsupported(const std::string &message) {
  return Status::error(ErrorCode::Unsupported, message);
}

/// POSIX guarantees that function pointers and void * convert (dlsym).
template <typename Fn> void **slotOf(Fn &fn) {
  return reinterpret_cast<void **>(&fn);
}

/// One driver entry point: its symbol (then an older fallback symbol of the
/// same signature, if any) and whether the backend cannot work without it.
struct Symbol {
  void **slot;
  const char *name;
  const char *fallback;
  bool required;
};

Status resolveSymbols(void *handle, DriverApi &api) {
  const Symbol table[] = {
      {slotOf(api.cuInit), "cuInit", nullptr, true},
      {slotOf(api.cuDriverGetVersion), "cuDriverGetVersion", nullptr, true},
      {slotOf(api.cuDeviceGetCount), "cuDeviceGetCount", nullptr, true},
      {slotOf(api.cuDeviceGet), "cuDeviceGet", nullptr, true},
      {slotOf(api.cuDeviceGetName), "cuDeviceGetName", nullptr, true},
      {slotOf(api.cuDeviceGetAttribute), "cuDeviceGetAttribute", nullptr, true},
      {slotOf(api.cuDevicePrimaryCtxRetain), "cuDevicePrimaryCtxRetain",
       nullptr, true},
      {slotOf(api.cuDevicePrimaryCtxRelease), "cuDevicePrimaryCtxRelease_v2",
       nullptr, true},
      {slotOf(api.cuCtxGetCurrent), "cuCtxGetCurrent", nullptr, true},
      {slotOf(api.cuCtxPushCurrent), "cuCtxPushCurrent_v2", nullptr, true},
      {slotOf(api.cuCtxPopCurrent), "cuCtxPopCurrent_v2", nullptr, true},
      {slotOf(api.cuCtxSynchronize), "cuCtxSynchronize", nullptr, true},
      {slotOf(api.cuModuleLoadDataEx), "cuModuleLoadDataEx", nullptr, true},
      {slotOf(api.cuModuleUnload), "cuModuleUnload", nullptr, true},
      {slotOf(api.cuModuleGetFunction), "cuModuleGetFunction", nullptr, true},
      {slotOf(api.cuFuncGetAttribute), "cuFuncGetAttribute", nullptr, true},
      {slotOf(api.cuFuncSetAttribute), "cuFuncSetAttribute", nullptr, true},
      {slotOf(api.cuLaunchKernel), "cuLaunchKernel", nullptr, true},
      {slotOf(api.cuMemAlloc), "cuMemAlloc_v2", nullptr, true},
      {slotOf(api.cuMemFree), "cuMemFree_v2", nullptr, true},
      {slotOf(api.cuMemGetInfo), "cuMemGetInfo_v2", nullptr, true},
      {slotOf(api.cuMemcpyHtoD), "cuMemcpyHtoD_v2", nullptr, true},
      {slotOf(api.cuMemcpyDtoH), "cuMemcpyDtoH_v2", nullptr, true},
      {slotOf(api.cuMemsetD8), "cuMemsetD8_v2", nullptr, true},
      {slotOf(api.cuStreamCreate), "cuStreamCreate", nullptr, true},
      {slotOf(api.cuStreamDestroy), "cuStreamDestroy_v2", nullptr, true},
      {slotOf(api.cuStreamSynchronize), "cuStreamSynchronize", nullptr, true},
      {slotOf(api.cuEventCreate), "cuEventCreate", nullptr, true},
      {slotOf(api.cuEventDestroy), "cuEventDestroy_v2", nullptr, true},
      {slotOf(api.cuEventRecord), "cuEventRecord", nullptr, true},
      {slotOf(api.cuEventSynchronize), "cuEventSynchronize", nullptr, true},
      // _v2 since CUDA 12.8; same signature.
      {slotOf(api.cuEventElapsedTime), "cuEventElapsedTime_v2",
       "cuEventElapsedTime", true},
      {slotOf(api.cuGetErrorName), "cuGetErrorName", nullptr, false},
      {slotOf(api.cuGetErrorString), "cuGetErrorString", nullptr, false},
      {slotOf(api.cuStreamBeginCapture), "cuStreamBeginCapture_v2", nullptr,
       false},
      {slotOf(api.cuStreamEndCapture), "cuStreamEndCapture", nullptr, false},
      {slotOf(api.cuGraphInstantiateWithFlags), "cuGraphInstantiateWithFlags",
       nullptr, false},
      {slotOf(api.cuGraphLaunch), "cuGraphLaunch", nullptr, false},
      {slotOf(api.cuGraphExecDestroy), "cuGraphExecDestroy", nullptr, false},
      {slotOf(api.cuGraphDestroy), "cuGraphDestroy", nullptr, false},
  };
  for (const Symbol &symbol : table) {
    void *address = dlsym(handle, symbol.name);
    if (!address && symbol.fallback)
      address = dlsym(handle, symbol.fallback);
    if (!address && symbol.required)
      return unsupported("cuda: the NVIDIA driver is too old (" + api.path +
                         " has no " + symbol.name + ")");
    *symbol.slot = address;
  }
  return Status::success();
}

Status initialize(const DriverApi &api) {
  CUresult result = api.cuInit(0);
  switch (result) {
  case CUDA_SUCCESS:
    return Status::success();
  case CUDA_ERROR_STUB_LIBRARY:
    return unsupported("cuda: " + api.path +
                       " is the CUDA toolkit's stub library (no NVIDIA "
                       "driver on this machine)");
  case CUDA_ERROR_NO_DEVICE:
    return unsupported("cuda: no CUDA device");
  case CUDA_ERROR_INSUFFICIENT_DRIVER:
  case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
  case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    return unsupported("cuda: the NVIDIA driver cannot be used: " +
                       errorString(api, result));
  default:
    return callError(api, "cuInit", result);
  }
}

Expected<std::unique_ptr<DriverApi>> open(const std::string &path) {
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    std::string why = reason ? reason : "unknown dlopen error";
    if (why.find("No such file") != std::string::npos)
      return unsupported("cuda: " + path +
                         " not found (no NVIDIA driver on this machine)");
    return unsupported("cuda: cannot load " + path + ": " + why);
  }
  auto api = std::make_unique<DriverApi>();
  api->path = path;
  // The library stays loaded for the life of the process: buffers and
  // modules may be released during static destruction.
  if (Status status = resolveSymbols(handle, *api); !status.ok()) {
    dlclose(handle);
    return status;
  }
  if (Status status = initialize(*api); !status.ok())
    return status;
  return api;
}

} // namespace

Expected<const DriverApi *> mla::rt::cuda::loadDriver(const std::string &path) {
  struct Loaded {
    std::unique_ptr<DriverApi> api;
    Status error;
  };
  static std::mutex mutex;
  static auto *loaded = new std::map<std::string, Loaded>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded->find(path);
  if (it == loaded->end()) {
    Expected<std::unique_ptr<DriverApi>> api = open(path);
    Loaded entry;
    if (api.ok())
      entry.api = api.take();
    else
      entry.error = api.status();
    it = loaded->emplace(path, std::move(entry)).first;
  }
  if (!it->second.api)
    return it->second.error;
  return static_cast<const DriverApi *>(it->second.api.get());
}

std::string mla::rt::cuda::errorString(const DriverApi &api, CUresult result) {
  const char *name = nullptr, *text = nullptr;
  if (api.cuGetErrorName && api.cuGetErrorName(result, &name) != CUDA_SUCCESS)
    name = nullptr;
  if (api.cuGetErrorString &&
      api.cuGetErrorString(result, &text) != CUDA_SUCCESS)
    text = nullptr;
  std::string message =
      name ? std::string(name) : "CUDA error " + std::to_string(result);
  if (text)
    message += std::string(" (") + text + ")";
  for (char &c : message)
    if (c == '\n' || c == '\r')
      c = ' ';
  return message;
}

Status mla::rt::cuda::callError(const DriverApi &api, const char *call,
                                CUresult result) {
  return Status::error(ErrorCode::BackendError,
                       std::string("cuda: ") + call +
                           " failed: " + errorString(api, result));
}
