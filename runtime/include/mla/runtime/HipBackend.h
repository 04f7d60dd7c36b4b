//===- HipBackend.h - The HIP backend ---------------------------*- C++ -*-===//
//
// Runs AMD GPU code objects (manifest targets gfx90a, gfx942, gfx950: HSA
// code objects as mla-compile emits them) through the HIP module API of
// libamdhip64, which is loaded at run time with dlopen: the runtime builds
// without ROCm, and a machine without it gets a one-line error from
// createHipBackend / Device::open("hip"). Before a code object is loaded its
// AMDGPU metadata is checked against the manifest (AmdgpuMetadata.h).
//
// Nothing of this backend has run on an AMD GPU yet: it is tested against a
// fake libamdhip64 (test/hip/FakeHipRuntime.cpp) that checks the calls and
// the kernarg buffers on host memory; the GPU tests (ctest label `rocm`)
// skip without ROCm and a device.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_HIPBACKEND_H
#define MLA_RUNTIME_HIPBACKEND_H

#include "mla/runtime/Backend.h"
#include "mla/runtime/Status.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mla::rt {

struct HipBackendOptions {
  /// HIP device ordinal.
  int ordinal = 0;
  /// The HIP runtime library to dlopen; empty tries libamdhip64.so, then
  /// libamdhip64.so.7, .so.6 and .so.5 (tests point it at a fake).
  std::string libraryPath;
  /// Accept kernels that use scratch memory (a private segment or a dynamic
  /// stack: register spills); by default loading them fails.
  bool allowScratch = false;
};

/// Opens HIP device `options.ordinal`: loads the HIP runtime (once per
/// process and path), initializes it and reads the device's arch name, LDS
/// size and wavefront size. Errors are one line starting with "hip: ", e.g.
///   hip: libamdhip64.so not found (no ROCm on this machine)
///   hip: no AMD GPU
/// (Unsupported when the machine has no usable runtime or device).
Expected<std::shared_ptr<Backend>>
createHipBackend(const HipBackendOptions &options = {});

/// The device ordinal of "hip" (0) and "hip:N"; std::nullopt otherwise.
std::optional<int> parseHipDeviceName(std::string_view name);

/// The target a device with HIP arch name `deviceArch` (e.g.
/// "gfx942:sramecc+:xnack-") loads from a package with these target names:
/// the first whose processor is the device's ("gfx942"). The error
/// (Unsupported) names the device's processor and the package's targets.
Expected<std::string> selectHipTarget(std::string_view deviceArch,
                                      const std::vector<std::string> &targets);

} // namespace mla::rt

#endif // MLA_RUNTIME_HIPBACKEND_H
