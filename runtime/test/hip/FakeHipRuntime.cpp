//===- FakeHipRuntime.cpp - A libamdhip64 stand-in on host memory ---------===//
//
// See FakeHipRuntime.h. Built as a shared library with C entry points named
// like HIP's. Variants: MLA_FAKE_HIP_ROCM5 exports only the plain
// hipGetDeviceProperties (the R0000 layout of ROCm 5.x) and no
// hipGetDevicePropertiesR0600; MLA_FAKE_HIP_NO_GRAPHS leaves out the graph
// API; MLA_FAKE_HIP_NO_MALLOC leaves out hipMalloc (a broken runtime).
//
// The hipDeviceProp_t structs below spell out the fields of ROCm's headers
// up to gcnArchName (R0600: ROCm 6.0 and newer; R0000: ROCm 5.x and the
// legacy export), independently of the backend's offset constants.
//
//===----------------------------------------------------------------------===//

#include "FakeHipRuntime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using hipError_t = int;

constexpr hipError_t kSuccess = 0;
constexpr hipError_t kInvalidValue = 1;
constexpr hipError_t kOutOfMemory = 2;
constexpr hipError_t kInvalidDevice = 101;
constexpr hipError_t kInvalidImage = 200;
constexpr hipError_t kNoBinaryForGpu = 209;
constexpr hipError_t kInvalidHandle = 400;
constexpr hipError_t kNotFound = 500;
constexpr hipError_t kCaptureUnsupported = 900;
constexpr hipError_t kCaptureInvalidated = 901;

struct DeviceArch {
  unsigned hasGlobalInt32Atomics : 1, hasGlobalFloatAtomicExch : 1,
      hasSharedInt32Atomics : 1, hasSharedFloatAtomicExch : 1,
      hasFloatAtomicAdd : 1, hasGlobalInt64Atomics : 1,
      hasSharedInt64Atomics : 1, hasDoubles : 1, hasWarpVote : 1,
      hasWarpBallot : 1, hasWarpShuffle : 1, hasFunnelShift : 1,
      hasThreadFenceSystem : 1, hasSyncThreadsExt : 1, hasSurfaceFuncs : 1,
      has3dGrid : 1, hasDynamicParallelism : 1;
};

/// hipDeviceProp_tR0000 (ROCm 5.x), up to gcnArchName.
struct DevicePropR0000 {
  char name[256];
  size_t totalGlobalMem, sharedMemPerBlock;
  int regsPerBlock, warpSize, maxThreadsPerBlock, maxThreadsDim[3],
      maxGridSize[3], clockRate, memoryClockRate, memoryBusWidth;
  size_t totalConstMem;
  int major, minor, multiProcessorCount, l2CacheSize,
      maxThreadsPerMultiProcessor, computeMode, clockInstructionRate;
  DeviceArch arch;
  int concurrentKernels, pciDomainID, pciBusID, pciDeviceID;
  size_t maxSharedMemoryPerMultiProcessor;
  int isMultiGpuBoard, canMapHostMemory, gcnArch;
  char gcnArchName[256];
};

/// hipDeviceProp_tR0600 (ROCm 6.0 and newer), up to gcnArchName.
struct DevicePropR0600 {
  char name[256];
  char uuid[16];
  char luid[8];
  unsigned luidDeviceNodeMask;
  size_t totalGlobalMem, sharedMemPerBlock;
  int regsPerBlock, warpSize;
  size_t memPitch;
  int maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], clockRate;
  size_t totalConstMem;
  int major, minor;
  size_t textureAlignment, texturePitchAlignment;
  int deviceOverlap, multiProcessorCount, kernelExecTimeoutEnabled, integrated,
      canMapHostMemory, computeMode, maxTexture1D, maxTexture1DMipmap,
      maxTexture1DLinear, maxTexture2D[2], maxTexture2DMipmap[2],
      maxTexture2DLinear[3], maxTexture2DGather[2], maxTexture3D[3],
      maxTexture3DAlt[3], maxTextureCubemap, maxTexture1DLayered[2],
      maxTexture2DLayered[3], maxTextureCubemapLayered[2], maxSurface1D,
      maxSurface2D[2], maxSurface3D[3], maxSurface1DLayered[2],
      maxSurface2DLayered[3], maxSurfaceCubemap, maxSurfaceCubemapLayered[2];
  size_t surfaceAlignment;
  int concurrentKernels, ECCEnabled, pciBusID, pciDeviceID, pciDomainID,
      tccDriver, asyncEngineCount, unifiedAddressing, memoryClockRate,
      memoryBusWidth, l2CacheSize, persistingL2CacheMaxSize,
      maxThreadsPerMultiProcessor, streamPrioritiesSupported,
      globalL1CacheSupported, localL1CacheSupported;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor, managedMemory, isMultiGpuBoard,
      multiGpuBoardGroupID, hostNativeAtomicSupported,
      singleToDoublePrecisionPerfRatio, pageableMemoryAccess,
      concurrentManagedAccess, computePreemptionSupported,
      canUseHostPointerForRegisteredMem, cooperativeLaunch,
      cooperativeMultiDeviceLaunch;
  size_t sharedMemPerBlockOptin;
  int pageableMemoryAccessUsesHostPageTables, directManagedMemAccessFromHost,
      maxBlocksPerMultiProcessor, accessPolicyMaxWindowSize;
  size_t reservedSharedMemPerBlock;
  int hostRegisterSupported, sparseHipArraySupported,
      hostRegisterReadOnlySupported, timelineSemaphoreInteropSupported,
      memoryPoolsSupported, gpuDirectRDMASupported;
  unsigned gpuDirectRDMAFlushWritesOptions;
  int gpuDirectRDMAWritesOrdering;
  unsigned memoryPoolSupportedHandleTypes;
  int deferredMappingHipArraySupported, ipcEventSupported, clusterLaunch,
      unifiedFunctionPointers, reserved[63], hipReserved[32];
  char gcnArchName[256];
};

struct Kernel {
  std::string name;
  /// From the kernel descriptor (NAME.kd).
  uint32_t groupSegmentFixedSize = 0;
  uint32_t kernargSize = 0;
};

struct Module {
  std::map<std::string, std::unique_ptr<Kernel>> kernels;
};

struct LaunchRecord {
  Kernel *kernel;
  std::vector<uint8_t> kernargs;
};

struct Stream {
  bool capturing = false;
  bool invalidated = false;
  std::vector<LaunchRecord> captured;
};

struct Event {
  std::chrono::steady_clock::time_point time;
  bool recorded = false;
};

struct Graph {
  std::vector<LaunchRecord> launches;
};

struct State {
  std::mutex mutex;
  MlaFakeHipConfig config;
  MlaFakeHipStats stats;
  int propertiesR0600Calls = 0, propertiesR0000Calls = 0;
  /// Live allocations: start -> size.
  std::map<uintptr_t, size_t> allocations;
};

State &state() {
  static State *s = new State();
  return *s;
}

thread_local int currentDevice = 0;
thread_local Stream *capturingStream = nullptr;

/// Counts calls that act on device 0 while another device is current (the
/// fake's allocations, modules and streams all live on device 0).
bool onDeviceZero() {
  if (currentDevice == 0)
    return true;
  ++state().stats.deviceErrors;
  return false;
}

bool isDeviceRange(uintptr_t address, size_t bytes) {
  auto &allocations = state().allocations;
  auto it = allocations.upper_bound(address);
  if (it == allocations.begin())
    return false;
  --it;
  return address + bytes <= it->first + it->second;
}

bool forbiddenDuringCapture() {
  if (!capturingStream)
    return false;
  capturingStream->invalidated = true;
  return true;
}

uint64_t load(const uint8_t *p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i)
    value = (value << 8) | p[i];
  return value;
}

/// EF_AMDGPU_MACH of a gfx processor name, 0 when unknown.
unsigned machOf(const char *arch) {
  std::string processor(arch, strcspn(arch, ":"));
  if (processor == "gfx90a")
    return 0x3f;
  if (processor == "gfx942")
    return 0x4c;
  if (processor == "gfx950")
    return 0x4f;
  return 0;
}

/// Reads the kernels of an HSA code object from its symbol table: every
/// 64-byte NAME.kd object is a kernel descriptor. The image's size is not
/// given (hipModuleLoadData takes a pointer): like the real loader, trust
/// the ELF headers.
hipError_t readKernels(const uint8_t *elf, Module &module) {
  if (std::memcmp(elf,
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      elf[4] != 2 || elf[5] != 1 || load(elf + 18, 2) != 224)
    return kInvalidImage;
  if ((load(elf + 48, 4) & 0xff) != machOf(state().config.arch))
    return kNoBinaryForGpu;
  uint64_t shoff = load(elf + 40, 8), shentsize = load(elf + 58, 2),
           shnum = load(elf + 60, 2);
  auto section = [&](uint64_t i) { return elf + shoff + i * shentsize; };
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint8_t *sh = section(i);
    if (load(sh + 4, 4) != 2) // SHT_SYMTAB
      continue;
    const uint8_t *symbols = elf + load(sh + 24, 8);
    uint64_t count = load(sh + 32, 8) / 24;
    const char *names = reinterpret_cast<const char *>(
        elf + load(section(load(sh + 40, 4)) + 24, 8));
    for (uint64_t s = 0; s < count; ++s) {
      const uint8_t *sym = symbols + s * 24;
      std::string name = names + load(sym, 4);
      uint64_t shndx = load(sym + 6, 2), value = load(sym + 8, 8),
               size = load(sym + 16, 8);
      if (size != 64 || name.size() < 4 ||
          name.compare(name.size() - 3, 3, ".kd") != 0 || shndx >= shnum)
        continue;
      const uint8_t *home = section(shndx);
      const uint8_t *descriptor =
          elf + load(home + 24, 8) + (value - load(home + 16, 8));
      auto kernel = std::make_unique<Kernel>();
      kernel->name = name.substr(0, name.size() - 3);
      kernel->groupSegmentFixedSize =
          static_cast<uint32_t>(load(descriptor, 4));
      kernel->kernargSize = static_cast<uint32_t>(load(descriptor + 8, 4));
      module.kernels[kernel->name] = std::move(kernel);
    }
  }
  return module.kernels.empty() ? kInvalidImage : kSuccess;
}

void copyName(char (&out)[64], const std::string &name) {
  std::snprintf(out, sizeof(out), "%s", name.c_str());
}

/// Records a launch in the stats (the one before moves down).
void record(const LaunchRecord &launch) {
  MlaFakeHipStats &stats = state().stats;
  std::memcpy(stats.previousKernel, stats.lastKernel, 64);
  stats.previousKernargBytes = stats.lastKernargBytes;
  std::memcpy(stats.previousKernargs, stats.lastKernargs, 1024);
  copyName(stats.lastKernel, launch.kernel->name);
  stats.lastKernargBytes = launch.kernargs.size();
  std::memset(stats.lastKernargs, 0, 1024);
  std::memcpy(stats.lastKernargs, launch.kernargs.data(),
              std::min<size_t>(1024, launch.kernargs.size()));
  ++stats.launches;
}

} // namespace

FAKE_EXPORT void mlaFakeHipConfigure(const MlaFakeHipConfig *config) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().config = *config;
}

FAKE_EXPORT void mlaFakeHipGetStats(MlaFakeHipStats *stats) {
  std::lock_guard<std::mutex> lock(state().mutex);
  *stats = state().stats;
}

/// How often each hipGetDeviceProperties layout was asked for.
FAKE_EXPORT void mlaFakeHipPropertiesCalls(int *r0600, int *r0000) {
  std::lock_guard<std::mutex> lock(state().mutex);
  *r0600 = state().propertiesR0600Calls;
  *r0000 = state().propertiesR0000Calls;
}

FAKE_EXPORT hipError_t hipInit(unsigned) { return state().config.initResult; }

FAKE_EXPORT const char *hipGetErrorName(hipError_t error) {
  static const std::map<int, const char *> names = {
      {0, "hipSuccess"},
      {1, "hipErrorInvalidValue"},
      {2, "hipErrorOutOfMemory"},
      {35, "hipErrorInsufficientDriver"},
      {100, "hipErrorNoDevice"},
      {101, "hipErrorInvalidDevice"},
      {200, "hipErrorInvalidImage"},
      {209, "hipErrorNoBinaryForGpu"},
      {400, "hipErrorInvalidHandle"},
      {500, "hipErrorNotFound"},
      {900, "hipErrorStreamCaptureUnsupported"},
      {901, "hipErrorStreamCaptureInvalidated"},
      {999, "hipErrorUnknown"}};
  auto it = names.find(error);
  return it == names.end() ? "hipErrorUnknown" : it->second;
}

FAKE_EXPORT const char *hipGetErrorString(hipError_t error) {
  switch (error) {
  case 209:
    return "no kernel image is available for execution on the device";
  case 999:
    return "unknown error\nwith a second line";
  default:
    return hipGetErrorName(error);
  }
}

FAKE_EXPORT hipError_t hipRuntimeGetVersion(int *version) {
  *version = 60342134;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipGetDeviceCount(int *count) {
  *count = state().config.deviceCount;
  return *count ? kSuccess : 100;
}

FAKE_EXPORT hipError_t hipDeviceGet(int *device, int ordinal) {
  if (ordinal < 0 || ordinal >= state().config.deviceCount)
    return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipDeviceGetName(char *name, int length, int device) {
  if (device < 0 || device >= state().config.deviceCount)
    return kInvalidDevice;
  std::snprintf(name, length, "Fake AMD GPU %d", device);
  return kSuccess;
}

FAKE_EXPORT hipError_t hipDeviceGetAttribute(int *value, int attribute,
                                             int device) {
  const MlaFakeHipConfig &config = state().config;
  if (device < 0 || device >= config.deviceCount)
    return kInvalidDevice;
  switch (attribute) {
  case 56:
    *value = config.maxThreadsPerBlock;
    return kSuccess;
  case 63:
    *value = config.computeUnits;
    return kSuccess;
  case 74:
    *value = config.ldsBytes;
    return kSuccess;
  case 87:
    *value = config.warpSize;
    return kSuccess;
  }
  return kInvalidValue;
}

#ifndef MLA_FAKE_HIP_ROCM5
FAKE_EXPORT hipError_t hipGetDevicePropertiesR0600(DevicePropR0600 *props,
                                                   int device) {
  const MlaFakeHipConfig &config = state().config;
  if (device < 0 || device >= config.deviceCount)
    return kInvalidDevice;
  std::lock_guard<std::mutex> lock(state().mutex);
  ++state().propertiesR0600Calls;
  std::memset(props, 0, sizeof(*props));
  std::snprintf(props->name, sizeof(props->name), "Fake AMD GPU %d", device);
  props->warpSize = config.warpSize;
  props->sharedMemPerBlock = config.ldsBytes;
  std::snprintf(props->gcnArchName, sizeof(props->gcnArchName), "%s",
                config.arch);
  return kSuccess;
}
#endif

FAKE_EXPORT hipError_t hipGetDeviceProperties(DevicePropR0000 *props,
                                              int device) {
  const MlaFakeHipConfig &config = state().config;
  if (device < 0 || device >= config.deviceCount)
    return kInvalidDevice;
  std::lock_guard<std::mutex> lock(state().mutex);
  ++state().propertiesR0000Calls;
  std::memset(props, 0, sizeof(*props));
  std::snprintf(props->name, sizeof(props->name), "Fake AMD GPU %d", device);
  props->warpSize = config.warpSize;
  props->sharedMemPerBlock = config.ldsBytes;
  std::snprintf(props->gcnArchName, sizeof(props->gcnArchName), "%s",
                config.arch);
  return kSuccess;
}

FAKE_EXPORT hipError_t hipGetDevice(int *device) {
  *device = currentDevice;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipSetDevice(int device) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (device < 0 || device >= state().config.deviceCount)
    return kInvalidDevice;
  ++state().stats.setDeviceCalls;
  currentDevice = device;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipDeviceSynchronize() {
  std::lock_guard<std::mutex> lock(state().mutex);
  onDeviceZero();
  if (forbiddenDuringCapture())
    return kCaptureUnsupported;
  ++state().stats.synchronizations;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipModuleLoadData(void **module, const void *image) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!onDeviceZero())
    return kInvalidDevice;
  if (!image)
    return kInvalidValue;
  auto loaded = std::make_unique<Module>();
  if (hipError_t r = readKernels(static_cast<const uint8_t *>(image), *loaded))
    return r;
  if (state().config.loadResult)
    return state().config.loadResult;
  ++state().stats.liveModules;
  ++state().stats.moduleLoads;
  *module = loaded.release();
  return kSuccess;
}

FAKE_EXPORT hipError_t hipModuleUnload(void *module) {
  std::lock_guard<std::mutex> lock(state().mutex);
  onDeviceZero();
  delete static_cast<Module *>(module);
  --state().stats.liveModules;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipModuleGetFunction(void **function, void *module,
                                            const char *name) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto &kernels = static_cast<Module *>(module)->kernels;
  auto it = kernels.find(name);
  if (it == kernels.end())
    return kNotFound;
  *function = it->second.get();
  return kSuccess;
}

FAKE_EXPORT hipError_t hipModuleLaunchKernel(void *function, unsigned gx,
                                             unsigned gy, unsigned gz,
                                             unsigned bx, unsigned by,
                                             unsigned bz, unsigned shared,
                                             void *stream, void **params,
                                             void **extra) {
  std::lock_guard<std::mutex> lock(state().mutex);
  MlaFakeHipStats &stats = state().stats;
  if (!onDeviceZero())
    return kInvalidDevice;
  auto *kernel = static_cast<Kernel *>(function);
  const MlaFakeHipConfig &config = state().config;
  if (!kernel || !gx || !gy || !gz || !bx || !by || !bz ||
      bx * by * bz > static_cast<unsigned>(config.maxThreadsPerBlock) ||
      shared + kernel->groupSegmentFixedSize >
          static_cast<unsigned>(config.ldsBytes))
    return kInvalidValue;
  // Exactly {BUFFER_POINTER, buffer, BUFFER_SIZE, &size, END}, the buffer
  // covering the kernel's explicit arguments and no more than its kernarg
  // segment.
  if (params || !extra || extra[0] != reinterpret_cast<void *>(1) ||
      !extra[1] || extra[2] != reinterpret_cast<void *>(2) || !extra[3] ||
      extra[4] != reinterpret_cast<void *>(3)) {
    ++stats.kernargErrors;
    return kInvalidValue;
  }
  size_t bytes = *static_cast<size_t *>(extra[3]);
  if (bytes == 0 || bytes > kernel->kernargSize || bytes % 8) {
    ++stats.kernargErrors;
    return kInvalidValue;
  }
  const auto *buffer = static_cast<const uint8_t *>(extra[1]);
  LaunchRecord launch{kernel, {buffer, buffer + bytes}};
  record(launch);
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  std::memcpy(stats.lastGrid, grid, sizeof(grid));
  std::memcpy(stats.lastBlock, block, sizeof(block));
  stats.lastSharedBytes = shared;
  stats.lastStream = stream;
  auto *s = static_cast<Stream *>(stream);
  if (s && s->capturing) {
    s->captured.push_back(std::move(launch));
    return kSuccess;
  }
  if (capturingStream)
    return kCaptureUnsupported; // the null stream during a capture
  return kSuccess;
}

#ifndef MLA_FAKE_HIP_NO_MALLOC
FAKE_EXPORT hipError_t hipMalloc(void **pointer, size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!onDeviceZero())
    return kInvalidDevice;
  if (forbiddenDuringCapture())
    return kCaptureUnsupported;
  if (bytes > (size_t{1} << 34))
    return kOutOfMemory;
  if (bytes == 0) {
    *pointer = nullptr;
    return kSuccess;
  }
  void *memory = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!memory)
    return kOutOfMemory;
  state().allocations[reinterpret_cast<uintptr_t>(memory)] = bytes;
  ++state().stats.liveAllocations;
  ++state().stats.allocations;
  *pointer = memory;
  return kSuccess;
}
#endif

FAKE_EXPORT hipError_t hipFree(void *pointer) {
  std::lock_guard<std::mutex> lock(state().mutex);
  onDeviceZero();
  auto it = state().allocations.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == state().allocations.end())
    return kInvalidValue;
  state().allocations.erase(it);
  std::free(pointer);
  --state().stats.liveAllocations;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipMemGetInfo(size_t *freeBytes, size_t *totalBytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!onDeviceZero())
    return kInvalidDevice;
  *freeBytes = size_t{1} << 33;
  *totalBytes = size_t{3} << 34;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipMemcpy(void *dst, const void *src, size_t bytes,
                                 int kind) {
  std::lock_guard<std::mutex> lock(state().mutex);
  onDeviceZero();
  if (forbiddenDuringCapture())
    return kCaptureUnsupported;
  bool toDevice = kind == 1;
  if ((kind != 1 && kind != 2) ||
      !isDeviceRange(reinterpret_cast<uintptr_t>(toDevice ? dst : src), bytes))
    return kInvalidValue;
  std::memcpy(dst, src, bytes);
  ++state().stats.synchronizations; // hipMemcpy waits for the device
  return kSuccess;
}

FAKE_EXPORT hipError_t hipMemset(void *dst, int value, size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  onDeviceZero();
  if (forbiddenDuringCapture())
    return kCaptureUnsupported;
  if (!isDeviceRange(reinterpret_cast<uintptr_t>(dst), bytes))
    return kInvalidValue;
  std::memset(dst, value, bytes);
  return kSuccess;
}

FAKE_EXPORT hipError_t hipStreamCreate(void **stream) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!onDeviceZero())
    return kInvalidDevice;
  *stream = new Stream();
  ++state().stats.liveStreams;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipStreamDestroy(void *stream) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!stream)
    return kInvalidHandle;
  delete static_cast<Stream *>(stream);
  --state().stats.liveStreams;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipStreamSynchronize(void *) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (forbiddenDuringCapture())
    return kCaptureUnsupported;
  ++state().stats.synchronizations;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipEventCreate(void **event) {
  std::lock_guard<std::mutex> lock(state().mutex);
  onDeviceZero();
  *event = new Event();
  ++state().stats.liveEvents;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipEventDestroy(void *event) {
  std::lock_guard<std::mutex> lock(state().mutex);
  delete static_cast<Event *>(event);
  --state().stats.liveEvents;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipEventRecord(void *event, void *) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto *e = static_cast<Event *>(event);
  e->time = std::chrono::steady_clock::now();
  e->recorded = true;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipEventSynchronize(void *event) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (forbiddenDuringCapture())
    return kCaptureUnsupported;
  ++state().stats.synchronizations;
  return static_cast<Event *>(event)->recorded ? kSuccess : kInvalidHandle;
}

FAKE_EXPORT hipError_t hipEventElapsedTime(float *ms, void *start, void *end) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto *a = static_cast<Event *>(start), *b = static_cast<Event *>(end);
  if (!a->recorded || !b->recorded)
    return kInvalidHandle;
  *ms = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return kSuccess;
}

#ifndef MLA_FAKE_HIP_NO_GRAPHS
FAKE_EXPORT hipError_t hipStreamBeginCapture(void *stream, int mode) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto *s = static_cast<Stream *>(stream);
  if (!s || s->capturing || mode != 1)
    return kInvalidValue;
  s->capturing = true;
  s->invalidated = false;
  s->captured.clear();
  capturingStream = s;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipStreamEndCapture(void *stream, void **graph) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto *s = static_cast<Stream *>(stream);
  if (!s || !s->capturing)
    return kInvalidValue;
  s->capturing = false;
  capturingStream = nullptr;
  if (s->invalidated) {
    *graph = nullptr;
    return kCaptureInvalidated;
  }
  auto *g = new Graph();
  g->launches = std::move(s->captured);
  ++state().stats.liveGraphs;
  *graph = g;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipGraphInstantiateWithFlags(void **exec, void *graph,
                                                    unsigned long long) {
  std::lock_guard<std::mutex> lock(state().mutex);
  *exec = new Graph(*static_cast<Graph *>(graph));
  ++state().stats.liveGraphs;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipGraphLaunch(void *exec, void *) {
  std::lock_guard<std::mutex> lock(state().mutex);
  for (const LaunchRecord &launch : static_cast<Graph *>(exec)->launches)
    record(launch);
  ++state().stats.graphLaunches;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipGraphExecDestroy(void *exec) {
  std::lock_guard<std::mutex> lock(state().mutex);
  delete static_cast<Graph *>(exec);
  --state().stats.liveGraphs;
  return kSuccess;
}

FAKE_EXPORT hipError_t hipGraphDestroy(void *graph) {
  std::lock_guard<std::mutex> lock(state().mutex);
  delete static_cast<Graph *>(graph);
  --state().stats.liveGraphs;
  return kSuccess;
}
#endif
