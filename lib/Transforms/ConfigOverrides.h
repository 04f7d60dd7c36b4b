//===- ConfigOverrides.h - mla-select-config's fields and checks -*- C++ -*-===//
//
// Library-private: the fields of #mla.config as mla-select-config chooses
// them (ConfigFields), the --perf-config overrides by field name, and the
// checks of a chosen config and of the functions around the kernel ops
// (ConfigOverrides.cpp), what a chosen config asks of its lowering
// (ConfigRequests.cpp). The per-target heuristics and the pass are in
// SelectConfig.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_CONFIGOVERRIDES_H
#define MLA_LIB_TRANSFORMS_CONFIGOVERRIDES_H

#include "mla/Dialect/MLA/IR/MLA.h"
#include "mla/Target/Arch.h"

#include "mlir/IR/BuiltinOps.h"

namespace mla {

/// The fields of #mla.config while mla-select-config chooses them.
struct ConfigFields {
  int64_t tileKv, kvSplits, headGroup, warps, stages,
      minWorkgroups = 0, tileQ = 0, wgmma = 1, kvChunks = 0, workgroups = 0,
      chunkBalance = rt::schedule::kChunkBalance, mergeGroups = 1,
      chunkWindows = 0, blockedCopies = 1, overlap = 0, fusedMerge = 0,
      leadScores = 0;
};

/// The fields of `attr`.
ConfigFields fieldsOf(ConfigAttr attr);

/// `cfg` as #mla.config; with `emitError`, null after the attribute
/// verifier's error reported through it.
ConfigAttr
configAttrOf(mlir::MLIRContext *ctx, const ConfigFields &cfg,
             llvm::function_ref<mlir::InFlightDiagnostic()> emitError = {});

/// Whether the perf-config `spec` names `field` (its syntax is checked by
/// applyOverrides).
bool specHasField(llvm::StringRef spec, llvm::StringRef field);

/// Whether `op` (a decode or prefill) has a mask variant.
bool hasMaskRegion(mlir::Operation *op);

/// Applies `field=value,...` overrides to `cfg`; reports errors (an empty
/// or repeated field, a value that is not an integer, an unknown field,
/// with the list of fields) at `op`.
mlir::LogicalResult applyOverrides(mlir::Operation *op, llvm::StringRef spec,
                                   ConfigFields &cfg);

/// The config fields whose lowering on `arch` takes fewer values than
/// #mla.config allows (warps on the host and past the GPU's block size):
/// an error at `op`.
mlir::LogicalResult checkConfigForTarget(mlir::Operation *op, ConfigAttr cfg,
                                         const ArchInfo &arch);

/// What a chosen config asks of its lowering on `arch`, each an error
/// located at `op` saying why where it does not get it
/// (ConfigRequests.cpp): `overlap = 1` (a prefill's lagged P·V: the host or
/// warpgroup MMA's fused step with whole scores), `lead_scores` 1 to 4
/// (NVIDIA's fused step with two warpgroups sharing their rows; 3 and 4
/// with two stages; the host ignores it), the host's stack for a
/// workgroup's tiles, and warpgroup MMA asked for (`wgmma=1`) for a step of `rows` x `tileKv` on `warps` warps.
mlir::LogicalResult checkOverlapRequest(mlir::Operation *op, ConfigAttr attr,
                                        const ArchInfo &arch);
mlir::LogicalResult checkLeadScoresRequest(mlir::Operation *op, ConfigAttr attr,
                                           const ArchInfo &arch);
mlir::LogicalResult checkHostStack(mlir::Operation *op, ConfigAttr attr,
                                   const ArchInfo &arch);
mlir::LogicalResult checkWgmmaRequest(mlir::Operation *op, mlir::Type elem,
                                      int64_t rows, int64_t dim, int64_t tileKv,
                                      int64_t dv, int64_t warps);

/// Kernel ops nested in another op's region, or side effects beside the
/// kernel ops of a function, are errors located at the op (a compiled
/// package would drop them).
mlir::LogicalResult checkKernelFunctions(mlir::ModuleOp module);

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_CONFIGOVERRIDES_H
