//===- HipRuntime.h - The HIP runtime API, loaded at run time ---*- C++ -*-===//
//
// The few HIP types, constants and entry points the HIP backend uses,
// declared here so that the runtime builds without ROCm. The values are
// those of hip_runtime_api.h; they are part of libamdhip64's ABI:
//
//  * hipError_t values and HIP_LAUNCH_PARAM_*: unchanged since ROCm 4.
//  * hipDeviceAttribute_t: the numbering of ROCm 5.0 and newer (checked
//    against the 5.5, 6.x and current headers; ROCm 4 numbered them
//    differently and is not supported). The backend sanity-checks what it
//    reads (a warp size of 32 or 64, a positive LDS size).
//  * hipDeviceProp_t is versioned: ROCm 6.0 added hipGetDevicePropertiesR0600
//    (the layout of 6.x and 7.x, kept stable by reserved fields); the plain
//    hipGetDeviceProperties of ROCm 5.x (and the legacy export of 6.x)
//    fills the older R0000 layout. The backend reads only `gcnArchName`
//    (char[256]) at the offset of the layout of the entry point it found,
//    into a zeroed buffer far larger than either struct, and accepts it only
//    if it looks like an arch name ("gfx942:sramecc+:xnack-").
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LIB_HIPRUNTIME_H
#define MLA_RUNTIME_LIB_HIPRUNTIME_H

#include "mla/runtime/Status.h"

#include <cstddef>
#include <string>
#include <vector>

namespace mla::rt::hip {

using hipError_t = int;
using hipDevice_t = int;
using hipModule_t = struct ihipModule_t *;
using hipFunction_t = struct ihipModuleSymbol_t *;
using hipStream_t = struct ihipStream_t *;
using hipEvent_t = struct ihipEvent_t *;
using hipGraph_t = struct ihipGraph *;
using hipGraphExec_t = struct hipGraphExec *;

// hipError_t
constexpr hipError_t hipSuccess = 0;
constexpr hipError_t hipErrorInvalidValue = 1;
constexpr hipError_t hipErrorOutOfMemory = 2;
constexpr hipError_t hipErrorNotInitialized = 3;
constexpr hipError_t hipErrorInsufficientDriver = 35;
constexpr hipError_t hipErrorNoDevice = 100;
constexpr hipError_t hipErrorInvalidDevice = 101;
constexpr hipError_t hipErrorInvalidImage = 200;
constexpr hipError_t hipErrorNoBinaryForGpu = 209;
constexpr hipError_t hipErrorNotFound = 500;

// hipDeviceAttribute_t (ROCm >= 5.0)
constexpr int hipDeviceAttributeMaxThreadsPerBlock = 56;
constexpr int hipDeviceAttributeMultiprocessorCount = 63;
constexpr int hipDeviceAttributeMaxSharedMemoryPerBlock = 74;
constexpr int hipDeviceAttributeWarpSize = 87;

// hipMemcpyKind, hipStreamCaptureMode
constexpr int hipMemcpyHostToDevice = 1;
constexpr int hipMemcpyDeviceToHost = 2;
constexpr int hipStreamCaptureModeThreadLocal = 1;

// hipModuleLaunchKernel's `extra` markers.
inline void *const kLaunchParamBufferPointer = reinterpret_cast<void *>(1);
inline void *const kLaunchParamBufferSize = reinterpret_cast<void *>(2);
inline void *const kLaunchParamEnd = reinterpret_cast<void *>(3);

/// Offsets of `char gcnArchName[256]` in the two hipDeviceProp_t layouts
/// (LP64), and a buffer size comfortably above both structs' sizes (about
/// 1.5 KiB and 0.8 KiB).
constexpr size_t kGcnArchNameOffsetR0600 = 1160;
constexpr size_t kGcnArchNameOffsetR0000 = 396;
constexpr size_t kGcnArchNameSize = 256;
constexpr size_t kDevicePropBufferBytes = 16384;

/// The entry points the backend calls. Required ones are never null;
/// optional ones (marked) are null when the library lacks them.
struct RuntimeApi {
  std::string path;

  hipError_t (*hipInit)(unsigned flags);
  hipError_t (*hipGetDeviceCount)(int *count);
  hipError_t (*hipDeviceGet)(hipDevice_t *device, int ordinal);
  hipError_t (*hipDeviceGetName)(char *name, int length, hipDevice_t device);
  hipError_t (*hipDeviceGetAttribute)(int *value, int attribute, int device);
  hipError_t (*hipGetDevice)(int *device);
  hipError_t (*hipSetDevice)(int device);
  hipError_t (*hipDeviceSynchronize)();
  hipError_t (*hipModuleLoadData)(hipModule_t *module, const void *image);
  hipError_t (*hipModuleUnload)(hipModule_t module);
  hipError_t (*hipModuleGetFunction)(hipFunction_t *function,
                                     hipModule_t module, const char *name);
  hipError_t (*hipModuleLaunchKernel)(hipFunction_t function, unsigned gridX,
                                      unsigned gridY, unsigned gridZ,
                                      unsigned blockX, unsigned blockY,
                                      unsigned blockZ, unsigned sharedBytes,
                                      hipStream_t stream, void **params,
                                      void **extra);
  hipError_t (*hipMalloc)(void **pointer, size_t bytes);
  hipError_t (*hipFree)(void *pointer);
  hipError_t (*hipMemGetInfo)(size_t *freeBytes, size_t *totalBytes);
  hipError_t (*hipMemcpy)(void *dst, const void *src, size_t bytes, int kind);
  hipError_t (*hipMemset)(void *dst, int value, size_t bytes);
  hipError_t (*hipStreamCreate)(hipStream_t *stream);
  hipError_t (*hipStreamDestroy)(hipStream_t stream);
  hipError_t (*hipStreamSynchronize)(hipStream_t stream);
  hipError_t (*hipEventCreate)(hipEvent_t *event);
  hipError_t (*hipEventDestroy)(hipEvent_t event);
  hipError_t (*hipEventRecord)(hipEvent_t event, hipStream_t stream);
  hipError_t (*hipEventSynchronize)(hipEvent_t event);
  hipError_t (*hipEventElapsedTime)(float *ms, hipEvent_t start,
                                    hipEvent_t end);

  // Optional.
  const char *(*hipGetErrorName)(hipError_t error);
  const char *(*hipGetErrorString)(hipError_t error);
  hipError_t (*hipRuntimeGetVersion)(int *version);
  /// ROCm >= 6.0 (R0600 layout), and the plain export (R0000 layout). At
  /// least one is present.
  hipError_t (*hipGetDevicePropertiesR0600)(void *properties, int device);
  hipError_t (*hipGetDevicePropertiesR0000)(void *properties, int device);
  hipError_t (*hipStreamBeginCapture)(hipStream_t stream, int mode);
  hipError_t (*hipStreamEndCapture)(hipStream_t stream, hipGraph_t *graph);
  hipError_t (*hipGraphInstantiateWithFlags)(hipGraphExec_t *exec,
                                             hipGraph_t graph,
                                             unsigned long long flags);
  hipError_t (*hipGraphLaunch)(hipGraphExec_t exec, hipStream_t stream);
  hipError_t (*hipGraphExecDestroy)(hipGraphExec_t exec);
  hipError_t (*hipGraphDestroy)(hipGraph_t graph);

  bool hasGraphs() const {
    return hipStreamBeginCapture && hipStreamEndCapture &&
           hipGraphInstantiateWithFlags && hipGraphLaunch &&
           hipGraphExecDestroy && hipGraphDestroy;
  }
};

/// The library names tried, in order, when no path is given.
const std::vector<std::string> &defaultLibraryNames();

/// Loads and initializes (hipInit) the HIP runtime: the library at `path`,
/// or the first of defaultLibraryNames() that exists when `path` is empty.
/// Done once per path, the result (or error) kept for the life of the
/// process. Errors are the one-line messages of createHipBackend.
Expected<const RuntimeApi *> loadRuntime(const std::string &path);

/// "hipErrorOutOfMemory (out of memory)", or "HIP error 2" when the runtime
/// cannot name it.
std::string errorString(const RuntimeApi &api, hipError_t result);

/// A BackendError "hip: CALL failed: <errorString>".
Status callError(const RuntimeApi &api, const char *call, hipError_t result);

/// The device's arch name from a hipDeviceProp_t filled by the entry point
/// of layout R0600 (`r0600`) or R0000: gcnArchName, if it is a NUL-
/// terminated name of the form gfx<...>[:feature±]...; empty otherwise.
std::string archNameFromProperties(const std::vector<unsigned char> &buffer,
                                   bool r0600);

} // namespace mla::rt::hip

#endif // MLA_RUNTIME_LIB_HIPRUNTIME_H
