//===- FakeCudaDriver.h - Control API of the fake libcuda -------*- C++ -*-===//
//
// FakeCudaDriver.cpp builds a stand-in for libcuda.so.1 that implements the
// driver entry points the CUDA backend uses on host memory, so that the
// backend's calls can be tested on machines without a GPU. It checks what a
// real driver checks (current context, live device pointers, dynamic shared
// memory limits, no allocation or synchronization during stream capture),
// copies kernel parameters by the sizes its PTX declares, and runs the
// kernels of the tests' PTX (mla_test_scale) on the host.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_TEST_CUDA_FAKECUDADRIVER_H
#define MLA_RUNTIME_TEST_CUDA_FAKECUDADRIVER_H

#include <cstdint>

struct MlaFakeCudaConfig {
  /// What cuInit returns.
  int initResult = 0;
  int deviceCount = 1;
  int ccMajor = 9;
  int ccMinor = 0;
  int maxThreadsPerBlock = 1024;
};

struct MlaFakeCudaStats {
  int primaryRetains = 0;
  int liveAllocations = 0;
  int allocations = 0;
  int liveModules = 0;
  int liveStreams = 0;
  int liveEvents = 0;
  int liveGraphs = 0;
  int launches = 0;
  /// Launches through cuLaunchKernelEx with programmatic stream
  /// serialization allowed.
  int programmaticLaunches = 0;
  /// Calls made without the primary context current.
  int contextErrors = 0;
  int setSharedAttributeCalls = 0;
  int lastDynamicSharedLimit = 0;
  /// The last cuLaunchKernel (captured or not).
  unsigned lastGrid[3] = {0, 0, 0};
  unsigned lastBlock[3] = {0, 0, 0};
  unsigned lastSharedBytes = 0;
  void *lastStream = nullptr;
  int lastParamCount = 0;
  uint64_t lastParams[64] = {};
  int lastParamSizes[64] = {};
  /// Whether cuModuleLoadDataEx got both JIT log buffers.
  bool lastLoadHadLogBuffers = false;
};

/// Exported by the fake library (look them up with dlsym).
using MlaFakeCudaConfigureFn = void (*)(const MlaFakeCudaConfig *);
using MlaFakeCudaGetStatsFn = void (*)(MlaFakeCudaStats *);

#endif // MLA_RUNTIME_TEST_CUDA_FAKECUDADRIVER_H
