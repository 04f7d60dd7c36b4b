//===- LaunchPlan.h - grids -> kernels + a launch plan ----------*- C++ -*-===//
//
// Shared by the host and GPU outlining passes: the plan of one function with
// mla.grid ops (#mla.launch_plan: its arguments with roles, workspaces with
// size formulas, and launches in order with grid formulas), which
// mla-compile turns into the package manifest.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_TRANSFORMS_LAUNCHPLAN_H
#define MLA_TRANSFORMS_LAUNCHPLAN_H

#include "mla/Dialect/MLA/IR/MLA.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mla {

class LaunchPlanBuilder {
public:
  explicit LaunchPlanBuilder(mlir::func::FuncOp func) : func(func) {}

  /// Records the function's arguments and its top-level memref.allocs
  /// (workspaces). Must be called first.
  mlir::LogicalResult addArgsAndWorkspaces();

  /// What a grid's region uses from outside: `params` become kernel
  /// parameters (function arguments or workspaces), `clones` are constants
  /// and memref.dims of plan values to copy into the kernel.
  struct Captures {
    llvm::SmallVector<mlir::Value> params;
    llvm::SmallVector<mlir::Operation *> clones;
  };
  mlir::FailureOr<Captures> captures(GridOp grid);

  /// The grid's three sizes as the runtime's formulas (PlanSizes.h).
  mlir::FailureOr<llvm::SmallVector<rt::DimExpr, 3>> gridSizes(GridOp grid);

  /// Appends the launch of `entry` with `params` over `grid` (and, on GPUs,
  /// its workgroup size, dynamic shared-memory bytes and whether it waits
  /// for the launches before it: PlanLaunchAttr's `dependent`).
  void addLaunch(llvm::StringRef entry, llvm::ArrayRef<mlir::Value> params,
                 llvm::ArrayRef<rt::DimExpr> grid,
                 llvm::ArrayRef<int64_t> block = {}, int64_t sharedBytes = -1,
                 bool dependent = false);

  /// The plan, with the function's `mla.kernel_info`; failure (an error at
  /// the function naming what LaunchPlanAttr's verifier refused) for a
  /// program the plan cannot describe.
  mlir::FailureOr<LaunchPlanAttr> finish();

  /// Clones `grid`'s body into `dest` before `insertBefore` (null: at the
  /// end), mapping params to `paramValues`, the clones and the grid's three
  /// coordinates to `coords`.
  static void cloneBody(GridOp grid, const Captures &caps,
                        mlir::ValueRange paramValues, mlir::ValueRange coords,
                        mlir::OpBuilder &builder);

private:
  mlir::FailureOr<rt::DimExpr> sizeExpr(mlir::Value v, mlir::Operation *user);
  mlir::FailureOr<llvm::SmallVector<rt::DimExpr>>
  dimsExpr(mlir::MemRefType type, mlir::ValueRange dynSizes,
           mlir::Operation *user);

  mlir::func::FuncOp func;
  llvm::DenseMap<mlir::Value, int64_t> index;
  llvm::SmallVector<PlanArgAttr> args;
  llvm::SmallVector<PlanWorkspaceAttr> workspaces;
  llvm::SmallVector<PlanLaunchAttr> launches;
};

/// The host entry ABI (host kernels and emulated AMD lanes): `args` is a
/// `void **` whose element j points to a strided memref descriptor
/// {allocated, aligned, offset, sizes[r], strides[r]} or to a scalar; returns
/// the values of `types` read from it.
llvm::SmallVector<mlir::Value> unpackEntryArgs(mlir::ImplicitLocOpBuilder &b,
                                               mlir::Value args,
                                               mlir::TypeRange types);

/// Functions of `module` that hold mla.grid ops.
llvm::SmallVector<mlir::func::FuncOp> functionsWithGrids(mlir::ModuleOp module);

} // namespace mla

#endif // MLA_TRANSFORMS_LAUNCHPLAN_H
