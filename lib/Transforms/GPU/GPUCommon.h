//===- GPUCommon.h - shared by the GPU lowerings ---------------*- C++ -*-===//
//
// Library-private helpers shared by the vendor emitters of mla-distribute
// (lib/Transforms/NVIDIA, lib/Transforms/AMD) and its driver
// (GPU/Distribute.cpp): the workgroup's threads, tiles of the grid, and
// guarded loads and stores.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_GPU_GPUCOMMON_H
#define MLA_LIB_TRANSFORMS_GPU_GPUCOMMON_H

#include "mla/Dialect/MLA/IR/MLA.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <string>

namespace mla {

/// The threads of one workgroup, as mla-distribute builds them.
struct ThreadInfo {
  mlir::Value tid;    ///< linear thread id in the workgroup
  int64_t threads;    ///< threads per workgroup
  int64_t warpSize;   ///< threads per warp / wave
  bool wgmma = false; ///< warpgroup MMA allowed for the fused attention step
  /// The config's lead_scores: one warpgroup computes a split step's
  /// scores (nvidia::StepPlan::leadScores).
  bool leadScores = false;
  /// The config's lead_scores = 2, 3 or 4: such a step in a pipelined key
  /// loop also hands the next key tile's copy to its second warpgroup.
  bool handsCopy = false;
  /// The config's lead_scores = 3 or 4: the second warpgroup's P·V runs
  /// one key tile behind the first's (nvidia FusedStep's lagged lead step).
  bool lagsValues = false;
  /// The config's lead_scores = 4: the lagged step's second warpgroup
  /// issues the columns of the next tile before its value half at the top
  /// of the iteration, the rest after its product (FusedStep::SplitCopy).
  bool splitsHandedCopy = false;
  /// The config's blocked_copies: asynchronous copies spread row by row
  /// where the target blocks them (ArchInfo::blocksCopyThreads).
  bool blockedCopies = true;
  int64_t warps() const { return threads / warpSize; }
};

/// The shape of an attention step (mla.attention_step's tiles) and the
/// warps / waves of its workgroup, for planning before or while lowering it.
struct StepShape {
  mlir::Type elem;
  int64_t rows, dim, tile, dv, warps;
  /// V is a tile of its own (prefill), not the first dv columns of K's
  /// (decode's latent rows).
  bool separateValues = false;
  /// The config asks one warpgroup to compute the scores of a step whose
  /// warpgroups share rows (#mla.config lead_scores).
  bool leadScores = false;
  /// Bytes of the K (and V) tile(s) of one key tile.
  int64_t keyTileBytes() const {
    return tile * (dim + (separateValues ? dv : 0)) *
           (elem.getIntOrFloatBitWidth() / 8);
  }
};

/// The scf.for key loop of a step: its parent, or with `tileSkip` the
/// parent of the scf.if (no results, no else) that holds it, which a
/// mask's tile-level test puts around the tiles' copy and step (mla-tile
/// skips key tiles without a visible key); null otherwise.
mlir::scf::ForOp stepKeyLoop(AttentionStepOp op, bool tileSkip = false);

/// The scf.if around `op` that skips its key tile (stepKeyLoop with
/// `tileSkip`), or null where the step is directly in its key loop.
mlir::scf::IfOp stepTileSkip(AttentionStepOp op);

/// The IR conditions of a register-resident attention step: the step ends
/// its scf.for key loop's body (the pure ops after it, returned in `pure`,
/// may move in front) or, where `tileSkip` allows it, the then-block of
/// the tile-skipping scf.if that ends the loop's body; its operands are
/// tiles of the grid, and nothing else in the loop touches its state (acc,
/// m, l). Fails with the reason in `why`.
mlir::LogicalResult
checkStepLoop(AttentionStepOp op,
              llvm::SmallVectorImpl<mlir::Operation *> &pure, std::string &why,
              bool tileSkip = false);

/// Carries a register-resident step's state through its key loop: the loop
/// gets `init` as extra iteration arguments, `step` (at `op`) computes the
/// next state from the current one, and `after` runs after the loop with the
/// final state; `op` is erased last. A tile-skipping scf.if around the step
/// (stepTileSkip) becomes one yielding the next state, or the current one
/// for a skipped tile. The original loop is replaced: callers must not
/// touch it once `step` runs.
mlir::LogicalResult carryStepState(
    AttentionStepOp op, llvm::ArrayRef<mlir::Value> init,
    llvm::function_ref<llvm::SmallVector<mlir::Value>(
        mlir::ImplicitLocOpBuilder &, llvm::ArrayRef<mlir::BlockArgument>)>
        step,
    llvm::function_ref<void(mlir::ImplicitLocOpBuilder &, mlir::ValueRange)>
        after);

/// Whether `memref` lives in workgroup memory (shared memory / LDS).
bool isWorkgroup(mlir::Value memref);

/// Whether `v` is a constant splat of floating-point zeros.
bool isZeroVector(mlir::Value v);

/// The root buffer of a tile view: a memref.alloca at the top of the grid
/// (looking through subviews), or null.
mlir::memref::AllocaOp gridTile(mlir::Value v);

/// The memref.subview ops on `root` (transitively, outermost first) and
/// the other ops that use it or one of them.
void collectViews(mlir::Value root,
                  llvm::SmallVectorImpl<mlir::Operation *> &views,
                  llvm::SmallVectorImpl<mlir::Operation *> &users);

/// The scf.parallel before `loop` in its block that fills `root` with
/// zeros (a fillBuffer), when nothing between it and the loop touches
/// `root`; null otherwise.
mlir::scf::ParallelOp zeroFillBefore(mlir::scf::ForOp loop,
                                     mlir::memref::AllocaOp root);

/// Loads `width` consecutive elements at (row, col) of a 2-D memref, or
/// zeros when `inBounds` is false.
mlir::Value loadPair(mlir::ImplicitLocOpBuilder &b, mlir::Value mem,
                     mlir::Value row, mlir::Value col, mlir::Value inBounds,
                     int64_t width);

/// Runs `body` under `cond`, or unconditionally when `cond` is constant true.
void guarded(mlir::ImplicitLocOpBuilder &b, mlir::Value cond,
             llvm::function_ref<void(mlir::ImplicitLocOpBuilder &)> body);

/// `value()` under `cond`, else `fallback` (no branch when `cond` is
/// constant true).
mlir::Value guardedValue(
    mlir::ImplicitLocOpBuilder &b, mlir::Value cond, mlir::Value fallback,
    llvm::function_ref<mlir::Value(mlir::ImplicitLocOpBuilder &)> value);

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_GPU_GPUCOMMON_H
