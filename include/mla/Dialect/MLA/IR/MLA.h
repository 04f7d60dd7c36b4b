//===- MLA.h - mla dialect --------------------------------------*- C++ -*-===//
#ifndef MLA_DIALECT_MLA_IR_MLA_H
#define MLA_DIALECT_MLA_IR_MLA_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "mla/Dialect/MLA/IR/PlanSizes.h" // #mla.launch_plan sizes
#include "mla/Target/Arch.h"
#include "mla/runtime/ChunkSchedule.h" // #mla.config chunk_balance default

#include "mla/Dialect/MLA/IR/MLAOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "mla/Dialect/MLA/IR/MLAAttrs.h.inc"

#define GET_OP_CLASSES
#include "mla/Dialect/MLA/IR/MLAOps.h.inc"

namespace mla {
/// The most part groups of mla.chunk_merge (`groups`, #mla.config
/// merge_groups).
inline constexpr int64_t kMaxMergeGroups = 16;
/// The most warps (waves) a workgroup's config may take (#mla.config
/// warps; mla-distribute's default-warps).
inline constexpr int64_t kMaxConfigWarps = 16;

/// The target of the module holding `op` (its `mla.target`, set by
/// mla-select-config), or an error located at that module naming `pass`.
mlir::FailureOr<const ArchInfo *> moduleTarget(mlir::Operation *op,
                                               llvm::StringRef pass);
} // namespace mla

#endif // MLA_DIALECT_MLA_IR_MLA_H
