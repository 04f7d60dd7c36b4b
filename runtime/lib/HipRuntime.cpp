//===- HipRuntime.cpp - Loading libamdhip64 and its symbol table ----------===//

#include "HipRuntime.h"
#include "DynamicLibrary.h"

#include <cstring>

using namespace mla::rt;
using namespace mla::rt::hip;
using dylib::slotOf;

namespace {

Status unsupported(const std::string &message) {
  return Status::error(ErrorCode::Unsupported, message);
}

Status resolveSymbols(void *handle, RuntimeApi &api) {
  const dylib::Symbol table[] = {
      {slotOf(api.hipInit), "hipInit", nullptr, true},
      {slotOf(api.hipGetDeviceCount), "hipGetDeviceCount", nullptr, true},
      {slotOf(api.hipDeviceGet), "hipDeviceGet", nullptr, true},
      {slotOf(api.hipDeviceGetName), "hipDeviceGetName", nullptr, true},
      {slotOf(api.hipDeviceGetAttribute), "hipDeviceGetAttribute", nullptr,
       true},
      {slotOf(api.hipGetDevice), "hipGetDevice", nullptr, true},
      {slotOf(api.hipSetDevice), "hipSetDevice", nullptr, true},
      {slotOf(api.hipDeviceSynchronize), "hipDeviceSynchronize", nullptr, true},
      {slotOf(api.hipModuleLoadData), "hipModuleLoadData", nullptr, true},
      {slotOf(api.hipModuleUnload), "hipModuleUnload", nullptr, true},
      {slotOf(api.hipModuleGetFunction), "hipModuleGetFunction", nullptr, true},
      {slotOf(api.hipModuleLaunchKernel), "hipModuleLaunchKernel", nullptr,
       true},
      {slotOf(api.hipMalloc), "hipMalloc", nullptr, true},
      {slotOf(api.hipFree), "hipFree", nullptr, true},
      {slotOf(api.hipMemGetInfo), "hipMemGetInfo", nullptr, true},
      {slotOf(api.hipMemcpy), "hipMemcpy", nullptr, true},
      {slotOf(api.hipMemset), "hipMemset", nullptr, true},
      {slotOf(api.hipStreamCreate), "hipStreamCreate", nullptr, true},
      {slotOf(api.hipStreamDestroy), "hipStreamDestroy", nullptr, true},
      {slotOf(api.hipStreamSynchronize), "hipStreamSynchronize", nullptr, true},
      {slotOf(api.hipEventCreate), "hipEventCreate", nullptr, true},
      {slotOf(api.hipEventDestroy), "hipEventDestroy", nullptr, true},
      {slotOf(api.hipEventRecord), "hipEventRecord", nullptr, true},
      {slotOf(api.hipEventSynchronize), "hipEventSynchronize", nullptr, true},
      {slotOf(api.hipEventElapsedTime), "hipEventElapsedTime", nullptr, true},
      {slotOf(api.hipGetErrorName), "hipGetErrorName", nullptr, false},
      {slotOf(api.hipGetErrorString), "hipGetErrorString", nullptr, false},
      {slotOf(api.hipRuntimeGetVersion), "hipRuntimeGetVersion", nullptr,
       false},
      {slotOf(api.hipGetDevicePropertiesR0600), "hipGetDevicePropertiesR0600",
       nullptr, false},
      // The plain name: R0000 in ROCm 5.x and as 6.x's legacy export.
      {slotOf(api.hipGetDevicePropertiesR0000), "hipGetDeviceProperties",
       nullptr, false},
      {slotOf(api.hipStreamBeginCapture), "hipStreamBeginCapture", nullptr,
       false},
      {slotOf(api.hipStreamEndCapture), "hipStreamEndCapture", nullptr, false},
      {slotOf(api.hipGraphInstantiateWithFlags), "hipGraphInstantiateWithFlags",
       nullptr, false},
      {slotOf(api.hipGraphLaunch), "hipGraphLaunch", nullptr, false},
      {slotOf(api.hipGraphExecDestroy), "hipGraphExecDestroy", nullptr, false},
      {slotOf(api.hipGraphDestroy), "hipGraphDestroy", nullptr, false},
  };
  if (const char *missing = dylib::resolveSymbols(handle, table))
    return unsupported("hip: the HIP runtime is too old (" + api.path +
                       " has no " + missing + ")");
  if (!api.hipGetDevicePropertiesR0600 && !api.hipGetDevicePropertiesR0000)
    return unsupported("hip: the HIP runtime is too old (" + api.path +
                       " has neither hipGetDevicePropertiesR0600 nor "
                       "hipGetDeviceProperties)");
  return Status::success();
}

Status initialize(const RuntimeApi &api) {
  hipError_t result = api.hipInit(0);
  switch (result) {
  case hipSuccess:
    return Status::success();
  case hipErrorNoDevice:
    return unsupported("hip: no AMD GPU");
  case hipErrorInsufficientDriver:
    return unsupported("hip: the AMD GPU driver cannot be used: " +
                       errorString(api, result));
  default:
    return callError(api, "hipInit", result);
  }
}

bool notFound(const std::string &why) {
  return dylib::isNotFound(why, /*orCannotOpen=*/true);
}

Expected<std::unique_ptr<RuntimeApi>> open(const std::string &path) {
  std::string why, opened = path;
  void *handle = nullptr;
  if (path.empty()) {
    for (const std::string &name : defaultLibraryNames()) {
      handle = dylib::openLibrary(name, why);
      if (handle) {
        opened = name;
        break;
      }
      if (!notFound(why))
        return unsupported("hip: cannot load " + name + ": " + why);
    }
    if (!handle)
      return unsupported("hip: libamdhip64.so not found (no ROCm on this "
                         "machine)");
  } else if (!(handle = dylib::openLibrary(path, why))) {
    if (notFound(why))
      return unsupported("hip: " + path +
                         " not found (no ROCm on this machine)");
    return unsupported("hip: cannot load " + path + ": " + why);
  }
  auto api = std::make_unique<RuntimeApi>();
  api->path = opened;
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

const std::vector<std::string> &mla::rt::hip::defaultLibraryNames() {
  static const std::vector<std::string> names = {
      "libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
      "libamdhip64.so.5"};
  return names;
}

Expected<const RuntimeApi *>
mla::rt::hip::loadRuntime(const std::string &path) {
  return dylib::loadOnce<RuntimeApi>(path, open);
}

std::string mla::rt::hip::errorString(const RuntimeApi &api,
                                      hipError_t result) {
  const char *name =
      api.hipGetErrorName ? api.hipGetErrorName(result) : nullptr;
  const char *text =
      api.hipGetErrorString ? api.hipGetErrorString(result) : nullptr;
  std::string message =
      name && *name ? std::string(name) : "HIP error " + std::to_string(result);
  if (text && *text && (!name || std::strcmp(name, text) != 0))
    message += std::string(" (") + text + ")";
  dylib::flattenLines(message);
  return message;
}

Status mla::rt::hip::callError(const RuntimeApi &api, const char *call,
                               hipError_t result) {
  return Status::error(ErrorCode::BackendError,
                       std::string("hip: ") + call +
                           " failed: " + errorString(api, result));
}

std::string
mla::rt::hip::archNameFromProperties(const std::vector<unsigned char> &buffer,
                                     bool r0600) {
  size_t offset = r0600 ? kGcnArchNameOffsetR0600 : kGcnArchNameOffsetR0000;
  if (buffer.size() < offset + kGcnArchNameSize)
    return "";
  const char *name = reinterpret_cast<const char *>(buffer.data() + offset);
  size_t length = strnlen(name, kGcnArchNameSize);
  if (length == kGcnArchNameSize || length < 4 ||
      std::strncmp(name, "gfx", 3) != 0)
    return "";
  for (size_t i = 0; i < length; ++i) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ':' ||
          c == '+' || c == '-' || c == '_'))
      return "";
  }
  return std::string(name, length);
}
