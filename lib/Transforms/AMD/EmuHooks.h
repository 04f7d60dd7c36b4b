//===- EmuHooks.h - The emulator's hooks as MLIR functions -----*- C++ -*-===//
//
// Pass-private: the MLIR view of runtime/include/mla/runtime/EmuAbi.h, used
// by mla-emulate-amdgpu (declares and calls the hooks) and
// mla-emulate-amdgpu-finalize (gives them bodies through the hook table).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_AMD_EMUHOOKS_H
#define MLA_LIB_TRANSFORMS_AMD_EMUHOOKS_H

#include "mla/runtime/EmuAbi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <optional>

namespace mla::emu {

/// The table symbol of a hook, e.g. "__mla_emu_barrier".
llvm::StringRef hookSymbol(Hook hook);

/// The hook named `symbol`, if it is one.
std::optional<Hook> hookBySymbol(llvm::StringRef symbol);

/// The hook's type from its EmuAbi.h signature.
mlir::FunctionType hookType(mlir::MLIRContext *ctx, Hook hook);

/// Whether the hook's last parameter is a site.
bool hookHasSite(Hook hook);

/// Calls `hook` (declaring it in `module` on first use). For hooks with a
/// site, `args` omit it: a placeholder 0 is passed, which the finalize pass
/// replaces by the index of the call's location in the site table.
mlir::ValueRange callHook(mlir::ImplicitLocOpBuilder &b, mlir::ModuleOp module,
                          Hook hook, mlir::ValueRange args);

} // namespace mla::emu

#endif // MLA_LIB_TRANSFORMS_AMD_EMUHOOKS_H
