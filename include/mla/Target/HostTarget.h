//===- HostTarget.h - host code objects -------------------------*- C++ -*-===//
#ifndef MLA_TARGET_HOSTTARGET_H
#define MLA_TARGET_HOSTTARGET_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace mla {

/// What to produce from a module in the LLVM dialect.
enum class HostEmit { LLVMIR, Assembly, Object, SharedObject };

/// The name of the host target in packages (section `code.<name>`).
constexpr const char *kHostTargetName = "host-x86_64";

/// Translates `module` (LLVM dialect) to LLVM IR, optimises it at -O3 for
/// x86-64 (x86-64-v3: AVX2, FMA, F16C), and returns the requested artefact: LLVM IR text,
/// assembly text, a relocatable object, or a shared object linked in-process
/// with lld. Only libm symbols may stay undefined in a shared object.
mlir::FailureOr<std::vector<uint8_t>> compileHost(mlir::ModuleOp module,
                                                  HostEmit emit);

/// Links a relocatable ELF object into a shared object with lld, in
/// process. With `noUndefined` every symbol must resolve (GPU code objects);
/// otherwise only libm imports are accepted (host code objects).
mlir::FailureOr<std::vector<uint8_t>>
linkSharedObject(mlir::ModuleOp module, llvm::ArrayRef<uint8_t> object,
                 bool noUndefined);

} // namespace mla

#endif // MLA_TARGET_HOSTTARGET_H
