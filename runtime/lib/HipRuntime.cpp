//===- HipRuntime.cpp - Loading libamdhip64 and its symbol table ----------===//

#include "HipRuntime.h"

#include <cstring>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>

using namespace mla::rt;
using namespace mla::rt::hip;

namespace {

Status unsupported(const std::string &message) {
  return Status::error(ErrorCode::Unsupported, message);
}

/// POSIX guarantees that function pointers and void * convert (dlsym).
template <typename Fn> void **slotOf(Fn &fn) {
  return reinterpret_cast<void **>(&fn);
}

/// One runtime entry point and whether the backend cannot work without it.
struct Symbol {
  void **slot;
  const char *name;
  bool required;
};

Status resolveSymbols(void *handle, RuntimeApi &api) {
  const Symbol table[] = {
      {slotOf(api.hipInit), "hipInit", true},
      {slotOf(api.hipGetDeviceCount), "hipGetDeviceCount", true},
      {slotOf(api.hipDeviceGet), "hipDeviceGet", true},
      {slotOf(api.hipDeviceGetName), "hipDeviceGetName", true},
      {slotOf(api.hipDeviceGetAttribute), "hipDeviceGetAttribute", true},
      {slotOf(api.hipGetDevice), "hipGetDevice", true},
      {slotOf(api.hipSetDevice), "hipSetDevice", true},
      {slotOf(api.hipDeviceSynchronize), "hipDeviceSynchronize", true},
      {slotOf(api.hipModuleLoadData), "hipModuleLoadData", true},
      {slotOf(api.hipModuleUnload), "hipModuleUnload", true},
      {slotOf(api.hipModuleGetFunction), "hipModuleGetFunction", true},
      {slotOf(api.hipModuleLaunchKernel), "hipModuleLaunchKernel", true},
      {slotOf(api.hipMalloc), "hipMalloc", true},
      {slotOf(api.hipFree), "hipFree", true},
      {slotOf(api.hipMemGetInfo), "hipMemGetInfo", true},
      {slotOf(api.hipMemcpy), "hipMemcpy", true},
      {slotOf(api.hipMemset), "hipMemset", true},
      {slotOf(api.hipStreamCreate), "hipStreamCreate", true},
      {slotOf(api.hipStreamDestroy), "hipStreamDestroy", true},
      {slotOf(api.hipStreamSynchronize), "hipStreamSynchronize", true},
      {slotOf(api.hipEventCreate), "hipEventCreate", true},
      {slotOf(api.hipEventDestroy), "hipEventDestroy", true},
      {slotOf(api.hipEventRecord), "hipEventRecord", true},
      {slotOf(api.hipEventSynchronize), "hipEventSynchronize", true},
      {slotOf(api.hipEventElapsedTime), "hipEventElapsedTime", true},
      {slotOf(api.hipGetErrorName), "hipGetErrorName", false},
      {slotOf(api.hipGetErrorString), "hipGetErrorString", false},
      {slotOf(api.hipRuntimeGetVersion), "hipRuntimeGetVersion", false},
      {slotOf(api.hipGetDevicePropertiesR0600), "hipGetDevicePropertiesR0600",
       false},
      // The plain name: R0000 in ROCm 5.x and as 6.x's legacy export.
      {slotOf(api.hipGetDevicePropertiesR0000), "hipGetDeviceProperties",
       false},
      {slotOf(api.hipStreamBeginCapture), "hipStreamBeginCapture", false},
      {slotOf(api.hipStreamEndCapture), "hipStreamEndCapture", false},
      {slotOf(api.hipGraphInstantiateWithFlags), "hipGraphInstantiateWithFlags",
       false},
      {slotOf(api.hipGraphLaunch), "hipGraphLaunch", false},
      {slotOf(api.hipGraphExecDestroy), "hipGraphExecDestroy", false},
      {slotOf(api.hipGraphDestroy), "hipGraphDestroy", false},
  };
  for (const Symbol &symbol : table) {
    void *address = dlsym(handle, symbol.name);
    if (!address && symbol.required)
      return unsupported("hip: the HIP runtime is too old (" + api.path +
                         " has no " + symbol.name + ")");
    *symbol.slot = address;
  }
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
  return why.find("No such file") != std::string::npos ||
         why.find("cannot open shared object") != std::string::npos;
}

/// dlopen's handle, or nullptr with `why` set.
void *openLibrary(const std::string &path, std::string &why) {
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    why = reason ? reason : "unknown dlopen error";
  }
  return handle;
}

Expected<std::unique_ptr<RuntimeApi>> open(const std::string &path) {
  std::string why, opened = path;
  void *handle = nullptr;
  if (path.empty()) {
    for (const std::string &name : defaultLibraryNames()) {
      handle = openLibrary(name, why);
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
  } else if (!(handle = openLibrary(path, why))) {
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
    dlclose(handle);
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
  struct Loaded {
    std::unique_ptr<RuntimeApi> api;
    Status error;
  };
  static std::mutex mutex;
  static auto *loaded = new std::map<std::string, Loaded>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded->find(path);
  if (it == loaded->end()) {
    Expected<std::unique_ptr<RuntimeApi>> api = open(path);
    Loaded entry;
    if (api.ok())
      entry.api = api.take();
    else
      entry.error = api.status();
    it = loaded->emplace(path, std::move(entry)).first;
  }
  if (!it->second.api)
    return it->second.error;
  return static_cast<const RuntimeApi *>(it->second.api.get());
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
  for (char &c : message)
    if (c == '\n' || c == '\r')
      c = ' ';
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
