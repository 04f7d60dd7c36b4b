//===- GPUTarget.h - GPU code objects ---------------------------*- C++ -*-===//
#ifndef MLA_TARGET_GPUTARGET_H
#define MLA_TARGET_GPUTARGET_H

#include "mla/Target/Arch.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace mla {

enum class GPUEmit {
  LLVMIR,     ///< optimised LLVM IR text
  Assembly,   ///< PTX / AMDGCN assembly text
  CodeObject, ///< what the runtime loads: PTX text, or an HSA code object
};

/// Translates the `gpu.module @mla_kernels` of `module` (LLVM + NVVM/ROCDL
/// dialects) to LLVM IR, optimises it at -O3 for `arch`, and returns LLVM IR
/// text, the target assembly, or the code object: PTX for NVIDIA (the CUDA
/// driver loads it), an HSA code object for AMD (AMDGPU backend object
/// linked in-process by lld; no ROCm install or device-library bitcode).
/// Fails on an unresolved external call (e.g. a libdevice or ocml
/// function): kernels must be self-contained.
mlir::FailureOr<std::string> compileGPU(mlir::ModuleOp module,
                                        const ArchInfo &arch, GPUEmit emit);

} // namespace mla

#endif // MLA_TARGET_GPUTARGET_H
