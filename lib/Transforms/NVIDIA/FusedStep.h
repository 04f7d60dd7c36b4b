//===- FusedStep.h - mla.attention_step in registers (NVIDIA) --*- C++ -*-===//
//
// Library-private: the emitter of NVIDIA's fused attention step, shared by
// its step in sequence (FusedStep.cpp) and its overlapped step, which lags
// each tile's P·V by one iteration (FusedStepOverlap.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_NVIDIA_FUSEDSTEP_H
#define MLA_LIB_TRANSFORMS_NVIDIA_FUSEDSTEP_H

#include "../GPU/MatrixEmitter.h"
#include "../Utils.h"
#include "NVIDIA.h"
#include "Wgmma.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <memory>

namespace mla::nvidia {
using mlir::ArrayRef;
using mlir::BlockArgument;
using mlir::DenseMap;
using mlir::ImplicitLocOpBuilder;
using mlir::LogicalResult;
using mlir::Operation;
using mlir::SmallVector;
using mlir::SmallVectorImpl;
using mlir::Value;
using mlir::ValueRange;
namespace arith = mlir::arith;
namespace memref = mlir::memref;
namespace scf = mlir::scf;

/// The A registers (i32) of one tile's probabilities under warpgroup MMA:
/// the warpgroup's 64 x tile 16-bit values spread over its lanes, two per
/// register.
inline int64_t probabilityRegCount(const StepPlan &p) {
  const MatrixInstr &wi = p.productInstr();
  return wi.m * p.tile / wi.lanes / 2;
}

/// Named barrier 1 (256 threads) of the lagged lead step (lead_scores =
/// 3 or 4): the second warpgroup arrives once it has read the probability tile
/// and the corrections, the lead waits on it before storing the next
/// tile's. The ping-pong of whole-score steps (FusedStep::pingPong) takes
/// ids 1 .. warpgroups - 1 and never meets a split step's lead.
constexpr int64_t kProbabilitiesReadBarrier = 1;
/// Named barrier 2 (256 threads) of the lagged lead step: the lead arrives
/// once the next tile's page lookup is stored, the second warpgroup waits
/// on it before issuing that tile's copy.
constexpr int64_t kLookupStoredBarrier = 2;

/// bar.sync (`arrive` false) or bar.arrive on named barrier `id` for
/// `threads` threads.
void namedBarrier(ImplicitLocOpBuilder &b, Value id, int64_t threads,
                  bool arrive);

/// The emitter of one fused step: the products through the emitters of
/// the plan's instructions (`mma`: the product's, mma.sync or warpgroup
/// MMA; `frag`: the warp's, whose fragments hold the state), every
/// coordinate from their layouts.
class FusedStep {
public:
  FusedStep(AttentionStepOp op, const ThreadInfo &ti, const StepPlan &plan,
            SmallVectorImpl<scf::ParallelOp> &handed)
      : op(op), ti(ti), p(plan), handed(handed), ci(plan.frag->c),
        fragEm(createMatrixEmitter(*plan.frag, ti)),
        mmaEm(plan.wgmma ? createMatrixEmitter(plan.productInstr(), ti)
                         : nullptr),
        frag(*fragEm), mma(mmaEm ? *mmaEm : *fragEm),
        loop(stepKeyLoop(op, /*tileSkip=*/true)), q(op.getQ()), k(op.getK()),
        v(op.getV()), acc(op.getAcc()), mBuf(op.getM()), lBuf(op.getL()),
        qInfo(analyzeView(q)), kInfo(analyzeView(k)), vInfo(analyzeView(v)) {
    // The rows of a fragment: the distinct row offsets of its elements.
    for (int64_t e = 0; e < ci.elems; ++e) {
      int64_t r = MatrixEmitter::elemCoord(ci.row, e);
      auto *it = llvm::find(rowOffsets, r);
      elemRow.push_back(it - rowOffsets.begin());
      if (it == rowOffsets.end())
        rowOffsets.push_back(r);
    }
  }

  /// Moves the swizzled operands (wgmma) to their buffers' replacements.
  void swizzleOperands(ArrayRef<memref::AllocaOp> roots);
  /// Emits the step (overlapped where the op has `overlap`).
  LogicalResult emit();

private:
  void setUp(ImplicitLocOpBuilder &b);
  SmallVector<Value> initialState(ImplicitLocOpBuilder &b);
  SmallVector<Value> step(ImplicitLocOpBuilder &ib,
                          ArrayRef<BlockArgument> args);
  SmallVector<Value>
  softmax(ImplicitLocOpBuilder &ib, ArrayRef<BlockArgument> args,
          ArrayRef<Value> scores, SmallVectorImpl<Value> &mNew,
          SmallVectorImpl<Value> &corr, SmallVectorImpl<Value> &sum);
  SmallVector<Value> softmaxTile(ImplicitLocOpBuilder &ib,
                                 ArrayRef<BlockArgument> args,
                                 ArrayRef<Value> scores, bool assumeVisible,
                                 SmallVectorImpl<Value> &mNew,
                                 SmallVectorImpl<Value> &corr,
                                 SmallVectorImpl<Value> &sum);
  SmallVector<Value> scoresWgmma(ImplicitLocOpBuilder &ib);
  SmallVector<Value> issueScores(ImplicitLocOpBuilder &ib);
  void pingPong(ImplicitLocOpBuilder &ib, bool arrive);
  SmallVector<Value> scoresMmaSync(ImplicitLocOpBuilder &ib);
  void storeProbabilities(ImplicitLocOpBuilder &ib, ArrayRef<Value> prob);
  SmallVector<Value> probabilityA(ImplicitLocOpBuilder &ib,
                                  ArrayRef<Value> prob, int64_t kk,
                                  bool fromTile);
  void valuesWgmma(ImplicitLocOpBuilder &ib, ArrayRef<Value> aRegs,
                   SmallVectorImpl<Value> &state, Value vRowBytes = Value());
  SmallVector<Value> probabilityRegs(ImplicitLocOpBuilder &ib,
                                     ArrayRef<Value> prob, bool fromTile);
  Value valueRowBytes(ImplicitLocOpBuilder &ib);
  void issueValues(ImplicitLocOpBuilder &ib, ArrayRef<Value> aRegs,
                   Value vRowBytes, SmallVectorImpl<Value> &state);
  /// Whether each warpgroup computes half of the tile's keys (split
  /// scores without lead scores).
  bool halvesScores() const { return p.splitScores && !p.leadScores; }
  // The step with lead scores (FusedStepLead.cpp).
  SmallVector<Value> leadStep(ImplicitLocOpBuilder &ib,
                              ArrayRef<BlockArgument> args);
  /// The copy of the key loop's next tile that the second warpgroup issues
  /// while the lead computes the scores, or null: a pipelined loop's (two
  /// stages: the one copy in flight is the next tile's) phase filling the
  /// step's key tiles (a vector store into them), the step directly in the
  /// loop (no tile skip); only with lead_scores = 2, 3 or 4
  /// (ThreadInfo::handsCopy).
  mlir::scf::ParallelOp handedCopy();
  /// Marks mla.unsynchronized the phases before `copy` that store what it
  /// reads (its page lookup), and returns them: the barrier after the
  /// tile's wait orders them.
  SmallVector<mlir::scf::ParallelOp>
  unsynchronizeLookups(mlir::scf::ParallelOp copy);
  /// Moves `copy` to where `eb` builds (the second warpgroup's branch),
  /// unsynchronized, and hands it to mla-distribute (`handed`).
  void issueHandedCopy(ImplicitLocOpBuilder &eb, mlir::scf::ParallelOp copy);
  /// The handed copy cut by the key tile's columns: `early`, those before
  /// the second warpgroup's value half (the lead's half, which no product
  /// of the last tile reads); `late`, the copy itself narrowed to the rest
  /// (that half and, in decode, the RoPE columns: moving those early too
  /// spilled registers at H=128, ptxas 13.0).
  struct SplitCopy {
    mlir::scf::ParallelOp early, late;
  };
  /// `copy` split (SplitCopy) where its store into the key tile writes the
  /// columns of one constant-bounded dim of its space, the value half
  /// starts at a whole iteration of it and a page holds the whole tile;
  /// failure (the reason under -debug-only=mla-distribute) leaves it whole.
  mlir::FailureOr<SplitCopy> splitHandedCopy(mlir::scf::ParallelOp copy);
  // The lagged lead step (lead_scores = 3 or 4, FusedStepLead.cpp).
  LogicalResult emitLagged(mlir::scf::ParallelOp copy);
  SmallVector<Value> laggedStep(ImplicitLocOpBuilder &ib,
                                ArrayRef<BlockArgument> args,
                                mlir::scf::ParallelOp copy,
                                ArrayRef<mlir::scf::ParallelOp> lookups,
                                const mlir::FailureOr<SplitCopy> &split);
  void laggedLastValues(ImplicitLocOpBuilder &ab, ValueRange fin, Value ran);
  /// The second warpgroup's P and corrections of the last tile the lead
  /// stored (from the probability tile and the correction buffer).
  SmallVector<Value> takeProbabilities(ImplicitLocOpBuilder &ib);
  /// The lead's part of a tile: scores, softmax, then (after waiting on
  /// named barrier `waitId` where given) P and the rows' corrections to the
  /// probability tile and the correction buffer. Returns P's A registers,
  /// the corrections, maxima and sums.
  SmallVector<Value> leadTile(ImplicitLocOpBuilder &tb,
                              ArrayRef<BlockArgument> args, Value waitId);
  // The overlapped step (FusedStepOverlap.cpp).
  LogicalResult emitOverlapped();
  SmallVector<Value> overlappedStep(ImplicitLocOpBuilder &ib,
                                    ArrayRef<BlockArgument> args);
  void lastValues(ImplicitLocOpBuilder &ab, ValueRange fin, Value ran);
  void valuesMmaSync(ImplicitLocOpBuilder &ib, ArrayRef<Value> prob,
                     SmallVectorImpl<Value> &state);
  void writeBack(ImplicitLocOpBuilder &ab, ValueRange fin);

  /// `acc` times each element's row correction (`corr`, one per row).
  SmallVector<Value> rescaled(ImplicitLocOpBuilder &ib, ValueRange acc,
                              ValueRange corr);
  /// Appends each row's new maximum and its sum l·corr + sum to `state`.
  void appendRowStats(ImplicitLocOpBuilder &ib, SmallVectorImpl<Value> &state,
                      ValueRange mNew, ValueRange l, ValueRange corr,
                      ValueRange sum);
  /// After a loop whose last tile's P·V is still owed: waits for every copy
  /// and runs a barrier, then where `cond` (built after the barrier) holds
  /// the accumulators of `fin` become `last`'s, and the state goes back to
  /// shared memory (writeBack).
  void
  finishLastValues(ImplicitLocOpBuilder &ab, ValueRange fin,
                   llvm::function_ref<Value(ImplicitLocOpBuilder &)> cond,
                   llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &,
                                                         ArrayRef<Value>)>
                       last);
  Value rowReduce(ImplicitLocOpBuilder &ib, Value x, bool isMax);
  /// Column `col` of fragment element `e`: base + this lane's column + the
  /// element's.
  Value fragCol(ImplicitLocOpBuilder &ib, Value base, int64_t col, int64_t e) {
    return arith::AddIOp::create(
        ib, arith::AddIOp::create(ib, base, cCol),
        indexConst(ib, col + MatrixEmitter::elemCoord(ci.col, e)));
  }
  Value accCol(ImplicitLocOpBuilder &ib, int64_t blk, int64_t e);
  Value rowBytes(ImplicitLocOpBuilder &ib, Value view, Value extraRows);
  Value operandDesc(ImplicitLocOpBuilder &ib, ViewInfo info, Value rowBytes,
                    int64_t col, int64_t lbo);
  /// This lane's row of fragment element `e`.
  Value rowOf(int64_t e) const { return rows[elemRow[e]]; }
  int64_t nRows() const { return rowOffsets.size(); }

  AttentionStepOp op;
  const ThreadInfo &ti;
  StepPlan p;
  /// The copy phases handed to the second warpgroup (fuseAttentionStep).
  SmallVectorImpl<scf::ParallelOp> &handed;
  const FragLayout &ci; ///< the fragments' C layout
  std::unique_ptr<MatrixEmitter> fragEm, mmaEm;
  MatrixEmitter &frag, &mma;
  scf::ForOp loop;
  Value q, k, v, acc, mBuf, lBuf;
  ViewInfo qInfo, kInfo, vInfo;
  DenseMap<Operation *, Value> swizzled; // operand root -> swizzled buffer
  Value pTile, corrBuf, halfMax;         // split scores only
  /// Row offsets of a fragment's elements, and each element's.
  SmallVector<int64_t> rowOffsets, elemRow;
  // Lanes and rows (setUp): this lane's rows (one per row offset), its
  // column within a fragment, the first lane of each row.
  SmallVector<Value> rows;
  Value rowBase, colPart, colBase, keyBase, cCol, rowLead, owner, negInf;
};

} // namespace mla::nvidia

#endif // MLA_LIB_TRANSFORMS_NVIDIA_FUSEDSTEP_H
