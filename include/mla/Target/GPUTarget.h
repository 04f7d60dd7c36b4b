//===- GPUTarget.h - GPU code objects ---------------------------*- C++ -*-===//
#ifndef MLA_TARGET_GPUTARGET_H
#define MLA_TARGET_GPUTARGET_H

#include "mla/Target/Arch.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace mla {

enum class GPUEmit { LLVMIR, Assembly };

/// Translates the `gpu.module @mla_kernels` of `module` (LLVM + NVVM
/// dialects) to LLVM IR, optimises it at -O3 for `arch`, and returns LLVM IR
/// text or the target assembly (PTX for NVIDIA, which is also the code
/// object the CUDA driver loads). Fails on an unresolved external call
/// (e.g. a libdevice function): kernels must be self-contained.
mlir::FailureOr<std::string> compileGPU(mlir::ModuleOp module,
                                        const ArchInfo &arch, GPUEmit emit);

} // namespace mla

#endif // MLA_TARGET_GPUTARGET_H
