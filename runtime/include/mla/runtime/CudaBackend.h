//===- CudaBackend.h - The CUDA backend -------------------------*- C++ -*-===//
//
// Runs PTX code objects (manifest targets sm_80 and sm_90a) through the CUDA
// driver API on a device's primary context. The driver, libcuda.so.1, is
// loaded at run time with dlopen: the runtime builds without any CUDA
// toolkit or header, and a machine without a driver or device gets a
// one-line error from createCudaBackend / Device::open("cuda").
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CUDABACKEND_H
#define MLA_RUNTIME_CUDABACKEND_H

#include "mla/runtime/Backend.h"
#include "mla/runtime/Status.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mla::rt {

struct CudaBackendOptions {
  /// CUDA device ordinal.
  int ordinal = 0;
  /// The driver library to dlopen (tests point it at a fake driver).
  std::string driverPath = "libcuda.so.1";
};

/// Opens CUDA device `options.ordinal`: loads the driver (once per process
/// and path), initializes it and retains the device's primary context.
/// Errors are one line starting with "cuda: ", e.g.
///   cuda: libcuda.so.1 not found (no NVIDIA driver on this machine)
///   cuda: no CUDA device
/// (Unsupported when the machine has no usable driver or device).
Expected<std::shared_ptr<Backend>>
createCudaBackend(const CudaBackendOptions &options = {});

/// The device ordinal of "cuda" (0) and "cuda:N"; std::nullopt otherwise.
std::optional<int> parseCudaDeviceName(std::string_view name);

/// Whether PTX of manifest target `target` runs on a device of compute
/// capability major.minor: sm_90a on 9.0 exactly, sm_80 on 8.0 and newer.
bool cudaTargetRuns(int major, int minor, std::string_view target);

/// The target a device of compute capability major.minor loads from a
/// package with these target names: sm_90a on 9.0 when present, else sm_80
/// on 8.0 and newer. The error (Unsupported) names the compute capability
/// and the package's targets.
Expected<std::string> selectCudaTarget(int major, int minor,
                                       const std::vector<std::string> &targets);

} // namespace mla::rt

#endif // MLA_RUNTIME_CUDABACKEND_H
