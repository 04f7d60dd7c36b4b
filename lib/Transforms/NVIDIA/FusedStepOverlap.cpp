//===- FusedStepOverlap.cpp - the fused step with P·V lagged (sm_90a) ----===//
//
// NVIDIA's fused warpgroup-MMA step for an mla.attention_step marked
// `overlap`, whose key loop copies the values one tile behind the keys
// (TileCore.cpp): each iteration issues tile i's scores, then tile i - 1's
// P·V (its probabilities carried in registers as the A operand, its values
// still in their slot), waits for the scores only and computes tile i's
// softmax while P·V runs on the tensor cores (FlashAttention-3's
// intra-warpgroup overlap); then it waits for P·V, applies tile i's
// correction to the accumulators and packs tile i's probabilities for the
// next iteration. After the loop the last tile's P·V runs before the state
// goes back to shared memory.
//
// The loop carries, beside the accumulators, m and l of the step in
// sequence (FusedStep.cpp), the previous tile's A registers and the byte
// offset of its value tile. The first iteration has none (its induction
// variable is the loop's lower bound) and waits for its scores alone.
//
//===----------------------------------------------------------------------===//
#include "../Utils.h"
#include "FusedStep.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace mla;
using namespace mla::nvidia;

namespace mla::nvidia {

LogicalResult FusedStep::emitOverlapped() {
  ImplicitLocOpBuilder b(loop.getLoc(), loop);
  setUp(b);
  SmallVector<Value> init = initialState(b);
  init.append(probabilityRegCount(p),
              arith::ConstantIntOp::create(b, b.getI32Type(), 0));
  init.push_back(arith::ConstantIntOp::create(b, b.getI64Type(), 0));
  // Whether the loop runs at all, so that a last P·V follows it.
  Value ran = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                    loop.getLowerBound(), loop.getUpperBound());
  return carryStepState(
      op, init,
      [&](ImplicitLocOpBuilder &ib, ArrayRef<BlockArgument> args) {
        return overlappedStep(ib, args);
      },
      [&](ImplicitLocOpBuilder &ab, ValueRange fin) {
        lastValues(ab, fin, ran);
      });
}

/// One iteration: tile i's scores, tile i - 1's P·V beside its softmax,
/// then the correction of the accumulators. The state: accumulators, m, l
/// (as the step in sequence), tile i's A registers and value offset.
SmallVector<Value> FusedStep::overlappedStep(ImplicitLocOpBuilder &ib,
                                             ArrayRef<BlockArgument> args) {
  const int64_t nAcc = p.nAcc(), nR = nRows();
  const int64_t nP = probabilityRegCount(p);
  auto forOp = cast<scf::ForOp>(op->getParentOp());
  Value have =
      arith::CmpIOp::create(ib, arith::CmpIPredicate::ne,
                            forOp.getInductionVar(), forOp.getLowerBound());
  SmallVector<Value> acc(args.begin(), args.begin() + nAcc);
  SmallVector<Value> prevA(args.begin() + nAcc + 2 * nR,
                           args.begin() + nAcc + 2 * nR + nP);
  Value prevRows = args.back();
  SmallVector<Value> s = issueScores(ib);
  // Tile i - 1's P·V as a second group behind the scores; then wait for
  // the scores only (one group may stay pending).
  SmallVector<Type> accTypes(nAcc, ib.getF32Type());
  auto lagged = scf::IfOp::create(ib, accTypes, have, /*addThenBlock=*/true,
                                  /*addElseBlock=*/true);
  {
    ImplicitLocOpBuilder tb =
        ImplicitLocOpBuilder::atBlockEnd(ib.getLoc(), lagged.thenBlock());
    SmallVector<Value> st(acc);
    mma.fence(tb);
    issueValues(tb, prevA, prevRows, st);
    mma.wait(tb, 1);
    scf::YieldOp::create(tb, st);
    ImplicitLocOpBuilder eb =
        ImplicitLocOpBuilder::atBlockEnd(ib.getLoc(), lagged.elseBlock());
    mma.wait(eb, 0);
    scf::YieldOp::create(eb, acc);
  }
  pingPong(ib, /*arrive=*/true);
  s = mma.fenceRegisters(ib, s);
  SmallVector<Value> mNew, corr, sum;
  SmallVector<Value> prob = softmax(ib, args, s, mNew, corr, sum);
  // P·V (i - 1) done: the accumulators take tile i's correction.
  mma.wait(ib, 0);
  SmallVector<Value> state =
      mma.fenceRegisters(ib, SmallVector<Value>(lagged.getResults().begin(),
                                                lagged.getResults().end()));
  state = rescaled(ib, state, corr);
  appendRowStats(ib, state, mNew, args.slice(nAcc + nR, nR), corr, sum);
  llvm::append_range(state, probabilityRegs(ib, prob, /*fromTile=*/false));
  state.push_back(valueRowBytes(ib));
  // The next iteration's copies overwrite the key tile this one read and
  // the value tile whose product the last iteration waited for.
  gpu::BarrierOp::create(ib);
  return state;
}

/// After the loop: the last tile's P·V (once its values have landed), then
/// the state back to shared memory (writeBack).
void FusedStep::lastValues(ImplicitLocOpBuilder &ab, ValueRange fin,
                           Value ran) {
  const int64_t nAcc = p.nAcc(), nR = nRows();
  const int64_t nP = probabilityRegCount(p);
  finishLastValues(
      ab, fin, [&](ImplicitLocOpBuilder &) { return ran; },
      [&](ImplicitLocOpBuilder &tb, ArrayRef<Value> acc) {
        SmallVector<Value> st(acc);
        SmallVector<Value> aRegs(fin.begin() + nAcc + 2 * nR,
                                 fin.begin() + nAcc + 2 * nR + nP);
        mma.fence(tb);
        issueValues(tb, aRegs, fin.back(), st);
        mma.wait(tb, 0);
        return mma.fenceRegisters(tb, st);
      });
}

} // namespace mla::nvidia
