//===- CudaDriver.cpp - Loading libcuda and its symbol table --------------===//

#include "CudaDriver.h"
#include "DynamicLibrary.h"

using namespace mla::rt;
using namespace mla::rt::cuda;
using dylib::slotOf;

namespace {

Status unsupported(const std::string &message) {
  return Status::error(ErrorCode::Unsupported, message);
}

Status resolveSymbols(void *handle, DriverApi &api) {
  const dylib::Symbol table[] = {
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
      {slotOf(api.cuLaunchKernelEx), "cuLaunchKernelEx", nullptr, false},
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
  if (const char *missing = dylib::resolveSymbols(handle, table))
    return unsupported("cuda: the NVIDIA driver is too old (" + api.path +
                       " has no " + missing + ")");
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
  std::string why;
  void *handle = dylib::openLibrary(path, why);
  if (!handle) {
    if (dylib::isNotFound(why, /*orCannotOpen=*/false))
      return unsupported("cuda: " + path +
                         " not found (no NVIDIA driver on this machine)");
    return unsupported("cuda: cannot load " + path + ": " + why);
  }
  auto api = std::make_unique<DriverApi>();
  api->path = path;
  // The library stays loaded for the life of the process: buffers and
  // modules may be released during static destruction.
  if (Status status = resolveSymbols(handle, *api); !status.ok()) {
    dylib::closeLibrary(handle);
    return status;
  }
  if (Status status = initialize(*api); !status.ok())
    return status;
  return api;
}

} // namespace

Expected<const DriverApi *> mla::rt::cuda::loadDriver(const std::string &path) {
  return dylib::loadOnce<DriverApi>(path, open);
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
  dylib::flattenLines(message);
  return message;
}

Status mla::rt::cuda::callError(const DriverApi &api, const char *call,
                                CUresult result) {
  return Status::error(ErrorCode::BackendError,
                       std::string("cuda: ") + call +
                           " failed: " + errorString(api, result));
}
