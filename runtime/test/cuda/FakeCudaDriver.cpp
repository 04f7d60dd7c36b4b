//===- FakeCudaDriver.cpp - A libcuda stand-in on host memory -------------===//
//
// See FakeCudaDriver.h. Built as a shared library with C entry points named
// like the driver's; MLA_FAKE_NO_GRAPHS leaves out the graph API (an old
// driver), MLA_FAKE_NO_MEMALLOC leaves out cuMemAlloc_v2 (a broken one).
//
//===----------------------------------------------------------------------===//

#include "FakeCudaDriver.h"

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

using CUresult = int;
using CUdeviceptr = unsigned long long;

constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kOutOfMemory = 2;
constexpr CUresult kInvalidDevice = 101;
constexpr CUresult kInvalidContext = 201;
constexpr CUresult kInvalidPtx = 218;
constexpr CUresult kInvalidHandle = 400;
constexpr CUresult kNotFound = 500;
constexpr CUresult kIllegalAddress = 700;
constexpr CUresult kCaptureUnsupported = 900;
constexpr CUresult kCaptureInvalidated = 901;
constexpr int kOptinShared = 232448;

struct Function {
  std::string name;
  std::vector<int> paramSizes;
  int dynamicSharedLimit = 0;
};

struct Module {
  std::map<std::string, std::unique_ptr<Function>> functions;
};

/// One kernel launch with its parameters copied, as a graph node holds it.
struct LaunchRecord {
  Function *function;
  unsigned grid[3], block[3];
  std::vector<std::vector<uint8_t>> params;
};

struct Stream {
  bool capturing = false;
  bool invalidated = false;
  std::vector<LaunchRecord> captured;
};

struct Event {
  std::chrono::steady_clock::time_point time;
};

struct Graph {
  std::vector<LaunchRecord> launches;
};

struct State {
  std::mutex mutex;
  MlaFakeCudaConfig config;
  MlaFakeCudaStats stats;
  int primaryContext = 0; // its address is the CUcontext
  /// Live allocations: start -> size.
  std::map<uintptr_t, size_t> allocations;
  /// Sticky error from a bad access of an emulated kernel.
  CUresult asyncError = kSuccess;
};

State &state() {
  static State *s = new State();
  return *s;
}

/// The thread's context stack: a fixed array, trivially destructible, so
/// that this library (dlopened and closed by every test) registers no
/// thread-local destructor: with one, LeakSanitizer's scan of the closed
/// copies' dynamic TLS crashed at exit in the sanitizer build.
constexpr int kMaxContextDepth = 16;
struct ContextStack {
  void *entries[kMaxContextDepth];
  int depth;
  bool empty() const { return depth == 0; }
  void *back() const { return entries[depth - 1]; }
};
thread_local ContextStack contextStack;
thread_local Stream *capturingStream = nullptr;

void *primary() { return &state().primaryContext; }

/// Checks the primary context is current; counts violations.
bool contextCurrent() {
  if (!contextStack.empty() && contextStack.back() == primary())
    return true;
  ++state().stats.contextErrors;
  return false;
}

/// Whether [address, address + bytes) lies in one live allocation.
bool isDeviceRange(uintptr_t address, size_t bytes) {
  auto &allocations = state().allocations;
  auto it = allocations.upper_bound(address);
  if (it == allocations.begin())
    return false;
  --it;
  return address + bytes <= it->first + it->second;
}

/// A call that real drivers forbid while this thread captures a stream.
bool forbiddenDuringCapture() {
  if (!capturingStream)
    return false;
  capturingStream->invalidated = true;
  return true;
}

int ptxTypeSize(const std::string &type) {
  if (type == ".u64" || type == ".s64" || type == ".b64" || type == ".f64")
    return 8;
  if (type == ".u32" || type == ".s32" || type == ".b32" || type == ".f32")
    return 4;
  if (type == ".u16" || type == ".s16" || type == ".b16" || type == ".f16" ||
      type == ".bf16")
    return 2;
  if (type == ".u8" || type == ".s8" || type == ".b8")
    return 1;
  return 0;
}

/// Parses the `.entry NAME(.param .T a, ...)` declarations of PTX text.
void parseEntries(const std::string &ptx, Module &module) {
  size_t pos = 0;
  while ((pos = ptx.find(".entry", pos)) != std::string::npos) {
    pos += 6;
    size_t open = ptx.find('(', pos);
    size_t close = ptx.find(')', open);
    if (open == std::string::npos || close == std::string::npos)
      return;
    std::string name = ptx.substr(pos, open - pos);
    name.erase(0, name.find_first_not_of(" \t\n"));
    name.erase(name.find_last_not_of(" \t\n") + 1);
    auto function = std::make_unique<Function>();
    function->name = name;
    std::string list = ptx.substr(open + 1, close - open - 1);
    size_t p = 0;
    while ((p = list.find(".param", p)) != std::string::npos) {
      p += 6;
      // Tokens up to the parameter name: [.align N] .type name[count]
      size_t end = list.find(',', p);
      std::string decl = list.substr(
          p, end == std::string::npos ? std::string::npos : end - p);
      int size = 0, count = 1;
      size_t t = 0;
      while (t < decl.size()) {
        size_t start = decl.find_first_not_of(" \t\n", t);
        if (start == std::string::npos)
          break;
        size_t stop = decl.find_first_of(" \t\n", start);
        std::string token = decl.substr(start, stop - start);
        t = stop == std::string::npos ? decl.size() : stop;
        if (int s = ptxTypeSize(token))
          size = s;
        size_t bracket = token.find('[');
        if (bracket != std::string::npos)
          count = std::atoi(token.c_str() + bracket + 1);
      }
      function->paramSizes.push_back(size * count);
    }
    module.functions[name] = std::move(function);
    pos = close;
  }
}

template <typename T> T param(const LaunchRecord &launch, size_t i) {
  T value;
  std::memcpy(&value, launch.params[i].data(), sizeof(T));
  return value;
}

/// mla_test_scale(memref<?x?xf32> src, memref<?x?xf32> dst, f32 factor):
/// dst[r][c] = src[r][c] * factor for rows r < grid.x, every column.
void runScale(const LaunchRecord &launch) {
  if (launch.params.size() != 15)
    return;
  auto *src = reinterpret_cast<float *>(param<uint64_t>(launch, 1));
  int64_t srcOffset = param<int64_t>(launch, 2);
  int64_t rows = param<int64_t>(launch, 3), cols = param<int64_t>(launch, 4);
  int64_t srcStride0 = param<int64_t>(launch, 5);
  int64_t srcStride1 = param<int64_t>(launch, 6);
  auto *dst = reinterpret_cast<float *>(param<uint64_t>(launch, 8));
  int64_t dstOffset = param<int64_t>(launch, 9);
  int64_t dstStride0 = param<int64_t>(launch, 12);
  int64_t dstStride1 = param<int64_t>(launch, 13);
  float factor = param<float>(launch, 14);
  for (int64_t r = 0; r < rows && r < launch.grid[0]; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float *in = src + srcOffset + r * srcStride0 + c * srcStride1;
      float *out = dst + dstOffset + r * dstStride0 + c * dstStride1;
      if (!isDeviceRange(reinterpret_cast<uintptr_t>(in), 4) ||
          !isDeviceRange(reinterpret_cast<uintptr_t>(out), 4)) {
        state().asyncError = kIllegalAddress;
        return;
      }
      *out = *in * factor;
    }
  }
}

void run(const LaunchRecord &launch) {
  if (launch.function->name == "mla_test_scale")
    runScale(launch);
}

} // namespace

FAKE_EXPORT void mlaFakeCudaConfigure(const MlaFakeCudaConfig *config) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().config = *config;
}

FAKE_EXPORT void mlaFakeCudaGetStats(MlaFakeCudaStats *stats) {
  std::lock_guard<std::mutex> lock(state().mutex);
  *stats = state().stats;
}

FAKE_EXPORT CUresult cuInit(unsigned) { return state().config.initResult; }

FAKE_EXPORT CUresult cuDriverGetVersion(int *version) {
  *version = 13000;
  return kSuccess;
}

FAKE_EXPORT CUresult cuGetErrorName(CUresult error, const char **name) {
  static const std::map<int, const char *> names = {
      {0, "CUDA_SUCCESS"},
      {1, "CUDA_ERROR_INVALID_VALUE"},
      {2, "CUDA_ERROR_OUT_OF_MEMORY"},
      {201, "CUDA_ERROR_INVALID_CONTEXT"},
      {218, "CUDA_ERROR_INVALID_PTX"},
      {500, "CUDA_ERROR_NOT_FOUND"},
      {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
      {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
      {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
      {999, "CUDA_ERROR_UNKNOWN"}};
  auto it = names.find(error);
  if (it == names.end())
    return kInvalidValue;
  *name = it->second;
  return kSuccess;
}

FAKE_EXPORT CUresult cuGetErrorString(CUresult error, const char **text) {
  if (error == 218) {
    *text = "a PTX JIT compilation failed";
    return kSuccess;
  }
  if (error == 999) {
    *text = "unknown error\nwith a second line";
    return kSuccess;
  }
  return kInvalidValue;
}

FAKE_EXPORT CUresult cuDeviceGetCount(int *count) {
  *count = state().config.deviceCount;
  return kSuccess;
}

FAKE_EXPORT CUresult cuDeviceGet(int *device, int ordinal) {
  if (ordinal < 0 || ordinal >= state().config.deviceCount)
    return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

FAKE_EXPORT CUresult cuDeviceGetName(char *name, int length, int) {
  std::strncpy(name, "Fake CUDA Device", length);
  return kSuccess;
}

FAKE_EXPORT CUresult cuDeviceGetAttribute(int *value, int attribute, int) {
  const MlaFakeCudaConfig &config = state().config;
  switch (attribute) {
  case 16:
    *value = 132;
    break;
  case 38:
    *value = 60 << 20;
    break;
  case 75:
    *value = config.ccMajor;
    break;
  case 76:
    *value = config.ccMinor;
    break;
  case 97:
    *value = kOptinShared;
    break;
  default:
    *value = 0;
  }
  return kSuccess;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(void **context, int) {
  std::lock_guard<std::mutex> lock(state().mutex);
  ++state().stats.primaryRetains;
  *context = primary();
  return kSuccess;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int) {
  std::lock_guard<std::mutex> lock(state().mutex);
  --state().stats.primaryRetains;
  return kSuccess;
}

FAKE_EXPORT CUresult cuCtxGetCurrent(void **context) {
  *context = contextStack.empty() ? nullptr : contextStack.back();
  return kSuccess;
}

FAKE_EXPORT CUresult cuCtxPushCurrent_v2(void *context) {
  if (contextStack.depth == kMaxContextDepth)
    return kInvalidContext;
  contextStack.entries[contextStack.depth++] = context;
  return kSuccess;
}

FAKE_EXPORT CUresult cuCtxPopCurrent_v2(void **context) {
  if (contextStack.empty())
    return kInvalidContext;
  *context = contextStack.back();
  --contextStack.depth;
  return kSuccess;
}

FAKE_EXPORT CUresult cuCtxSynchronize() {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  if (forbiddenDuringCapture())
    return kCaptureUnsupported;
  CUresult error = state().asyncError;
  return error;
}

FAKE_EXPORT CUresult cuModuleLoadDataEx(void **module, const void *image,
                                        unsigned numOptions, int *options,
                                        void **values) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  char *errorLog = nullptr;
  size_t errorLogSize = 0;
  bool infoLog = false;
  for (unsigned i = 0; i < numOptions; ++i) {
    if (options[i] == 5)
      errorLog = static_cast<char *>(values[i]);
    if (options[i] == 6)
      errorLogSize = reinterpret_cast<uintptr_t>(values[i]);
    if (options[i] == 3)
      infoLog = true;
  }
  state().stats.lastLoadHadLogBuffers = errorLog && errorLogSize && infoLog;
  const char *text = static_cast<const char *>(image);
  if (std::memcmp(text,
                  "\x7f"
                  "ELF",
                  4) != 0 &&
      std::strstr(text, "INVALID_PTX_FOR_TEST")) {
    if (errorLog && errorLogSize)
      std::snprintf(errorLog, errorLogSize, "%s",
                    "ptxas application ptx input, line 7; error   : Unknown "
                    "symbol 'INVALID_PTX_FOR_TEST'\nptxas fatal   : Ptx "
                    "assembly aborted due to errors\n");
    return kInvalidPtx;
  }
  auto *loaded = new Module();
  if (std::memcmp(text,
                  "\x7f"
                  "ELF",
                  4) != 0)
    parseEntries(text, *loaded);
  ++state().stats.liveModules;
  *module = loaded;
  return kSuccess;
}

FAKE_EXPORT CUresult cuModuleUnload(void *module) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  delete static_cast<Module *>(module);
  --state().stats.liveModules;
  return kSuccess;
}

FAKE_EXPORT CUresult cuModuleGetFunction(void **function, void *module,
                                         const char *name) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  auto &functions = static_cast<Module *>(module)->functions;
  auto it = functions.find(name);
  if (it == functions.end())
    return kNotFound;
  *function = it->second.get();
  return kSuccess;
}

FAKE_EXPORT CUresult cuFuncGetAttribute(int *value, int attribute,
                                        void *function) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  auto *f = static_cast<Function *>(function);
  switch (attribute) {
  case 0:
    *value = state().config.maxThreadsPerBlock;
    return kSuccess;
  case 1:
    *value = 0;
    return kSuccess;
  case 8:
    *value = f->dynamicSharedLimit;
    return kSuccess;
  }
  return kInvalidValue;
}

FAKE_EXPORT CUresult cuFuncSetAttribute(void *function, int attribute,
                                        int value) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  if (attribute != 8 || value < 0 || value > kOptinShared)
    return kInvalidValue;
  static_cast<Function *>(function)->dynamicSharedLimit = value;
  ++state().stats.setSharedAttributeCalls;
  state().stats.lastDynamicSharedLimit = value;
  return kSuccess;
}

FAKE_EXPORT CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy,
                                    unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned shared, void *stream,
                                    void **params, void **extra) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  auto *f = static_cast<Function *>(function);
  if (!gx || !gy || !gz || !bx || !by || !bz || extra ||
      bx * by * bz > static_cast<unsigned>(state().config.maxThreadsPerBlock))
    return kInvalidValue;
  if (shared > 48 * 1024 &&
      shared > static_cast<unsigned>(f->dynamicSharedLimit))
    return kInvalidValue;
  if (!params && !f->paramSizes.empty())
    return kInvalidValue;
  LaunchRecord launch{f, {gx, gy, gz}, {bx, by, bz}, {}};
  MlaFakeCudaStats &stats = state().stats;
  stats.lastParamCount = static_cast<int>(f->paramSizes.size());
  for (size_t i = 0; i < f->paramSizes.size(); ++i) {
    const auto *bytes = static_cast<const uint8_t *>(params[i]);
    launch.params.emplace_back(bytes, bytes + f->paramSizes[i]);
    if (i < 64) {
      stats.lastParams[i] = 0;
      std::memcpy(&stats.lastParams[i], bytes,
                  std::min<size_t>(8, f->paramSizes[i]));
      stats.lastParamSizes[i] = f->paramSizes[i];
    }
  }
  ++stats.launches;
  std::memcpy(stats.lastGrid, launch.grid, sizeof(launch.grid));
  std::memcpy(stats.lastBlock, launch.block, sizeof(launch.block));
  stats.lastSharedBytes = shared;
  stats.lastStream = stream;
  auto *s = static_cast<Stream *>(stream);
  if (s && s->capturing) {
    s->captured.push_back(std::move(launch));
    return kSuccess;
  }
  if (capturingStream)
    return kCaptureUnsupported; // the legacy stream during a capture
  run(launch);
  return kSuccess;
}

/// cuda.h's CUlaunchConfig and CUlaunchAttribute (the one attribute the
/// backend sets: programmatic stream serialization, id 6).
struct FakeLaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int allowed;
  } value;
};
struct FakeLaunchConfig {
  unsigned gx, gy, gz, bx, by, bz, shared;
  void *stream;
  FakeLaunchAttribute *attrs;
  unsigned numAttrs;
};

FAKE_EXPORT CUresult cuLaunchKernelEx(const FakeLaunchConfig *c, void *function,
                                      void **params, void **extra) {
  if (!c || (c->numAttrs && !c->attrs))
    return kInvalidValue;
  bool programmatic = false;
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    if (c->attrs[i].id != 6 || c->attrs[i].value.allowed != 1)
      return kInvalidValue;
    programmatic = true;
  }
  CUresult r = cuLaunchKernel(function, c->gx, c->gy, c->gz, c->bx, c->by,
                              c->bz, c->shared, c->stream, params, extra);
  if (r == kSuccess && programmatic) {
    std::lock_guard<std::mutex> lock(state().mutex);
    ++state().stats.programmaticLaunches;
  }
  return r;
}

#ifndef MLA_FAKE_NO_MEMALLOC
FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  if (forbiddenDuringCapture())
    return kCaptureUnsupported;
  if (bytes == 0)
    return kInvalidValue;
  if (bytes > (size_t{1} << 34))
    return kOutOfMemory;
  void *memory = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!memory)
    return kOutOfMemory;
  state().allocations[reinterpret_cast<uintptr_t>(memory)] = bytes;
  ++state().stats.liveAllocations;
  ++state().stats.allocations;
  *pointer = reinterpret_cast<uintptr_t>(memory);
  return kSuccess;
}
#endif

FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr pointer) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  auto it = state().allocations.find(pointer);
  if (it == state().allocations.end())
    return kInvalidValue;
  state().allocations.erase(it);
  std::free(reinterpret_cast<void *>(pointer));
  --state().stats.liveAllocations;
  return kSuccess;
}

FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t *freeBytes, size_t *totalBytes) {
  *freeBytes = size_t{1} << 33;
  *totalBytes = size_t{1} << 34;
  return contextCurrent() ? kSuccess : kInvalidContext;
}

FAKE_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src,
                                     size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  if (forbiddenDuringCapture())
    return kCaptureUnsupported;
  if (!isDeviceRange(dst, bytes))
    return kInvalidValue;
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return kSuccess;
}

FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  if (forbiddenDuringCapture())
    return kCaptureUnsupported;
  if (!isDeviceRange(src, bytes))
    return kInvalidValue;
  std::memcpy(dst, reinterpret_cast<void *>(src), bytes);
  return kSuccess;
}

FAKE_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value,
                                   size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  if (forbiddenDuringCapture())
    return kCaptureUnsupported;
  if (!isDeviceRange(dst, bytes))
    return kInvalidValue;
  std::memset(reinterpret_cast<void *>(dst), value, bytes);
  return kSuccess;
}

FAKE_EXPORT CUresult cuStreamCreate(void **stream, unsigned) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  *stream = new Stream();
  ++state().stats.liveStreams;
  return kSuccess;
}

FAKE_EXPORT CUresult cuStreamDestroy_v2(void *stream) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  delete static_cast<Stream *>(stream);
  --state().stats.liveStreams;
  return kSuccess;
}

FAKE_EXPORT CUresult cuStreamSynchronize(void *) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  if (forbiddenDuringCapture())
    return kCaptureUnsupported;
  return state().asyncError;
}

FAKE_EXPORT CUresult cuEventCreate(void **event, unsigned) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  *event = new Event();
  ++state().stats.liveEvents;
  return kSuccess;
}

FAKE_EXPORT CUresult cuEventDestroy_v2(void *event) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  delete static_cast<Event *>(event);
  --state().stats.liveEvents;
  return kSuccess;
}

FAKE_EXPORT CUresult cuEventRecord(void *event, void *) {
  if (!contextCurrent())
    return kInvalidContext;
  static_cast<Event *>(event)->time = std::chrono::steady_clock::now();
  return kSuccess;
}

FAKE_EXPORT CUresult cuEventSynchronize(void *) {
  return contextCurrent() ? kSuccess : kInvalidContext;
}

FAKE_EXPORT CUresult cuEventElapsedTime_v2(float *ms, void *start, void *end) {
  if (!contextCurrent())
    return kInvalidContext;
  *ms = std::chrono::duration<float, std::milli>(
            static_cast<Event *>(end)->time - static_cast<Event *>(start)->time)
            .count();
  return kSuccess;
}

#ifndef MLA_FAKE_NO_GRAPHS
FAKE_EXPORT CUresult cuStreamBeginCapture_v2(void *stream, int) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  auto *s = static_cast<Stream *>(stream);
  if (!s || s->capturing || capturingStream)
    return kInvalidValue;
  s->capturing = true;
  s->invalidated = false;
  s->captured.clear();
  capturingStream = s;
  return kSuccess;
}

FAKE_EXPORT CUresult cuStreamEndCapture(void *stream, void **graph) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  auto *s = static_cast<Stream *>(stream);
  if (!s || !s->capturing)
    return kInvalidValue;
  s->capturing = false;
  capturingStream = nullptr;
  *graph = nullptr;
  if (s->invalidated)
    return kCaptureInvalidated;
  auto *captured = new Graph();
  captured->launches = std::move(s->captured);
  s->captured.clear();
  ++state().stats.liveGraphs;
  *graph = captured;
  return kSuccess;
}

FAKE_EXPORT CUresult cuGraphInstantiateWithFlags(void **exec, void *graph,
                                                 unsigned long long) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  *exec = new Graph(*static_cast<Graph *>(graph));
  ++state().stats.liveGraphs;
  return kSuccess;
}

FAKE_EXPORT CUresult cuGraphLaunch(void *exec, void *) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!contextCurrent())
    return kInvalidContext;
  if (!exec)
    return kInvalidHandle;
  for (const LaunchRecord &launch : static_cast<Graph *>(exec)->launches)
    run(launch);
  return kSuccess;
}

FAKE_EXPORT CUresult cuGraphExecDestroy(void *exec) {
  std::lock_guard<std::mutex> lock(state().mutex);
  delete static_cast<Graph *>(exec);
  --state().stats.liveGraphs;
  return kSuccess;
}

FAKE_EXPORT CUresult cuGraphDestroy(void *graph) {
  std::lock_guard<std::mutex> lock(state().mutex);
  delete static_cast<Graph *>(graph);
  --state().stats.liveGraphs;
  return kSuccess;
}
#endif
