//===- FakeHipRuntime.h - Control API of the fake libamdhip64 ---*- C++ -*-===//
//
// FakeHipRuntime.cpp builds a stand-in for libamdhip64.so that implements
// the HIP entry points the HIP backend uses on host memory, so that the
// backend's calls can be tested on machines without ROCm or an AMD GPU. It
// never executes AMD code: it checks what a real runtime checks (the current
// device, live device pointers, the code object's machine against the
// device, kernel names against the object's kernel descriptors, the
// `extra` kernarg-buffer form and its size against the descriptor's
// kernarg_size, LDS and block limits, no allocation or synchronization
// during stream capture) and records every launch's kernarg buffer.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_TEST_HIP_FAKEHIPRUNTIME_H
#define MLA_RUNTIME_TEST_HIP_FAKEHIPRUNTIME_H

#include <cstdint>

struct MlaFakeHipConfig {
  /// What hipInit returns.
  int initResult = 0;
  int deviceCount = 1;
  /// gcnArchName, e.g. "gfx942:sramecc+:xnack-".
  char arch[64] = "gfx942:sramecc+:xnack-";
  int ldsBytes = 65536;
  int warpSize = 64;
  int maxThreadsPerBlock = 1024;
  int computeUnits = 304;
  /// What hipModuleLoadData returns for an image it would accept (0: load).
  int loadResult = 0;
};

struct MlaFakeHipStats {
  int liveAllocations = 0;
  int allocations = 0;
  int liveModules = 0;
  int moduleLoads = 0;
  int liveStreams = 0;
  int liveEvents = 0;
  int liveGraphs = 0;
  int launches = 0;
  int graphLaunches = 0;
  int synchronizations = 0;
  /// Calls made with another device current than the one they act on.
  int deviceErrors = 0;
  /// Launches refused for their kernel arguments (kernelParams given,
  /// malformed `extra`, a buffer size other than the kernel's).
  int kernargErrors = 0;
  int setDeviceCalls = 0;
  /// The last hipModuleLaunchKernel (captured or not) and the one before.
  char lastKernel[64] = {};
  unsigned lastGrid[3] = {0, 0, 0};
  unsigned lastBlock[3] = {0, 0, 0};
  unsigned lastSharedBytes = 0;
  void *lastStream = nullptr;
  uint64_t lastKernargBytes = 0;
  uint8_t lastKernargs[1024] = {};
  char previousKernel[64] = {};
  uint64_t previousKernargBytes = 0;
  uint8_t previousKernargs[1024] = {};
};

/// Exported by the fake library (look them up with dlsym).
using MlaFakeHipConfigureFn = void (*)(const MlaFakeHipConfig *);
using MlaFakeHipGetStatsFn = void (*)(MlaFakeHipStats *);

#endif // MLA_RUNTIME_TEST_HIP_FAKEHIPRUNTIME_H
