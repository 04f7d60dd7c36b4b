//===- NVIDIA.h - NVIDIA emitters of mla-distribute -------------*- C++ -*-===//
//
// Library-private: what the mla-distribute driver (GPU/Distribute.cpp)
// asks of the NVIDIA lowerings.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_NVIDIA_NVIDIA_H
#define MLA_LIB_TRANSFORMS_NVIDIA_NVIDIA_H

#include "../GPU/GPUCommon.h"
#include "mla/Target/MatrixInstr.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mla::nvidia {

/// A parallel masked copy `tile[...] = cond ? global[...] : 0` of 16-byte
/// multiples, or the next key tile's page numbers (mla.next_tile), becomes
/// cp.async; returns true when `par` was rewritten (the caller then waits
/// for the copies before the barrier, or leaves an unsynchronized phase's
/// to a later wait).
bool asyncCopies(mlir::scf::ParallelOp par);

/// How many cp.async groups each asynchronous prefetch copy in `pars` may
/// leave in flight; `ahead` maps the prefetch copies of pipelined key loops
/// to their steps' `stages - 1`.
llvm::DenseMap<mlir::Operation *, int64_t>
prefetchWaits(llvm::ArrayRef<mlir::scf::ParallelOp> pars,
              const llvm::DenseMap<mlir::Operation *, bool> &async,
              const llvm::DenseMap<mlir::Operation *, int64_t> &ahead);

/// Waits for every cp.async group this thread has in flight (an empty
/// group committed, then waited for with none pending). After a pipelined
/// key loop the copies of the tiles past its end may still be in flight
/// while the accumulator tile, which shares their bytes, is written.
void waitAllAsyncCopies(mlir::ImplicitLocOpBuilder &b);

/// Marks 16-byte aligned vector loads and stores of global memory.
void markGlobalVectorAlignment(GridOp grid);

/// The fused strategy of one step: how warps share rows, value columns and
/// key columns, and which matrix instruction computes the products.
struct StepPlan {
  mlir::Type elem;
  int64_t rows, dim, tile, dv, warps;
  /// The warp's instruction (mma.sync m16n8k16): its fragments are the
  /// step's registers, also under warpgroup MMA, whose C and register-A
  /// layouts are four warps' of it stacked.
  const MatrixInstr *frag = nullptr;
  /// Where the scores' accumulators are the A fragment of P·V
  /// (accumulatorsAsA; score tiles counted within a key step).
  llvm::SmallVector<AccElement> pAsA;
  int64_t rowBlocks, colSplit; ///< m-row blocks; warps per row block
  bool splitScores;            ///< two warps per row block split the keys
  int64_t sBlocks;             ///< a warp's m x n score fragments
  int64_t vBlocks;             ///< a warp's m x n accumulator fragments
  bool wgmma;                  ///< both products by warpgroup MMA
  /// With split scores under warpgroup MMA (the config's lead_scores): the
  /// first warpgroup computes all of the tile's scores, their softmax and
  /// P, and hands P and the rows' corrections to the second through the
  /// probability tile (FusedStepLead.cpp); splitScores stays set, since
  /// the warpgroups still exchange P and split the value columns.
  bool leadScores = false;
  /// Both products transposed (TransposedStep.cpp): the key tile and the
  /// value columns are warpgroup MMA's M, the query rows its N (fewer than
  /// 64 rows: decode's head groups); one or two warpgroups, 64-key tiles.
  bool transposed = false;
  int64_t nAcc() const { return vBlocks * frag->c.elems; }
  /// The instruction of both products (warpgroup MMA or `frag`).
  const MatrixInstr &productInstr() const;
};

/// A plan holding `shape`'s sizes and element type, the rest for a planner
/// to fill.
StepPlan stepPlanOf(const StepShape &shape);

/// The warp's instruction of the fused steps for `elem` (bf16 or f16):
/// mma.sync m16n8k16.
const MatrixInstr &mmaSyncInstr(mlir::Type elem);

/// The register-fused strategy for `shape` (the transposed step where
/// planTransposedStep takes it, else warpgroup MMA where `wgmmaAllowed`
/// and the shape takes it), or failure with the reason under
/// -debug-only=mla-distribute (at `loc`) and in `whyNot`, which also says
/// why an allowed warpgroup MMA was not taken. mla-select-config asks it to
/// pick configs the fused step takes and to refuse infeasible requests; the
/// step's lowering asks it again.
mlir::FailureOr<StepPlan> planFusedStep(const StepShape &shape,
                                        bool wgmmaAllowed, mlir::Location loc,
                                        std::string *whyNot = nullptr);

/// The online softmax's update of rows whose maxima were `mOld`, given
/// this key tile's maxima `mx`, shared by the fused steps: the new maxima,
/// the references the exponentials subtract (0 for a row that has seen no
/// key, whose maximum is still `negInf`) and the corrections of the old
/// state, exp2(mOld - ref).
struct RowUpdate {
  llvm::SmallVector<mlir::Value> mNew, ref, corr;
};
RowUpdate updateRows(mlir::ImplicitLocOpBuilder &b, mlir::ValueRange mOld,
                     llvm::ArrayRef<mlir::Value> mx, mlir::Value negInf);

/// A fused step's row state before its key loop, appended to `init`: m of
/// each of `rows` from `mBuf`, then l from `lBuf` where `owner` (the lane
/// that starts a row's per-lane partial sums) and 0 elsewhere.
void appendRowState(mlir::ImplicitLocOpBuilder &b, mlir::Value mBuf,
                    mlir::Value lBuf, llvm::ArrayRef<mlir::Value> rows,
                    mlir::Value owner,
                    llvm::SmallVectorImpl<mlir::Value> &init);

/// The register-resident lowering of one mla.attention_step (mma.sync or
/// wgmma, whole or split scores; FusedStep.cpp; on a transposed plan
/// fuseTransposedStep). Fails, before changing any IR, when no fused
/// strategy is feasible; -debug-only=mla-distribute says why. A step
/// with lead_scores 2 to 4 in a pipelined loop moves the next key tile's
/// copy phase (4: split in two column ranges) into its second warpgroup's
/// branch and appends it to `handed`: mla-distribute spreads it over that
/// warpgroup's threads, its copies in one cp.async group, without a wait
/// or barrier of its own.
mlir::LogicalResult
fuseAttentionStep(AttentionStepOp op, const ThreadInfo &ti,
                  llvm::SmallVectorImpl<mlir::scf::ParallelOp> &handed);

/// The transposed strategy (StepPlan::transposed) for `shape` where it
/// applies (warpgroup MMA allowed, 16-bit floats, fewer than 64 rows in
/// steps of 8, one warpgroup, 64-key tiles, 64-column head and value
/// blocks); failure with the reason in `whyNot` otherwise.
mlir::FailureOr<StepPlan> planTransposedStep(const StepShape &shape,
                                             bool wgmmaAllowed,
                                             std::string *whyNot = nullptr);

/// The lowering of one mla.attention_step on a transposed plan
/// (TransposedStep.cpp); fails before changing any IR where the step's loop
/// or tiles do not take it.
mlir::LogicalResult fuseTransposedStep(AttentionStepOp op, const ThreadInfo &ti,
                                       const StepPlan &plan);

/// After distribution: copies into the tiles the warpgroup-MMA step moved
/// to the swizzled layout write the swizzled buffers; proxy fences before
/// barriers.
mlir::LogicalResult applySwizzle(GridOp grid);

} // namespace mla::nvidia

#endif // MLA_LIB_TRANSFORMS_NVIDIA_NVIDIA_H
