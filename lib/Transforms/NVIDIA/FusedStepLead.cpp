//===- FusedStepLead.cpp - one warpgroup's scores for two (sm_90a) --------===//
//
// NVIDIA's fused warpgroup-MMA step with lead scores (config lead_scores
// 1 to 4), where two warpgroups share 64 query rows and split the value
// columns (decode's 64-head groups). The step with halved scores (FusedStep.cpp)
// has each warpgroup compute half of the tile's keys (m64n32k16, reading
// the 64 query rows once for each half) and exchange row maxima; here the
// first ("lead") warpgroup computes all of them (m64n64k16: 4 KB of shared
// memory read per 64 x 64 x 16 product instead of 6), their softmax and P,
// and stores P (rounded as P·V takes it) and the rows' corrections to the
// probability tile and the correction buffer. After one barrier the second
// warpgroup reads both; each then rescales its accumulators and multiplies
// P by its half of V, the lead from registers, the other from the tile.
// Only the lead's m and l are the rows' (it owns them when writing back);
// the other's l stays 0.
//
// With lead_scores = 2 (the default of mla-select-config's sm_90a decode
// configs with lead scores), in a pipelined key loop (two stages) the second
// warpgroup, idle until the lead's P is ready, also issues the copy of the
// next key tile: each iteration waits for the tile in flight and runs a
// barrier, then the lead computes the scores while the other's 128 threads
// issue the next tile's cp.async (instead of all 256 threads before the
// wait), so the copy's issue and its page lookup's barrier leave the
// lead's path; the barrier opening each iteration also ends the last one's
// products: two barriers a tile instead of four.
//
// With lead_scores = 3 (the lagged lead step) the second warpgroup's P·V
// runs one key tile behind: in iteration i, after the barrier that opens
// it, the lead computes tile i's scores and softmax, waits on named
// barrier kProbabilitiesReadBarrier, stores tile i's P and corrections and
// multiplies its P by its value half of tile i; meanwhile the second
// warpgroup reads tile i - 1's P and corrections (stored the iteration
// before), arrives on that barrier, multiplies them by its value half of
// tile i - 1 (still in its slot: the loop has two) beside the lead's
// scores, waits for its product and only then issues tile i + 1's copy
// into that slot. No handoff barrier: the barrier opening each iteration
// orders the lead's stores before the second warpgroup's reads. The first
// iteration's second warpgroup multiplies zeros (no tile before it); after
// the loop it takes the last tile's P.
//
// With lead_scores = 4 the lagged step's copy is split (splitHandedCopy):
// tile i + 1's columns before the second warpgroup's value half, which no
// product of iteration i reads in that slot, are issued at the top of the
// iteration (once the lead has stored the page lookup: the second
// warpgroup waits on kLookupStoredBarrier there), the rest after its
// product as with 3. The copy then spends more of the iteration in flight.
//
//===----------------------------------------------------------------------===//
#include "../Utils.h"
#include "../WorkgroupTiles.h"
#include "FusedStep.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/Debug.h"

using namespace mlir;
using namespace mla;
using namespace mla::nvidia;

#define DEBUG_TYPE "mla-distribute"

namespace mla::nvidia {

scf::ParallelOp FusedStep::handedCopy() {
  if (!ti.handsCopy || op.getStages() != 2 ||
      op->getParentOp() != loop.getOperation())
    return {};
  memref::AllocaOp ring = gridTile(k);
  if (!ring)
    return {};
  for (Operation *o = op->getPrevNode(); o; o = o->getPrevNode()) {
    auto par = dyn_cast<scf::ParallelOp>(o);
    if (!par)
      continue;
    bool fills = false;
    par.walk(
        [&](vector::StoreOp st) { fills |= gridTile(st.getBase()) == ring; });
    if (fills)
      return par;
  }
  return {};
}

SmallVector<scf::ParallelOp>
FusedStep::unsynchronizeLookups(scf::ParallelOp copy) {
  SmallVector<scf::ParallelOp> lookups;
  DenseSet<Operation *> read;
  copy.walk([&](memref::LoadOp ld) {
    if (memref::AllocaOp root = gridTile(ld.getMemRef()))
      read.insert(root);
  });
  for (Operation *o = copy->getPrevNode(); o; o = o->getPrevNode())
    if (auto par = dyn_cast<scf::ParallelOp>(o)) {
      bool feeds = false;
      par.walk([&](memref::StoreOp st) {
        memref::AllocaOp root = gridTile(st.getMemRef());
        feeds |= root && read.contains(root);
      });
      if (feeds) {
        par->setAttr(MLADialect::kUnsynchronizedAttrName,
                     UnitAttr::get(par.getContext()));
        lookups.push_back(par);
      }
    }
  return lookups;
}

void FusedStep::issueHandedCopy(ImplicitLocOpBuilder &eb,
                                scf::ParallelOp copy) {
  copy->moveBefore(eb.getInsertionBlock(), eb.getInsertionPoint());
  copy->setAttr(MLADialect::kUnsynchronizedAttrName, eb.getUnitAttr());
  handed.push_back(copy);
}

FailureOr<FusedStep::SplitCopy>
FusedStep::splitHandedCopy(scf::ParallelOp copy) {
  auto fail = [&](const char *why) -> FailureOr<SplitCopy> {
    LLVM_DEBUG(llvm::dbgs()
               << "mla-distribute: the handed copy at " << copy.getLoc()
               << " stays whole: " << why << "\n");
    return failure();
  };
  memref::AllocaOp ring = gridTile(k);
  vector::StoreOp store;
  int64_t stores = 0;
  copy.walk([&](vector::StoreOp st) {
    if (gridTile(st.getBase()) == ring) {
      store = st;
      ++stores;
    }
  });
  if (stores != 1 || store->getParentOp() != copy.getOperation())
    return fail("not one store into the key tile in its body");
  if (p.colSplit != 2 || vInfo.root != ring)
    return fail("the values are not two halves of the key tile");
  // One page a tile: with smaller pages ptxas 13.0 spilled 48-244 bytes
  // at H=128 (pages 1 and 3), 4 at most with 64.
  int64_t pages = 0;
  copy.walk([&](vector::LoadOp ld) {
    if (ld.getMemRefType().getRank() == 3)
      pages = pagesPerKeyTile(ld.getMemRefType(), p.tile);
  });
  if (pages != 1)
    return fail("its pages are smaller than the key tile");
  // The store's column: a dim's induction variable times a constant.
  Value col = store.getIndices().back();
  int64_t scale = 1;
  if (auto mul = col.getDefiningOp<arith::MulIOp>()) {
    std::optional<int64_t> c = getConstantIntValue(mul.getRhs());
    if (!c)
      return fail("its column is not an induction variable times a constant");
    scale = *c;
    col = mul.getLhs();
  }
  auto iv = dyn_cast<BlockArgument>(col);
  if (!iv || iv.getOwner() != copy.getBody())
    return fail("its column is not an induction variable times a constant");
  const unsigned dim = iv.getArgNumber();
  std::optional<int64_t> lb = getConstantIntValue(copy.getLowerBound()[dim]),
                         ub = getConstantIntValue(copy.getUpperBound()[dim]),
                         st = getConstantIntValue(copy.getStep()[dim]);
  if (lb != 0 || st != 1 || !ub || scale < 1)
    return fail("its column's dim is not a constant range from 0 by 1");
  // Each iteration's columns [iv·scale, iv·scale + width) apart from the
  // next's, so that a range of iterations is a range of columns.
  if (store.getVectorType().getRank() != 1 ||
      store.getVectorType().getNumElements() > scale)
    return fail("its iterations' columns overlap");
  // Where the second warpgroup's value half starts in the store's columns,
  // in whole iterations of that dim.
  const int64_t base = analyzeView(store.getBase()).col0;
  const int64_t half = vInfo.col0 + p.dv / 2 - base;
  if (half <= 0 || half % scale || half / scale >= *ub)
    return fail("the value half does not start at a whole piece");
  const int64_t first = half / scale;
  // The early phase, a clone, takes iterations [0, first) of the dim; the
  // copy keeps [first, ub): its upper bound ub - first, its induction
  // variable shifted by first.
  OpBuilder ob(copy);
  Value earlyEnd = arith::ConstantIndexOp::create(ob, copy.getLoc(), first);
  Value lateEnd =
      arith::ConstantIndexOp::create(ob, copy.getLoc(), *ub - first);
  auto early = cast<scf::ParallelOp>(ob.clone(*copy.getOperation()));
  early.getUpperBoundMutable()[dim].assign(earlyEnd);
  copy.getUpperBoundMutable()[dim].assign(lateEnd);
  BlockArgument arg = copy.getBody()->getArgument(dim);
  ob.setInsertionPointToStart(copy.getBody());
  Value shifted = arith::AddIOp::create(
      ob, copy.getLoc(), arg,
      arith::ConstantIndexOp::create(ob, copy.getLoc(), first));
  arg.replaceAllUsesExcept(shifted, shifted.getDefiningOp());
  return SplitCopy{early, copy};
}

/// One iteration: the lead's scores, softmax and P (P and the corrections
/// to shared memory), a barrier, the other warpgroup's P and corrections
/// from shared memory, then both rescale and multiply. The state is the
/// step in sequence's: accumulators, m and l of each row.
SmallVector<Value> FusedStep::leadStep(ImplicitLocOpBuilder &ib,
                                       ArrayRef<BlockArgument> args) {
  const int64_t nAcc = p.nAcc(), nR = nRows();
  const int64_t nP = probabilityRegCount(p);
  Type i32 = ib.getI32Type(), f32 = ib.getF32Type();
  Value lead = arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, colPart,
                                     indexConst(ib, 0));
  // The tile in flight has landed (the thread's only cp.async group); the
  // next one's copy, handed to the other warpgroup, reads the pages its
  // lookup stored before this barrier.
  scf::ParallelOp copy = handedCopy();
  if (copy) {
    unsynchronizeLookups(copy);
    waitAllAsyncCopies(ib);
    gpu::BarrierOp::create(ib);
  }
  // The lead: P's A registers, then each row's correction, maximum and sum.
  SmallVector<Type> leadTypes(nP, i32);
  leadTypes.append(3 * nR, f32);
  auto leadIf = scf::IfOp::create(ib, leadTypes, lead, /*addThenBlock=*/true,
                                  /*addElseBlock=*/true);
  {
    ImplicitLocOpBuilder tb =
        ImplicitLocOpBuilder::atBlockEnd(ib.getLoc(), leadIf.thenBlock());
    scf::YieldOp::create(tb, leadTile(tb, args, Value()));
  }
  {
    // The other warpgroup keeps its (unused) maxima and adds nothing to
    // its sums; its registers and corrections come after the barrier.
    ImplicitLocOpBuilder eb =
        ImplicitLocOpBuilder::atBlockEnd(ib.getLoc(), leadIf.elseBlock());
    if (copy)
      issueHandedCopy(eb, copy);
    SmallVector<Value> out(nP, arith::ConstantIntOp::create(eb, i32, 0));
    out.append(nR, f32Const(eb, 1.0));
    for (int64_t r = 0; r < nR; ++r)
      out.push_back(args[nAcc + r]);
    out.append(nR, f32Const(eb, 0.0));
    scf::YieldOp::create(eb, out);
  }
  ValueRange led = leadIf.getResults();
  gpu::BarrierOp::create(ib);
  // Both warpgroups' P registers and corrections: the lead's own, the
  // other's from the probability tile and the correction buffer.
  SmallVector<Type> takeTypes(nP, i32);
  takeTypes.append(nR, f32);
  auto take = scf::IfOp::create(ib, takeTypes, lead, /*addThenBlock=*/true,
                                /*addElseBlock=*/true);
  {
    ImplicitLocOpBuilder tb =
        ImplicitLocOpBuilder::atBlockEnd(ib.getLoc(), take.thenBlock());
    scf::YieldOp::create(tb, led.take_front(nP + nR));
  }
  {
    ImplicitLocOpBuilder eb =
        ImplicitLocOpBuilder::atBlockEnd(ib.getLoc(), take.elseBlock());
    scf::YieldOp::create(eb, takeProbabilities(eb));
  }
  ValueRange taken = take.getResults();
  ValueRange corr = taken.slice(nP, nR);
  SmallVector<Value> state = rescaled(ib, args.take_front(nAcc), corr);
  valuesWgmma(ib, SmallVector<Value>(taken.take_front(nP)), state);
  appendRowStats(ib, state, led.slice(nP + nR, nR), args.slice(nAcc + nR, nR),
                 corr, led.slice(nP + 2 * nR, nR));
  // The next iteration's copies overwrite the key and value tiles, its
  // lead the probability tile. With the copy handed over, the barrier that
  // opens the next iteration does this: each warpgroup waited for its
  // products above, and the second read its P and corrections before the
  // handoff barrier (after the loop, writeBack waits for every copy and
  // runs one).
  if (!copy)
    gpu::BarrierOp::create(ib);
  return state;
}

/// The second warpgroup's P registers and row corrections, as the lead
/// stored them to the probability tile and the correction buffer.
SmallVector<Value> FusedStep::takeProbabilities(ImplicitLocOpBuilder &ib) {
  SmallVector<Value> out = probabilityRegs(ib, {}, /*fromTile=*/true);
  for (int64_t r = 0; r < nRows(); ++r)
    out.push_back(
        memref::LoadOp::create(ib, corrBuf, ValueRange{rows[r]}).getResult());
  return out;
}

SmallVector<Value> FusedStep::leadTile(ImplicitLocOpBuilder &tb,
                                       ArrayRef<BlockArgument> args,
                                       Value waitId) {
  SmallVector<Value> scores = scoresWgmma(tb);
  SmallVector<Value> mNew, corr, sum;
  SmallVector<Value> prob = softmax(tb, args, scores, mNew, corr, sum);
  if (waitId)
    namedBarrier(tb, waitId, 2 * p.productInstr().lanes, /*arrive=*/false);
  storeProbabilities(tb, prob);
  guarded(tb, rowLead, [&](ImplicitLocOpBuilder &gb) {
    for (int64_t r = 0; r < nRows(); ++r)
      memref::StoreOp::create(gb, corr[r], corrBuf, ValueRange{rows[r]});
  });
  SmallVector<Value> out = probabilityRegs(tb, prob, /*fromTile=*/false);
  llvm::append_range(out, corr);
  llvm::append_range(out, mNew);
  llvm::append_range(out, sum);
  return out;
}

/// The lagged lead step: the state of the step in sequence (accumulators,
/// m, l of each row) and the byte offset (i64) of the value tile of the
/// last iteration (valueRowBytes), which the second warpgroup multiplies
/// one iteration later.
LogicalResult FusedStep::emitLagged(scf::ParallelOp copy) {
  ImplicitLocOpBuilder b(loop.getLoc(), loop);
  setUp(b);
  SmallVector<Value> init = initialState(b);
  init.push_back(arith::ConstantIntOp::create(b, b.getI64Type(), 0));
  Value ran = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                    loop.getLowerBound(), loop.getUpperBound());
  // The lookups first: they are the phases before the copy that store
  // what it reads, and the split puts the early pieces before it.
  SmallVector<scf::ParallelOp> lookups = unsynchronizeLookups(copy);
  FailureOr<SplitCopy> split = failure();
  if (ti.splitsHandedCopy)
    split = splitHandedCopy(copy);
  return carryStepState(
      op, init,
      [&](ImplicitLocOpBuilder &ib, ArrayRef<BlockArgument> args) {
        return laggedStep(ib, args, copy, lookups, split);
      },
      [&](ImplicitLocOpBuilder &ab, ValueRange fin) {
        laggedLastValues(ab, fin, ran);
      });
}

SmallVector<Value> FusedStep::laggedStep(ImplicitLocOpBuilder &ib,
                                         ArrayRef<BlockArgument> args,
                                         scf::ParallelOp copy,
                                         ArrayRef<scf::ParallelOp> lookups,
                                         const FailureOr<SplitCopy> &split) {
  const int64_t nAcc = p.nAcc(), nR = nRows();
  const int64_t nP = probabilityRegCount(p);
  Type i32 = ib.getI32Type(), f32 = ib.getF32Type(), i64 = ib.getI64Type();
  Value lead = arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, colPart,
                                     indexConst(ib, 0));
  auto forOp = cast<scf::ForOp>(op->getParentOp());
  Value have =
      arith::CmpIOp::create(ib, arith::CmpIPredicate::ne,
                            forOp.getInductionVar(), forOp.getLowerBound());
  // The tile in flight (issued by the second warpgroup the iteration
  // before) has landed, and the lead's P of the last tile is stored.
  waitAllAsyncCopies(ib);
  gpu::BarrierOp::create(ib);
  // The next tile's page lookup, after the barrier: the second warpgroup
  // read the last one when it issued its copy, before that barrier (no
  // handoff barrier orders them here). The lead then arrives on
  // kLookupStoredBarrier, on which the copy's issue waits.
  for (scf::ParallelOp lookup : lookups)
    lookup->moveBefore(ib.getInsertionBlock(), ib.getInsertionPoint());
  Value barrierId =
      arith::ConstantIntOp::create(ib, i32, kProbabilitiesReadBarrier);
  Value lookupId = arith::ConstantIntOp::create(ib, i32, kLookupStoredBarrier);
  const int64_t threads = 2 * p.productInstr().lanes;
  Value here = valueRowBytes(ib);
  // Each warpgroup's P registers, corrections, maxima, sums and the value
  // tile its product reads.
  SmallVector<Type> types(nP, i32);
  types.append(3 * nR, f32);
  types.push_back(i64);
  auto parts = scf::IfOp::create(ib, types, lead, /*addThenBlock=*/true,
                                 /*addElseBlock=*/true);
  {
    ImplicitLocOpBuilder tb =
        ImplicitLocOpBuilder::atBlockEnd(ib.getLoc(), parts.thenBlock());
    namedBarrier(tb, lookupId, threads, /*arrive=*/true);
    // P is stored once the second warpgroup has read the last tile's.
    SmallVector<Value> out = leadTile(tb, args, barrierId);
    out.push_back(here);
    scf::YieldOp::create(tb, out);
  }
  {
    // The second warpgroup: the last tile's P (zeros, corrections 1, and
    // this tile's values in the first iteration), its maxima unused, its
    // sums 0.
    ImplicitLocOpBuilder eb =
        ImplicitLocOpBuilder::atBlockEnd(ib.getLoc(), parts.elseBlock());
    // The next tile's pieces that no product of the last tile reads, as
    // soon as its page lookup is stored.
    if (succeeded(split)) {
      namedBarrier(eb, lookupId, threads, /*arrive=*/false);
      issueHandedCopy(eb, split->early);
    }
    SmallVector<Type> takeTypes(nP, i32);
    takeTypes.append(nR, f32);
    auto take = scf::IfOp::create(eb, takeTypes, have, /*addThenBlock=*/true,
                                  /*addElseBlock=*/true);
    {
      ImplicitLocOpBuilder tb =
          ImplicitLocOpBuilder::atBlockEnd(eb.getLoc(), take.thenBlock());
      scf::YieldOp::create(tb, takeProbabilities(tb));
      ImplicitLocOpBuilder fb =
          ImplicitLocOpBuilder::atBlockEnd(eb.getLoc(), take.elseBlock());
      SmallVector<Value> none(nP, arith::ConstantIntOp::create(fb, i32, 0));
      none.append(nR, f32Const(fb, 1.0));
      scf::YieldOp::create(fb, none);
    }
    namedBarrier(eb, barrierId, threads, /*arrive=*/true);
    SmallVector<Value> out(take.getResults().begin(), take.getResults().end());
    for (int64_t r = 0; r < nR; ++r)
      out.push_back(args[nAcc + r]);
    out.append(nR, f32Const(eb, 0.0));
    out.push_back(arith::SelectOp::create(eb, have, args.back(), here));
    scf::YieldOp::create(eb, out);
  }
  ValueRange got = parts.getResults();
  ValueRange corr = got.slice(nP, nR);
  SmallVector<Value> state = rescaled(ib, args.take_front(nAcc), corr);
  valuesWgmma(ib, SmallVector<Value>(got.take_front(nP)), state, got.back());
  // The second warpgroup's product has read the slot the next tile goes
  // to (the lead's reads of it ended before this iteration's barrier):
  // the rest of the next tile's copy (all of it where it was not split).
  guarded(ib,
          arith::CmpIOp::create(ib, arith::CmpIPredicate::ne, colPart,
                                indexConst(ib, 0)),
          [&](ImplicitLocOpBuilder &gb) {
            if (failed(split))
              namedBarrier(gb, lookupId, threads, /*arrive=*/false);
            issueHandedCopy(gb, copy);
          });
  appendRowStats(ib, state, got.slice(nP + nR, nR), args.slice(nAcc + nR, nR),
                 corr, got.slice(nP + 2 * nR, nR));
  state.push_back(here);
  return state;
}

/// After the loop: the second warpgroup's product of the last tile (P
/// stored by the lead in the last iteration), then the state back to
/// shared memory (writeBack).
void FusedStep::laggedLastValues(ImplicitLocOpBuilder &ab, ValueRange fin,
                                 Value ran) {
  const int64_t nP = probabilityRegCount(p);
  finishLastValues(
      ab, fin,
      [&](ImplicitLocOpBuilder &cb) {
        return arith::AndIOp::create(
            cb, ran,
            arith::CmpIOp::create(cb, arith::CmpIPredicate::ne, colPart,
                                  indexConst(cb, 0)));
      },
      [&](ImplicitLocOpBuilder &tb, ArrayRef<Value> acc) {
        SmallVector<Value> taken = takeProbabilities(tb);
        SmallVector<Value> st =
            rescaled(tb, acc, ArrayRef<Value>(taken).slice(nP));
        valuesWgmma(tb, ArrayRef<Value>(taken).take_front(nP), st, fin.back());
        return st;
      });
}

} // namespace mla::nvidia
