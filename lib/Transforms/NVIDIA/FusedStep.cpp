//===- FusedStep.cpp - mla.attention_step in registers (NVIDIA) -----------===//
//
// One key tile of flash attention in registers. Each warp owns 16 query
// rows (row block `warp % RB`) and a slice of the value columns (`warp /
// RB` of `warps / RB`, at most 2): it computes its rows' scores with
// mma.sync (or wgmma) into registers, evaluates the step's element function
// on the accumulator fragments, takes row maxima and sums with quad
// shuffles and keeps its accumulators, maxima and (per-lane partial) sums
// in registers across the key loop. With one warp per row block, or when
// the key tile does not split into 16-key halves ("whole scores"), the
// warp computes all of the tile's scores and converts the probabilities in
// registers into the A operand of the P·V product (the m16n8 accumulator
// layout is the m16n8k16 A layout): nothing of S, P or the accumulators
// goes through shared memory inside the loop. With two warps per row block
// ("split scores") each computes half of the key columns; their row maxima
// meet in a small shared buffer and each half of P is stored to a
// probability tile, from which both read the A operand. After the loop,
// acc, m and l are written back once for the epilogue.
//
// Warpgroup MMA (sm_90a, config `wgmma`): both products by wgmma from
// swizzled Q, K and V tiles. Warpgroups (4 warps) own 64 rows each: with
// one warp per row block, different rows; with split scores (the absorbed
// decode), warpgroup g computes the scores of key half g and value columns
// half g of all 64 rows; with lead scores (config lead_scores 1-4, 2 the
// default there) warpgroup 0 computes all of them and hands P to warpgroup
// 1 (FusedStepLead.cpp).
//
// Written against the MatrixEmitter fragment interface: the warp's
// instruction (mma.sync m16n8k16; the plan's `frag`) gives every row,
// column and row-leader lane from its C layout, loads the Q, K, V and P
// fragments and multiplies; warpgroup MMA's emitter issues the
// asynchronous products. The plan hands P to P·V in registers where
// accumulatorsAsA says the layouts allow it. NVIDIA-specific here: the
// 128-byte swizzle and its descriptors, the warpgroups' named barriers.
//
// Fewer than 64 rows on one warpgroup with 64-key tiles take the
// transposed step instead (TransposedStep.cpp: keys as wgmma's M). A step
// marked `overlap` (config `overlap = 1`) issues each tile's P·V in the
// next iteration, beside that tile's softmax (FusedStepOverlap.cpp, on the
// issue and wait halves of the products here).
//
// Strategy: planFusedStep (FusedStepPlan.cpp) decides from the shapes, the
// warps and the target (every refusal says why under
// -debug-only=mla-distribute); checkStepLoop that the step can keep its
// state in registers across its loop.
//
//===----------------------------------------------------------------------===//
#include "FusedStep.h"
#include "../AttentionLayout.h"
#include "../Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

#include "llvm/Support/Debug.h"

#include <limits>

#define DEBUG_TYPE "mla-distribute"

using namespace mlir;
using namespace mla;
using namespace mla::nvidia;

namespace {

/// Refuses the fused step with a reason (-debug-only=mla-distribute).
LogicalResult refuse(Location loc, const Twine &why) {
  LLVM_DEBUG(llvm::dbgs() << "mla-distribute: no fused attention step at "
                          << loc << ": " << why << "\n");
  return failure();
}
LogicalResult refuse(AttentionStepOp op, const Twine &why) {
  return refuse(op.getLoc(), why);
}
} // namespace

namespace mla::nvidia {

void FusedStep::swizzleOperands(ArrayRef<memref::AllocaOp> roots) {
  swizzled = nvidia::swizzleOperands(loop, roots);
}

/// Lanes, this warp's rows and value columns, and (split scores) the
/// shared buffers: per (half, row) maxima, the probability tile (P of both
/// halves, read as the A operand of P·V) and, after the loop, the second
/// half's row sums.
void FusedStep::setUp(ImplicitLocOpBuilder &b) {
  frag.beginFragments(b);
  const int64_t m = p.frag->m;
  rowBase = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, frag.group, indexConst(b, p.rowBlocks)),
      indexConst(b, m));
  colPart = arith::DivUIOp::create(b, frag.group, indexConst(b, p.rowBlocks));
  colBase = arith::MulIOp::create(b, colPart, indexConst(b, p.dv / p.colSplit));
  keyBase = halvesScores()
                ? arith::MulIOp::create(b, colPart, indexConst(b, p.tile / 2))
                      .getResult()
                : indexConst(b, 0);
  if (p.splitScores) {
    if (halvesScores()) {
      ImplicitLocOpBuilder top =
          builderAtGridTop(loop.getLoc(), loop->getBlock());
      halfMax = memref::AllocaOp::create(
          top, MemRefType::get({2, p.rows}, Float32Type::get(b.getContext())));
    }
    StepScratch scratch = allocateStepScratch(op, /*scores=*/false,
                                              /*probs=*/true, /*corr=*/true);
    pTile = scratch.probs;
    corrBuf = scratch.corr;
  }
  cCol = frag.cColLane;
  Value row = arith::AddIOp::create(b, rowBase, frag.cRowLane);
  for (int64_t off : rowOffsets)
    rows.push_back(
        off == 0
            ? row
            : arith::AddIOp::create(b, row, indexConst(b, off)).getResult());
  // The lanes that own m and l of their rows when writing back.
  rowLead = frag.rowLeader(b);
  owner =
      arith::AndIOp::create(b, rowLead,
                            arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                                  colPart, indexConst(b, 0)));
}

/// vBlocks fragments of accumulators, m of each row, l of each row (l is a
/// per-lane partial sum; only the owner lane starts from l[row]). When the
/// accumulator tile was just zero-filled, the registers start at 0 and the
/// fill goes: the tile is then only written after the loop (and may share
/// memory with the tiles the loop reads).
SmallVector<Value> FusedStep::initialState(ImplicitLocOpBuilder &b) {
  SmallVector<Value> init;
  Value zeroF = f32Const(b, 0.0);
  if (scf::ParallelOp fill = zeroFillBefore(loop, gridTile(acc))) {
    fill.erase();
    init.assign(p.nAcc(), zeroF);
  } else {
    for (int64_t blk = 0; blk < p.vBlocks; ++blk)
      for (int64_t i = 0; i < ci.elems; ++i)
        init.push_back(memref::LoadOp::create(
            b, acc, ValueRange{rowOf(i), accCol(b, blk, i)}));
  }
  negInf = f32Const(b, -std::numeric_limits<double>::infinity());
  appendRowState(b, mBuf, lBuf, rows, owner, init);
  return init;
}

LogicalResult FusedStep::emit() {
  if (op.getOverlap())
    return emitOverlapped();
  if (p.leadScores && ti.lagsValues) {
    if (scf::ParallelOp copy = handedCopy())
      return emitLagged(copy);
    LLVM_DEBUG(llvm::dbgs()
               << "mla-distribute: lead scores at " << op.getLoc()
               << " not lagged: no copy of the next key tile to hand over\n");
  }
  ImplicitLocOpBuilder b(loop.getLoc(), loop);
  setUp(b);
  // After the loop: the state back to shared memory for the epilogue.
  return carryStepState(
      op, initialState(b),
      [&](ImplicitLocOpBuilder &ib, ArrayRef<BlockArgument> args) {
        return p.leadScores ? leadStep(ib, args) : step(ib, args);
      },
      [&](ImplicitLocOpBuilder &ab, ValueRange fin) { writeBack(ab, fin); });
}

/// One iteration: scores, the softmax on their fragments, then acc =
/// corr·acc + P·V. The state is the accumulators, m and l of each row.
SmallVector<Value> FusedStep::step(ImplicitLocOpBuilder &ib,
                                   ArrayRef<BlockArgument> args) {
  const int64_t nAcc = p.nAcc();
  SmallVector<Value> scores = p.wgmma ? scoresWgmma(ib) : scoresMmaSync(ib);
  SmallVector<Value> mNew, corr, sum;
  SmallVector<Value> prob = softmax(ib, args, scores, mNew, corr, sum);
  SmallVector<Value> state = rescaled(ib, args.take_front(nAcc), corr);
  if (p.splitScores) {
    storeProbabilities(ib, prob);
    gpu::BarrierOp::create(ib);
  }
  if (p.wgmma)
    valuesWgmma(ib, probabilityRegs(ib, prob, p.splitScores), state);
  else
    valuesMmaSync(ib, prob, state);
  appendRowStats(ib, state, mNew, args.slice(nAcc + nRows(), nRows()), corr,
                 sum);
  // The next iteration's copies overwrite the key and value tiles.
  gpu::BarrierOp::create(ib);
  return state;
}

/// The softmax of one tile (softmaxTile), on a step with `all_visible`
/// twice: where every element is visible (the tiles off the diagonal) a
/// version without the per-element visibility (its index arithmetic,
/// compares and selects), else the general one.
SmallVector<Value>
FusedStep::softmax(ImplicitLocOpBuilder &ib, ArrayRef<BlockArgument> args,
                   ArrayRef<Value> scores, SmallVectorImpl<Value> &mNew,
                   SmallVectorImpl<Value> &corr, SmallVectorImpl<Value> &sum) {
  Value all = op.getAllVisible();
  if (!all)
    return softmaxTile(ib, args, scores, /*assumeVisible=*/false, mNew, corr,
                       sum);
  const int64_t nS = p.sBlocks * ci.elems, nR = nRows();
  SmallVector<Type> types(nS + 3 * nR, ib.getF32Type());
  auto ifOp = scf::IfOp::create(ib, types, all, /*addThenBlock=*/true,
                                /*addElseBlock=*/true);
  for (bool visible : {true, false}) {
    ImplicitLocOpBuilder bb = ImplicitLocOpBuilder::atBlockEnd(
        ib.getLoc(), visible ? ifOp.thenBlock() : ifOp.elseBlock());
    SmallVector<Value> m, c, l;
    SmallVector<Value> out = softmaxTile(bb, args, scores, visible, m, c, l);
    llvm::append_range(out, m);
    llvm::append_range(out, c);
    llvm::append_range(out, l);
    scf::YieldOp::create(bb, out);
  }
  ValueRange res = ifOp.getResults();
  mNew.assign(res.begin() + nS, res.begin() + nS + nR);
  corr.assign(res.begin() + nS + nR, res.begin() + nS + 2 * nR);
  sum.assign(res.begin() + nS + 2 * nR, res.end());
  return SmallVector<Value>(res.begin(), res.begin() + nS);
}

/// The element function on the score fragments (element e of block j at
/// rowOf(e), column keyBase + j·n + the layout's; with `assumeVisible`
/// every element visible), the row maxima (across the lanes of a row, and
/// with split scores across the halves), the correction of the old state
/// and the probabilities with their row sums.
SmallVector<Value> FusedStep::softmaxTile(
    ImplicitLocOpBuilder &ib, ArrayRef<BlockArgument> args,
    ArrayRef<Value> scores, bool assumeVisible, SmallVectorImpl<Value> &mNew,
    SmallVectorImpl<Value> &corr, SmallVectorImpl<Value> &sum) {
  const int64_t nAcc = p.nAcc(), ce = ci.elems, nS = p.sBlocks * ce;
  SmallVector<Value> x(nS), vis(nS);
  SmallVector<Value> mx(nRows(), negInf);
  for (int64_t j = 0; j < p.sBlocks; ++j)
    for (int64_t i = 0; i < ce; ++i) {
      int64_t e = j * ce + i;
      Value col = fragCol(ib, keyBase, j * p.frag->n, i);
      SmallVector<Value> r =
          inlineStepElement(ib, op, {rowOf(i), col, scores[e]}, assumeVisible);
      x[e] = r[0];
      vis[e] = r[1];
      Value &m = mx[elemRow[i]];
      m = arith::MaximumFOp::create(
          ib, m,
          assumeVisible
              ? x[e]
              : arith::SelectOp::create(ib, vis[e], x[e], negInf).getResult());
    }
  for (Value &m : mx)
    m = rowReduce(ib, m, true);
  if (halvesScores()) {
    // Each half's row maxima to shared memory; the row maximum is the
    // larger of the two halves'.
    Value other = arith::SubIOp::create(ib, indexConst(ib, 1), colPart);
    guarded(ib, rowLead, [&](ImplicitLocOpBuilder &gb) {
      for (int64_t r = 0; r < nRows(); ++r)
        memref::StoreOp::create(gb, mx[r], halfMax,
                                ValueRange{colPart, rows[r]});
    });
    gpu::BarrierOp::create(ib);
    for (int64_t r = 0; r < nRows(); ++r)
      mx[r] = arith::MaximumFOp::create(
          ib, mx[r],
          memref::LoadOp::create(ib, halfMax, ValueRange{other, rows[r]}));
  }
  RowUpdate u = updateRows(
      ib, ValueRange(ArrayRef<BlockArgument>(args).slice(nAcc, nRows())), mx,
      negInf);
  mNew.assign(u.mNew.begin(), u.mNew.end());
  corr.assign(u.corr.begin(), u.corr.end());
  const SmallVector<Value> &ref = u.ref;
  SmallVector<Value> prob(nS);
  sum.assign(nRows(), f32Const(ib, 0.0));
  for (int64_t e = 0; e < nS; ++e) {
    int64_t r = elemRow[e % ce];
    Value ex = stepExp2(ib, x[e], ref[r]);
    prob[e] = assumeVisible
                  ? ex
                  : arith::SelectOp::create(ib, vis[e], ex, f32Const(ib, 0.0))
                        .getResult();
    sum[r] = arith::AddFOp::create(ib, sum[r], prob[e]);
  }
  return prob;
}

/// The warpgroup's 64 rows times its key columns, dim / 16 wgmma in one
/// group, waited for before the softmax. With several warpgroups,
/// warpgroup g issues its scores only after g - 1 has issued its own (named
/// barrier g, 256 threads: g - 1 arrives, g waits): the tensor cores then
/// finish them one warpgroup after the other, and each warpgroup's softmax
/// runs while the next one's product is computed (FlashAttention-3's
/// ping-pong).
SmallVector<Value> FusedStep::scoresWgmma(ImplicitLocOpBuilder &ib) {
  SmallVector<Value> s = issueScores(ib);
  pingPong(ib, /*arrive=*/true);
  mma.wait(ib, 0);
  return mma.fenceRegisters(ib, s);
}

/// The scores' products issued and committed as one group (after the
/// ping-pong wait of warpgroups after the first), not waited for.
SmallVector<Value> FusedStep::issueScores(ImplicitLocOpBuilder &ib) {
  const MatrixInstr &wi = p.productInstr();
  const int64_t warpsPerGroup = wi.lanes / ti.warpSize;
  Value wgIdx =
      arith::DivUIOp::create(ib, frag.group, indexConst(ib, warpsPerGroup));
  // The warpgroup's first row: warp w owns rows m·(w % RB).
  Value wgRows = arith::MulIOp::create(
      ib,
      arith::RemUIOp::create(ib, wgIdx,
                             indexConst(ib, p.rowBlocks / warpsPerGroup)),
      indexConst(ib, wi.m));
  Value qRows = rowBytes(ib, q, wgRows);
  Value kRows = rowBytes(ib, k, keyBase);
  pingPong(ib, /*arrive=*/false);
  SmallVector<Value> s;
  mma.fence(ib);
  for (int64_t k0 = 0; k0 < p.dim; k0 += wi.k)
    s = mma.multiplyAsync(ib, p.sBlocks * wi.n, s,
                          operandDesc(ib, qInfo, qRows, k0, 16), {},
                          operandDesc(ib, kInfo, kRows, k0, 16),
                          /*bMNMajor=*/false);
  mma.commit(ib);
  return s;
}

/// The ping-pong of the warpgroups' score products (scoresWgmma): with
/// several warpgroups of whole scores, warpgroup g > 0 waits on named
/// barrier g before issuing (`arrive` false), and g < last arrives on
/// barrier g + 1 once it has issued (`arrive` true).
void FusedStep::pingPong(ImplicitLocOpBuilder &ib, bool arrive) {
  const MatrixInstr &wi = p.productInstr();
  const int64_t warpsPerGroup = wi.lanes / ti.warpSize;
  const int64_t groups = p.splitScores ? 1 : p.warps / warpsPerGroup;
  if (groups <= 1)
    return;
  Value wgIdx =
      arith::DivUIOp::create(ib, frag.group, indexConst(ib, warpsPerGroup));
  Value cond = arrive ? arith::CmpIOp::create(ib, arith::CmpIPredicate::ult,
                                              wgIdx, indexConst(ib, groups - 1))
                      : arith::CmpIOp::create(ib, arith::CmpIPredicate::ugt,
                                              wgIdx, indexConst(ib, 0));
  Value id =
      arrive ? arith::AddIOp::create(ib, wgIdx, indexConst(ib, 1)).getResult()
             : wgIdx;
  guarded(ib, cond, [&](ImplicitLocOpBuilder &gb) {
    namedBarrier(gb, id, 2 * wi.lanes, arrive);
  });
}

void namedBarrier(ImplicitLocOpBuilder &b, Value id, int64_t threads,
                  bool arrive) {
  Value i32Id = id.getType().isIndex()
                    ? arith::IndexCastUIOp::create(b, b.getI32Type(), id)
                    : id;
  Value count = arith::ConstantIntOp::create(b, b.getI32Type(), threads);
  if (arrive)
    NVVM::BarrierArriveOp::create(b, i32Id, count);
  else
    NVVM::BarrierOp::create(b, Type(), i32Id, count,
                            NVVM::BarrierReductionAttr(), Value());
}

/// This warp's m rows times its key columns (all, or its half from
/// keyBase with split scores). With few score fragments (a narrow key
/// tile), consecutive k-steps go to `kSplit` separate accumulator sets,
/// summed at the end, so that enough independent mma.sync chains are in
/// flight.
SmallVector<Value> FusedStep::scoresMmaSync(ImplicitLocOpBuilder &ib) {
  const MatrixInstr &mi = *p.frag;
  const int64_t ce = ci.elems, nS = p.sBlocks * ce;
  const int64_t perLoad = frag.bTilesPerLoad();
  const int64_t kSplit = p.sBlocks < 8 && p.dim % (2 * mi.k) == 0 ? 2 : 1;
  SmallVector<Value> sInit(nS * kSplit, f32Const(ib, 0.0));
  auto kLoop = scf::ForOp::create(
      ib, indexConst(ib, 0), indexConst(ib, p.dim),
      indexConst(ib, mi.k * kSplit), sInit,
      [&](OpBuilder &nb, Location l, Value kBase, ValueRange sAcc) {
        ImplicitLocOpBuilder kb(l, nb);
        SmallVector<Value> next(sAcc.begin(), sAcc.end());
        for (int64_t part = 0; part < kSplit; ++part) {
          Value k0 =
              arith::AddIOp::create(kb, kBase, indexConst(kb, mi.k * part));
          SmallVector<Value> aRegs = frag.loadA(kb, q, rowBase, k0);
          for (int64_t jp = 0; jp < p.sBlocks / perLoad; ++jp) {
            SmallVector<SmallVector<Value>> bRegs =
                frag.loadB(kb, k, k0, keyBase, jp * perLoad * mi.n,
                           /*nMajor=*/true);
            for (int64_t h = 0; h < perLoad; ++h) {
              int64_t at = (part * p.sBlocks + perLoad * jp + h) * ce;
              SmallVector<Value> res = frag.multiply(
                  kb, aRegs, bRegs[h], ArrayRef<Value>(next).slice(at, ce));
              llvm::copy(res, next.begin() + at);
            }
          }
        }
        scf::YieldOp::create(kb, next);
      });
  SmallVector<Value> scores(kLoop.getResults().take_front(nS).begin(),
                            kLoop.getResults().take_front(nS).end());
  for (int64_t part = 1; part < kSplit; ++part)
    for (int64_t e = 0; e < nS; ++e)
      scores[e] =
          arith::AddFOp::create(ib, scores[e], kLoop.getResult(part * nS + e));
  return scores;
}

/// Split scores: this warp's P (its half, or with lead scores all of it)
/// to the probability tile (runs of a fragment's elements along a row as
/// one vector store); after a barrier each warp reads all of its rows' P as
/// the A operand.
void FusedStep::storeProbabilities(ImplicitLocOpBuilder &ib,
                                   ArrayRef<Value> prob) {
  const int64_t ce = ci.elems;
  for (int64_t j = 0; j < p.sBlocks; ++j)
    for (int64_t i = 0; i < ce;) {
      int64_t len = 1;
      while (i + len < ce && elemRow[i + len] == elemRow[i] &&
             MatrixEmitter::elemCoord(ci.col, i + len) ==
                 MatrixEmitter::elemCoord(ci.col, i) + len)
        ++len;
      SmallVector<Value> elems;
      for (int64_t e = i; e < i + len; ++e)
        elems.push_back(castFloat(ib, prob[j * ce + e], p.elem));
      Value run = vector::FromElementsOp::create(
          ib, VectorType::get({len}, p.elem), elems);
      vector::StoreOp::create(
          ib, run, pTile,
          ValueRange{rowOf(i), fragCol(ib, keyBase, j * p.frag->n, i)});
      i += len;
    }
}

/// The A fragment of P·V's key step `kk`: this warp's probabilities in
/// registers (the scores' C fragments are the A fragment, plan.pAsA), or
/// `fromTile` (split scores) all of them from the probability tile.
SmallVector<Value> FusedStep::probabilityA(ImplicitLocOpBuilder &ib,
                                           ArrayRef<Value> prob, int64_t kk,
                                           bool fromTile) {
  const MatrixInstr &mi = *p.frag;
  if (fromTile)
    return frag.loadA(ib, pTile, rowBase, indexConst(ib, kk * mi.k));
  SmallVector<Value> elems;
  for (AccElement at : p.pAsA)
    elems.push_back(prob[(kk * (mi.k / mi.n) + at.tile) * ci.elems + at.elem]);
  return frag.packA(ib, elems);
}

/// acc += P·V by wgmma, waited for: `aRegs` the probabilities' A
/// registers (probabilityRegs); the values at `vRowBytes` (valueRowBytes;
/// null: this step's tile); V is an MN-major operand: 64-column blocks
/// R·128 bytes apart, 8-key groups 1024 apart. This warpgroup's value
/// columns [colBase, colBase + dv / colSplit) in steps of at most 256
/// columns.
void FusedStep::valuesWgmma(ImplicitLocOpBuilder &ib, ArrayRef<Value> aRegs,
                            SmallVectorImpl<Value> &state, Value vRowBytes) {
  const int64_t nAcc = p.nAcc();
  SmallVector<Value> regs(state.begin(), state.end());
  llvm::append_range(regs, aRegs);
  regs = mma.fenceRegisters(ib, regs);
  state.assign(regs.begin(), regs.begin() + nAcc);
  Value vRows = vRowBytes ? vRowBytes : valueRowBytes(ib);
  mma.fence(ib);
  issueValues(ib, ArrayRef<Value>(regs).drop_front(nAcc), vRows, state);
  mma.wait(ib, 0);
  SmallVector<Value> done = mma.fenceRegisters(ib, state);
  state.assign(done.begin(), done.end());
}

/// The A registers (i32) of P·V's key steps, one step after the other
/// (probabilityA).
SmallVector<Value> FusedStep::probabilityRegs(ImplicitLocOpBuilder &ib,
                                              ArrayRef<Value> prob,
                                              bool fromTile) {
  const MatrixInstr &wi = p.productInstr();
  SmallVector<Value> regs;
  for (int64_t kk = 0; kk < p.tile / wi.k; ++kk)
    for (Value r : probabilityA(ib, prob, kk, fromTile))
      regs.push_back(asI32(ib, r));
  return regs;
}

/// Bytes (i64) from the swizzled value root to this step's value tile and
/// this warpgroup's first value column block.
Value FusedStep::valueRowBytes(ImplicitLocOpBuilder &ib) {
  const int64_t vRootRows = vInfo.root.getType().getDimSize(0);
  Value colBlockBytes = arith::IndexCastUIOp::create(
      ib, ib.getI64Type(),
      arith::MulIOp::create(
          ib, arith::DivUIOp::create(ib, colBase, indexConst(ib, 64)),
          indexConst(ib, swizzledBlockBytes(vRootRows))));
  return arith::AddIOp::create(ib, rowBytes(ib, v, indexConst(ib, 0)),
                               colBlockBytes);
}

/// acc += P·V issued and committed as one group, not waited for: `aRegs`
/// the A registers of every key step (probabilityRegs), the value tile at
/// `vRowBytes` (valueRowBytes) from the swizzled root.
void FusedStep::issueValues(ImplicitLocOpBuilder &ib, ArrayRef<Value> aRegs,
                            Value vRowBytes, SmallVectorImpl<Value> &state) {
  const MatrixInstr &wi = p.productInstr();
  const int64_t steps = p.tile / wi.k;
  const int64_t aRegCount = int64_t(aRegs.size()) / steps;
  const int64_t cols = p.dv / p.colSplit;
  const int64_t chunk = std::min<int64_t>(cols, 256);
  const int64_t vRootRows = vInfo.root.getType().getDimSize(0);
  const int64_t vLbo = swizzledBlockBytes(vRootRows);
  Value root = sharedAddress(ib, swizzled.lookup(vInfo.root));
  for (int64_t kk = 0; kk < steps; ++kk) {
    for (int64_t n0 = 0; n0 < cols; n0 += chunk) {
      int64_t n = std::min(chunk, cols - n0);
      // An MN-major descriptor starts at a 64-column block; key step kk
      // is wi.k rows of 128 bytes further.
      int64_t c = vInfo.col0 + n0;
      Value addr = arith::AddIOp::create(
          ib, root,
          arith::AddIOp::create(
              ib, vRowBytes,
              arith::ConstantIntOp::create(
                  ib, ib.getI64Type(),
                  kk * wi.k * 128 + c / 64 * swizzledBlockBytes(vRootRows))));
      // n columns: n / 8 blocks of the warp's fragment.
      const int64_t first = n0 / wi.n * ci.elems, count = n / wi.n * ci.elems;
      SmallVector<Value> res = mma.multiplyAsync(
          ib, n, ArrayRef<Value>(state).slice(first, count), Value(),
          aRegs.slice(kk * aRegCount, aRegCount),
          mma.descriptor(ib, addr, vLbo, 1024), /*bMNMajor=*/true);
      llvm::copy(res, state.begin() + first);
    }
  }
  mma.commit(ib);
}

/// acc += P·V by mma.sync over the key tile in steps of k keys; V read
/// K x N (transposed ldmatrix).
void FusedStep::valuesMmaSync(ImplicitLocOpBuilder &ib, ArrayRef<Value> prob,
                              SmallVectorImpl<Value> &state) {
  const MatrixInstr &mi = *p.frag;
  const int64_t ce = ci.elems, perLoad = frag.bTilesPerLoad();
  for (int64_t kk = 0; kk < p.tile / mi.k; ++kk) {
    SmallVector<Value> aRegs = probabilityA(ib, prob, kk, p.splitScores);
    for (int64_t dp = 0; dp < p.vBlocks / perLoad; ++dp) {
      SmallVector<SmallVector<Value>> bRegs =
          frag.loadB(ib, v, indexConst(ib, kk * mi.k), colBase,
                     dp * perLoad * mi.n, /*nMajor=*/false);
      for (int64_t h = 0; h < perLoad; ++h) {
        int64_t blk = perLoad * dp + h;
        SmallVector<Value> res = frag.multiply(
            ib, aRegs, bRegs[h], ArrayRef<Value>(state).slice(blk * ce, ce));
        llvm::copy(res, state.begin() + blk * ce);
      }
    }
  }
}

/// The accumulators, maxima and (row-reduced) sums back to their tiles;
/// with split scores the second half's row sums join the first's through
/// the correction buffer.
void FusedStep::writeBack(ImplicitLocOpBuilder &ab, ValueRange fin) {
  const int64_t nAcc = p.nAcc();
  // The accumulator tile shares memory with the operand tiles (placed by
  // mla-outline-gpu-kernels once a barrier separates their uses): a loop
  // ending in a tile skip ends in no barrier of its own, and copies may
  // still be in flight (a pipelined loop's past its end; the queries' copy
  // where the loop ran no iteration): waitAllAsyncCopies.
  waitAllAsyncCopies(ab);
  gpu::BarrierOp::create(ab);
  for (int64_t blk = 0; blk < p.vBlocks; ++blk)
    for (int64_t i = 0; i < ci.elems; ++i)
      memref::StoreOp::create(ab, fin[blk * ci.elems + i], acc,
                              ValueRange{rowOf(i), accCol(ab, blk, i)});
  SmallVector<Value> lTot;
  for (int64_t r = 0; r < nRows(); ++r)
    lTot.push_back(rowReduce(ab, fin[nAcc + nRows() + r], false));
  // (With lead scores the second warpgroup's sums stay 0.)
  if (halvesScores()) {
    Value second = arith::AndIOp::create(
        ab, rowLead,
        arith::CmpIOp::create(ab, arith::CmpIPredicate::eq, colPart,
                              indexConst(ab, 1)));
    guarded(ab, second, [&](ImplicitLocOpBuilder &ib) {
      for (int64_t r = 0; r < nRows(); ++r)
        memref::StoreOp::create(ib, lTot[r], corrBuf, ValueRange{rows[r]});
    });
    gpu::BarrierOp::create(ab);
    for (int64_t r = 0; r < nRows(); ++r)
      lTot[r] = arith::AddFOp::create(
          ab, lTot[r],
          memref::LoadOp::create(ab, corrBuf, ValueRange{rows[r]}));
  }
  guarded(ab, owner, [&](ImplicitLocOpBuilder &ib) {
    for (int64_t r = 0; r < nRows(); ++r) {
      memref::StoreOp::create(ib, fin[nAcc + r], mBuf, ValueRange{rows[r]});
      memref::StoreOp::create(ib, lTot[r], lBuf, ValueRange{rows[r]});
    }
  });
  gpu::BarrierOp::create(ab);
}

SmallVector<Value> FusedStep::rescaled(ImplicitLocOpBuilder &ib, ValueRange acc,
                                       ValueRange corr) {
  SmallVector<Value> out;
  for (auto [a, x] : llvm::enumerate(acc))
    out.push_back(arith::MulFOp::create(ib, x, corr[elemRow[a % ci.elems]]));
  return out;
}

void FusedStep::appendRowStats(ImplicitLocOpBuilder &ib,
                               SmallVectorImpl<Value> &state, ValueRange mNew,
                               ValueRange l, ValueRange corr, ValueRange sum) {
  llvm::append_range(state, mNew);
  for (int64_t r = 0; r < nRows(); ++r)
    state.push_back(arith::AddFOp::create(
        ib, arith::MulFOp::create(ib, l[r], corr[r]), sum[r]));
}

void FusedStep::finishLastValues(
    ImplicitLocOpBuilder &ab, ValueRange fin,
    function_ref<Value(ImplicitLocOpBuilder &)> cond,
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, ArrayRef<Value>)>
        last) {
  const int64_t nAcc = p.nAcc(), nR = nRows();
  waitAllAsyncCopies(ab);
  gpu::BarrierOp::create(ab);
  Value when = cond(ab);
  SmallVector<Value> acc(fin.begin(), fin.begin() + nAcc);
  SmallVector<Type> accTypes(nAcc, ab.getF32Type());
  auto ifOp = scf::IfOp::create(ab, accTypes, when, /*addThenBlock=*/true,
                                /*addElseBlock=*/true);
  ImplicitLocOpBuilder tb =
      ImplicitLocOpBuilder::atBlockEnd(ab.getLoc(), ifOp.thenBlock());
  scf::YieldOp::create(tb, last(tb, acc));
  ImplicitLocOpBuilder eb =
      ImplicitLocOpBuilder::atBlockEnd(ab.getLoc(), ifOp.elseBlock());
  scf::YieldOp::create(eb, acc);
  SmallVector<Value> out(ifOp.getResults().begin(), ifOp.getResults().end());
  out.append(fin.begin() + nAcc, fin.begin() + nAcc + 2 * nR);
  writeBack(ab, out);
}

/// Over the lanes that share an accumulator row (the C layout's: the four
/// lanes of a quad for m16n8).
Value FusedStep::rowReduce(ImplicitLocOpBuilder &ib, Value x, bool isMax) {
  return reduceAcrossRow(ib, *p.frag, ti.warpSize, x, isMax);
}

/// The value column of accumulator element `e` of block `blk`.
Value FusedStep::accCol(ImplicitLocOpBuilder &ib, int64_t blk, int64_t e) {
  return arith::AddIOp::create(
      ib, colBase,
      arith::AddIOp::create(
          ib, cCol,
          indexConst(ib,
                     blk * p.frag->n + MatrixEmitter::elemCoord(ci.col, e))));
}

/// Bytes from the start of a swizzled operand to row `extraRows` of `view`.
Value FusedStep::rowBytes(ImplicitLocOpBuilder &ib, Value view,
                          Value extraRows) {
  return swizzledRowBytes(ib, view, extraRows);
}

/// The descriptor of element (row 0, column `col`) of a swizzled operand
/// view plus `rowBytes`.
Value FusedStep::operandDesc(ImplicitLocOpBuilder &ib, ViewInfo info,
                             Value rowBytes, int64_t col, int64_t lbo) {
  Value addr =
      swizzledAddress(ib, swizzled.lookup(info.root), info, rowBytes, col);
  return mma.descriptor(ib, addr, lbo, 1024);
}

} // namespace mla::nvidia

LogicalResult
mla::nvidia::fuseAttentionStep(AttentionStepOp op, const ThreadInfo &ti,
                               SmallVectorImpl<scf::ParallelOp> &handed) {
  StepShape shape{op.getElementType(), op.getRows(),     op.getHeadDim(),
                  op.getTileKeys(),    op.getValueDim(), ti.warps()};
  shape.leadScores = ti.leadScores;
  FailureOr<StepPlan> plan = planFusedStep(shape, ti.wgmma, op.getLoc());
  SmallVector<Operation *> pure;
  if (failed(plan))
    return failure();
  if (plan->transposed) {
    if (op.getOverlap())
      return refuse(op, "the transposed step does not lag P·V (overlap)");
    return fuseTransposedStep(op, ti, *plan);
  }
  // A mask's tile-skipping scf.if around the step carries the state.
  if (std::string why; failed(checkStepLoop(op, pure, why, /*tileSkip=*/true)))
    return refuse(op, why);
  SmallVector<memref::AllocaOp> swizzleRoots;
  if (plan->wgmma && !canUseSwizzledOperands(op, swizzleRoots)) {
    LLVM_DEBUG(llvm::dbgs()
               << "mla-distribute: no warpgroup MMA at " << op.getLoc()
               << ": the query, key or value tile cannot take the swizzled "
                  "layout\n");
    plan->wgmma = false;
  }
  // The overlapped step (FusedStepOverlap.cpp) carries A registers of a
  // warpgroup's whole scores from one iteration to the next.
  if (op.getOverlap() &&
      (!plan->wgmma || plan->splitScores || stepTileSkip(op) ||
       !isa<scf::ForOp>(op->getParentOp())))
    return refuse(op, "overlap needs warpgroup MMA with whole scores in a "
                      "key loop without a tile skip");
  FusedStep fused(op, ti, *plan, handed);
  if (plan->wgmma)
    fused.swizzleOperands(swizzleRoots);
  for (Operation *pureOp : pure)
    pureOp->moveBefore(op);
  LLVM_DEBUG(llvm::dbgs() << "mla-distribute: fused attention step at "
                          << op.getLoc() << " ("
                          << (plan->wgmma ? "wgmma" : "mma.sync") << ", "
                          << (plan->leadScores    ? "lead"
                              : plan->splitScores ? "split"
                                                  : "whole")
                          << " scores)\n");
  return fused.emit();
}
