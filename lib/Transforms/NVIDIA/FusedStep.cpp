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
// half g of all 64 rows.
//
// Strategy: planFusedStep decides from the shapes, the warps and the target
// (every refusal says why under -debug-only=mla-distribute); checkIR that
// the step can keep its state in registers across its loop.
//
//===----------------------------------------------------------------------===//
#include "../AttentionLayout.h"
#include "../GPU/MatrixEmitter.h"
#include "../Utils.h"
#include "MmaSync.h"
#include "NVIDIA.h"
#include "Wgmma.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
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

/// Whether the query, key and value tiles can move to the swizzled layout
/// warpgroup MMA reads (whole 64-column blocks at 8-row aligned offsets).
bool canUseSwizzledOperands(AttentionStepOp op,
                            SmallVectorImpl<memref::AllocaOp> &roots) {
  for (Value v : {op.getQ(), op.getK(), op.getV()}) {
    ViewInfo info = analyzeView(v);
    if (!info.root || !info.rowsAligned || info.col0 % 64 != 0)
      return false;
    if (!llvm::is_contained(roots, info.root))
      roots.push_back(info.root);
  }
  SmallVector<Operation *> fused = {op};
  return llvm::all_of(
      roots, [&](memref::AllocaOp root) { return canSwizzle(root, fused); });
}

/// The emitter of one fused step.
class FusedStep {
public:
  FusedStep(AttentionStepOp op, const ThreadInfo &ti, const StepPlan &plan)
      : op(op), ti(ti), p(plan), loop(stepKeyLoop(op, /*tileSkip=*/true)),
        q(op.getQ()), k(op.getK()), v(op.getV()), acc(op.getAcc()),
        mBuf(op.getM()), lBuf(op.getL()), qInfo(analyzeView(q)),
        kInfo(analyzeView(k)), vInfo(analyzeView(v)),
        inTileSkip(stepTileSkip(op)) {}

  /// Moves the swizzled operands (wgmma) to their buffers' replacements.
  void swizzleOperands(ArrayRef<memref::AllocaOp> roots);
  LogicalResult emit();

private:
  void setUp(ImplicitLocOpBuilder &b);
  SmallVector<Value> initialState(ImplicitLocOpBuilder &b);
  SmallVector<Value> step(ImplicitLocOpBuilder &ib,
                          ArrayRef<BlockArgument> args);
  SmallVector<Value> scoresWgmma(ImplicitLocOpBuilder &ib);
  SmallVector<Value> scoresMmaSync(ImplicitLocOpBuilder &ib);
  void probabilitiesToTile(ImplicitLocOpBuilder &ib, ArrayRef<Value> prob);
  void valuesWgmma(ImplicitLocOpBuilder &ib, ArrayRef<Value> prob,
                   SmallVectorImpl<Value> &state);
  void valuesMmaSync(ImplicitLocOpBuilder &ib, ArrayRef<Value> prob,
                     SmallVectorImpl<Value> &state);
  void writeBack(ImplicitLocOpBuilder &ab, ValueRange fin);

  // Fragment helpers.
  SmallVector<Value> ldmatrix4(ImplicitLocOpBuilder &ib, Value mem, Value r,
                               Value c, bool trans);
  Value rowReduce(ImplicitLocOpBuilder &ib, Value x, bool isMax);
  /// The instruction of the scores (its C layout is the softmax's).
  static const MatrixInstr &scoreInstr(const StepPlan &p) {
    bool bf16 = p.elem.isBF16();
    if (p.wgmma)
      return matrixInstr(bf16 ? MatrixInstrId::WgmmaM64N8K16BF16
                              : MatrixInstrId::WgmmaM64N8K16F16);
    return matrixInstr(bf16 ? MatrixInstrId::MmaSyncM16N8K16BF16
                            : MatrixInstrId::MmaSyncM16N8K16F16);
  }
  Value pack(ImplicitLocOpBuilder &ib, Value lo, Value hi);
  Value accCol(ImplicitLocOpBuilder &ib, int64_t blk, int64_t odd);
  Value rowBytes(ImplicitLocOpBuilder &ib, Value view, Value extraRows);
  Value operandDesc(ImplicitLocOpBuilder &ib, ViewInfo info, Value rowBytes,
                    int64_t col, int64_t lbo);
  Value rowOf(int64_t e) const { return (e % 4) / 2 ? row1 : row0; }

  AttentionStepOp op;
  const ThreadInfo &ti;
  StepPlan p;
  scf::ForOp loop;
  Value q, k, v, acc, mBuf, lBuf;
  ViewInfo qInfo, kInfo, vInfo;
  /// The step sits in a mask's tile skip: the loop's body ends in the
  /// skip, not in the step's barrier.
  bool inTileSkip;
  DenseMap<Operation *, Value> swizzled; // operand root -> swizzled buffer
  Value pTile, corrBuf, halfMax;         // split scores only
  // Lanes and rows (setUp).
  std::optional<LaneLayout> lanes;
  Value rowBase, colPart, colBase, keyBase, row0, row1, owner, negInf;
};

void FusedStep::swizzleOperands(ArrayRef<memref::AllocaOp> roots) {
  ImplicitLocOpBuilder top = builderAtGridTop(loop.getLoc(), loop->getBlock());
  int64_t id = 0;
  top.getBlock()->walk([&](memref::AllocaOp a) {
    if (a->hasAttr(MLADialect::kSwizzleDstAttrName))
      ++id;
  });
  for (memref::AllocaOp root : roots) {
    MemRefType t = root.getType();
    auto a = memref::AllocaOp::create(
        top, MemRefType::get({swizzledCols(root) / 64, t.getDimSize(0), 64},
                             t.getElementType()));
    a->setAttr(a.getAlignmentAttrName(), top.getI64IntegerAttr(kSwizzleAlign));
    a->setAttr(MLADialect::kSwizzleDstAttrName, top.getI64IntegerAttr(id));
    root->setAttr(MLADialect::kSwizzleSrcAttrName, top.getI64IntegerAttr(id));
    swizzled[root] = a.getResult();
    ++id;
  }
}

/// Lanes, this warp's rows and value columns, and (split scores) the
/// shared buffers: per (half, row) maxima, the probability tile (P of both
/// halves, read as the A operand of P·V) and, after the loop, the second
/// half's row sums.
void FusedStep::setUp(ImplicitLocOpBuilder &b) {
  lanes.emplace(b, ti);
  Value c8 = indexConst(b, 8);
  rowBase = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, lanes->warp, indexConst(b, p.rowBlocks)),
      indexConst(b, 16));
  colPart = arith::DivUIOp::create(b, lanes->warp, indexConst(b, p.rowBlocks));
  colBase = arith::MulIOp::create(b, colPart, indexConst(b, p.dv / p.colSplit));
  keyBase = p.splitScores
                ? arith::MulIOp::create(b, colPart, indexConst(b, p.tile / 2))
                      .getResult()
                : indexConst(b, 0);
  if (p.splitScores) {
    ImplicitLocOpBuilder top =
        builderAtGridTop(loop.getLoc(), loop->getBlock());
    halfMax = memref::AllocaOp::create(
        top, MemRefType::get({2, p.rows}, Float32Type::get(b.getContext())));
    StepScratch scratch = allocateStepScratch(op, /*scores=*/false,
                                              /*probs=*/true, /*corr=*/true);
    pTile = scratch.probs;
    corrBuf = scratch.corr;
  }
  row0 = arith::AddIOp::create(b, rowBase, lanes->group);
  row1 = arith::AddIOp::create(b, row0, c8);
  // The lanes that own m and l of their two rows when writing back.
  owner = arith::AndIOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lanes->quadPos,
                            indexConst(b, 0)),
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, colPart,
                            indexConst(b, 0)));
}

/// vBlocks x 4 accumulators, m of rows 0/1, l of rows 0/1 (l is a per-lane
/// partial sum; only the owner lane starts from l[row]). When the
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
      for (int64_t i = 0; i < 4; ++i)
        init.push_back(memref::LoadOp::create(
            b, acc, ValueRange{i < 2 ? row0 : row1, accCol(b, blk, i & 1)}));
  }
  negInf = f32Const(b, -std::numeric_limits<double>::infinity());
  for (Value r : {row0, row1})
    init.push_back(memref::LoadOp::create(b, mBuf, ValueRange{r}));
  for (Value r : {row0, row1})
    init.push_back(arith::SelectOp::create(
        b, owner, memref::LoadOp::create(b, lBuf, ValueRange{r}), zeroF));
  return init;
}

LogicalResult FusedStep::emit() {
  ImplicitLocOpBuilder b(loop.getLoc(), loop);
  setUp(b);
  // After the loop: the state back to shared memory for the epilogue.
  return carryStepState(
      op, initialState(b),
      [&](ImplicitLocOpBuilder &ib, ArrayRef<BlockArgument> args) {
        return step(ib, args);
      },
      [&](ImplicitLocOpBuilder &ab, ValueRange fin) { writeBack(ab, fin); });
}

/// One iteration: scores, the softmax on their fragments (element e =
/// (block j, i) sits at row row0 (i < 2) or row1, column 8j + 2·(lane % 4)
/// + (i & 1)), then acc = corr·acc + P·V.
SmallVector<Value> FusedStep::step(ImplicitLocOpBuilder &ib,
                                   ArrayRef<BlockArgument> args) {
  const int64_t nAcc = p.nAcc(), nS = p.sBlocks * 4;
  SmallVector<Value> scores = p.wgmma ? scoresWgmma(ib) : scoresMmaSync(ib);
  SmallVector<Value> x(nS), vis(nS);
  Value mx[2] = {negInf, negInf};
  for (int64_t j = 0; j < p.sBlocks; ++j)
    for (int64_t i = 0; i < 4; ++i) {
      int64_t e = j * 4 + i;
      Value col = arith::AddIOp::create(
          ib, arith::AddIOp::create(ib, keyBase, lanes->twoTg),
          indexConst(ib, j * 8 + (i & 1)));
      SmallVector<Value> r =
          inlineRegion(ib, op.getBody(), {rowOf(e), col, scores[e]});
      x[e] = r[0];
      vis[e] = r[1];
      mx[i / 2] = arith::MaximumFOp::create(
          ib, mx[i / 2], arith::SelectOp::create(ib, vis[e], x[e], negInf));
    }
  for (int64_t r = 0; r < 2; ++r)
    mx[r] = rowReduce(ib, mx[r], true);
  if (p.splitScores) {
    // Each half's row maxima to shared memory; the row maximum is the
    // larger of the two halves'.
    Value other = arith::SubIOp::create(ib, indexConst(ib, 1), colPart);
    guarded(ib,
            arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, lanes->quadPos,
                                  indexConst(ib, 0)),
            [&](ImplicitLocOpBuilder &gb) {
              for (int64_t r = 0; r < 2; ++r)
                memref::StoreOp::create(gb, mx[r], halfMax,
                                        ValueRange{colPart, r ? row1 : row0});
            });
    gpu::BarrierOp::create(ib);
    for (int64_t r = 0; r < 2; ++r)
      mx[r] = arith::MaximumFOp::create(
          ib, mx[r],
          memref::LoadOp::create(ib, halfMax,
                                 ValueRange{other, r ? row1 : row0}));
  }
  Value ref[2], corr[2], mNew[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value mOld = args[nAcc + r];
    mNew[r] = arith::MaximumFOp::create(ib, mOld, mx[r]);
    Value isEmpty =
        arith::CmpFOp::create(ib, arith::CmpFPredicate::OEQ, mNew[r], negInf);
    ref[r] = arith::SelectOp::create(ib, isEmpty, f32Const(ib, 0.0), mNew[r]);
    corr[r] = math::Exp2Op::create(ib, arith::SubFOp::create(ib, mOld, ref[r]));
  }
  SmallVector<Value> prob(nS);
  Value sum[2] = {f32Const(ib, 0.0), f32Const(ib, 0.0)};
  for (int64_t e = 0; e < nS; ++e) {
    int64_t r = (e % 4) / 2;
    Value ex =
        math::Exp2Op::create(ib, arith::SubFOp::create(ib, x[e], ref[r]));
    prob[e] = arith::SelectOp::create(ib, vis[e], ex, f32Const(ib, 0.0));
    sum[r] = arith::AddFOp::create(ib, sum[r], prob[e]);
  }
  SmallVector<Value> state;
  for (int64_t a = 0; a < nAcc; ++a)
    state.push_back(arith::MulFOp::create(ib, args[a], corr[(a % 4) / 2]));
  if (p.splitScores)
    probabilitiesToTile(ib, prob);
  if (p.wgmma)
    valuesWgmma(ib, prob, state);
  else
    valuesMmaSync(ib, prob, state);
  for (int64_t r = 0; r < 2; ++r)
    state.push_back(mNew[r]);
  for (int64_t r = 0; r < 2; ++r)
    state.push_back(arith::AddFOp::create(
        ib, arith::MulFOp::create(ib, args[nAcc + 2 + r], corr[r]), sum[r]));
  // The next iteration's copies overwrite the key and value tiles.
  gpu::BarrierOp::create(ib);
  return state;
}

/// The warpgroup's 64 rows times its key columns, dim / 16 wgmma in one
/// group, waited for before the softmax. With several warpgroups,
/// warpgroup g issues its scores only after g - 1 has issued its own (named
/// barrier g, 256 threads: g - 1 arrives, g waits): the tensor cores then
/// finish them one warpgroup after the other, and each warpgroup's softmax
/// runs while the next one's product is computed (FlashAttention-3's
/// ping-pong).
SmallVector<Value> FusedStep::scoresWgmma(ImplicitLocOpBuilder &ib) {
  Value wgIdx = arith::DivUIOp::create(ib, lanes->warp, indexConst(ib, 4));
  // The warpgroup's first row: warp w owns rows 16·(w % RB).
  Value wgRows = arith::MulIOp::create(
      ib, arith::RemUIOp::create(ib, wgIdx, indexConst(ib, p.rowBlocks / 4)),
      indexConst(ib, 64));
  Value qRows = rowBytes(ib, q, wgRows);
  Value kRows = rowBytes(ib, k, keyBase);
  const int64_t groups = p.splitScores ? 1 : p.warps / 4;
  auto namedBarrier = [&](Value cond, Value id, bool arrive) {
    guarded(ib, cond, [&](ImplicitLocOpBuilder &gb) {
      Value i32Id = arith::IndexCastUIOp::create(gb, gb.getI32Type(), id);
      Value count = arith::ConstantIntOp::create(gb, gb.getI32Type(), 256);
      if (arrive)
        NVVM::BarrierArriveOp::create(gb, i32Id, count);
      else
        NVVM::BarrierOp::create(gb, Type(), i32Id, count,
                                NVVM::BarrierReductionAttr(), Value());
    });
  };
  if (groups > 1)
    namedBarrier(arith::CmpIOp::create(ib, arith::CmpIPredicate::ugt, wgIdx,
                                       indexConst(ib, 0)),
                 wgIdx, /*arrive=*/false);
  SmallVector<Value> s;
  NVVM::WgmmaFenceAlignedOp::create(ib);
  for (int64_t k0 = 0; k0 < p.dim; k0 += 16)
    s = wgmma(ib, p.elem, p.sBlocks * 8, s,
              operandDesc(ib, qInfo, qRows, k0, 16), {},
              operandDesc(ib, kInfo, kRows, k0, 16), /*transB=*/false);
  NVVM::WgmmaGroupSyncAlignedOp::create(ib);
  if (groups > 1)
    namedBarrier(arith::CmpIOp::create(ib, arith::CmpIPredicate::ult, wgIdx,
                                       indexConst(ib, groups - 1)),
                 arith::AddIOp::create(ib, wgIdx, indexConst(ib, 1)),
                 /*arrive=*/true);
  NVVM::WgmmaWaitGroupSyncOp::create(ib, 0);
  return registerFence(ib, s);
}

/// This warp's 16 rows times its key columns (all, or its half from
/// keyBase with split scores). With few score fragments (a narrow key
/// tile), consecutive k-steps go to `kSplit` separate accumulator sets,
/// summed at the end, so that enough independent mma.sync chains are in
/// flight.
SmallVector<Value> FusedStep::scoresMmaSync(ImplicitLocOpBuilder &ib) {
  const int64_t nS = p.sBlocks * 4;
  const int64_t kSplit = p.sBlocks < 8 && p.dim % 32 == 0 ? 2 : 1;
  SmallVector<Value> sInit(nS * kSplit, f32Const(ib, 0.0));
  auto kLoop = scf::ForOp::create(
      ib, indexConst(ib, 0), indexConst(ib, p.dim), indexConst(ib, 16 * kSplit),
      sInit, [&](OpBuilder &nb, Location l, Value kBase, ValueRange sAcc) {
        ImplicitLocOpBuilder kb(l, nb);
        SmallVector<Value> next(sAcc.begin(), sAcc.end());
        for (int64_t part = 0; part < kSplit; ++part) {
          Value k0 =
              arith::AddIOp::create(kb, kBase, indexConst(kb, 16 * part));
          SmallVector<Value> aRegs = ldmatrix4(
              kb, q, arith::AddIOp::create(kb, rowBase, lanes->lane16),
              arith::AddIOp::create(kb, k0, lanes->laneHi8), false);
          for (int64_t jp = 0; jp < p.sBlocks / 2; ++jp) {
            SmallVector<Value> bRegs = ldmatrix4(
                kb, k,
                arith::AddIOp::create(
                    kb,
                    arith::AddIOp::create(kb, keyBase, indexConst(kb, jp * 16)),
                    arith::AddIOp::create(kb, lanes->laneHi8, lanes->lane8)),
                arith::AddIOp::create(kb, k0, lanes->laneMid8), false);
            for (int64_t h = 0; h < 2; ++h) {
              int64_t at = (part * p.sBlocks + 2 * jp + h) * 4;
              SmallVector<Value> res = mmaM16N8K16(
                  kb, p.elem, aRegs, {bRegs[2 * h], bRegs[2 * h + 1]},
                  ArrayRef<Value>(next).slice(at, 4));
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

/// Split scores: this half of P to the probability tile; after the barrier
/// each warp reads all of its rows' P as the A operand.
void FusedStep::probabilitiesToTile(ImplicitLocOpBuilder &ib,
                                    ArrayRef<Value> prob) {
  for (int64_t j = 0; j < p.sBlocks; ++j)
    for (int64_t h = 0; h < 2; ++h) {
      Value col = arith::AddIOp::create(
          ib, arith::AddIOp::create(ib, keyBase, lanes->twoTg),
          indexConst(ib, j * 8));
      Value pair = vector::FromElementsOp::create(
          ib, VectorType::get({2}, p.elem),
          ValueRange{castFloat(ib, prob[j * 4 + 2 * h], p.elem),
                     castFloat(ib, prob[j * 4 + 2 * h + 1], p.elem)});
      vector::StoreOp::create(ib, pair, pTile,
                              ValueRange{h ? row1 : row0, col});
    }
  gpu::BarrierOp::create(ib);
}

/// acc += P·V by wgmma: the probabilities are the A registers (the m16n8
/// accumulator layout is the A fragment layout); V is an MN-major operand:
/// 64-column blocks R·128 bytes apart, 8-key groups 1024 apart. This
/// warpgroup's value columns [colBase, colBase + dv / colSplit) in steps of
/// at most 256 columns.
void FusedStep::valuesWgmma(ImplicitLocOpBuilder &ib, ArrayRef<Value> prob,
                            SmallVectorImpl<Value> &state) {
  const int64_t nAcc = p.nAcc();
  SmallVector<Value> regs(state.begin(), state.end());
  for (int64_t kk = 0; kk < p.tile / 16; ++kk) {
    if (p.splitScores) {
      // Both halves of P from the probability tile.
      for (Value r : ldmatrix4(
               ib, pTile, arith::AddIOp::create(ib, rowBase, lanes->lane16),
               arith::AddIOp::create(ib, indexConst(ib, kk * 16),
                                     lanes->laneHi8),
               false))
        regs.push_back(asI32(ib, r));
      continue;
    }
    int64_t j0 = 2 * kk * 4, j1 = (2 * kk + 1) * 4;
    for (Value r : {pack(ib, prob[j0], prob[j0 + 1]),
                    pack(ib, prob[j0 + 2], prob[j0 + 3]),
                    pack(ib, prob[j1], prob[j1 + 1]),
                    pack(ib, prob[j1 + 2], prob[j1 + 3])})
      regs.push_back(asI32(ib, r));
  }
  regs = registerFence(ib, regs);
  state.assign(regs.begin(), regs.begin() + nAcc);
  const int64_t cols = p.dv / p.colSplit;
  const int64_t chunk = std::min<int64_t>(cols, 256);
  const int64_t vRootRows = vInfo.root.getType().getDimSize(0);
  const int64_t vLbo = vRootRows * 128;
  Value colBlockBytes = arith::IndexCastUIOp::create(
      ib, ib.getI64Type(),
      arith::MulIOp::create(
          ib, arith::DivUIOp::create(ib, colBase, indexConst(ib, 64)),
          indexConst(ib, vRootRows * 128)));
  NVVM::WgmmaFenceAlignedOp::create(ib);
  for (int64_t kk = 0; kk < p.tile / 16; ++kk) {
    Value vRows = arith::AddIOp::create(
        ib, rowBytes(ib, v, indexConst(ib, kk * 16)), colBlockBytes);
    ArrayRef<Value> aRegs = ArrayRef<Value>(regs).slice(nAcc + kk * 4, 4);
    for (int64_t n0 = 0; n0 < cols; n0 += chunk) {
      int64_t n = std::min(chunk, cols - n0);
      // An MN-major descriptor starts at a 64-column block.
      Value root = swizzled.lookup(vInfo.root);
      int64_t c = vInfo.col0 + n0;
      Value addr = arith::AddIOp::create(
          ib, sharedAddress(ib, root),
          arith::AddIOp::create(
              ib, vRows,
              arith::ConstantIntOp::create(ib, ib.getI64Type(),
                                           c / 64 * vRootRows * 128)));
      SmallVector<Value> res =
          wgmma(ib, p.elem, n, ArrayRef<Value>(state).slice(n0 / 2, n / 2),
                Value(), aRegs, wgmmaDescriptor(ib, addr, vLbo, 1024),
                /*transB=*/true);
      llvm::copy(res, state.begin() + n0 / 2);
    }
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(ib);
  NVVM::WgmmaWaitGroupSyncOp::create(ib, 0);
  SmallVector<Value> done = registerFence(ib, state);
  state.assign(done.begin(), done.end());
}

/// acc += P·V by mma.sync over the key tile in steps of 16 keys; V read
/// transposed with ldmatrix.
void FusedStep::valuesMmaSync(ImplicitLocOpBuilder &ib, ArrayRef<Value> prob,
                              SmallVectorImpl<Value> &state) {
  for (int64_t kk = 0; kk < p.tile / 16; ++kk) {
    SmallVector<Value> aRegs;
    if (p.splitScores) {
      aRegs = ldmatrix4(
          ib, pTile, arith::AddIOp::create(ib, rowBase, lanes->lane16),
          arith::AddIOp::create(ib, indexConst(ib, kk * 16), lanes->laneHi8),
          false);
    } else {
      int64_t j0 = 2 * kk * 4, j1 = (2 * kk + 1) * 4;
      aRegs = {pack(ib, prob[j0], prob[j0 + 1]),
               pack(ib, prob[j0 + 2], prob[j0 + 3]),
               pack(ib, prob[j1], prob[j1 + 1]),
               pack(ib, prob[j1 + 2], prob[j1 + 3])};
    }
    for (int64_t dp = 0; dp < p.vBlocks / 2; ++dp) {
      SmallVector<Value> bRegs = ldmatrix4(
          ib, v,
          arith::AddIOp::create(
              ib, indexConst(ib, kk * 16),
              arith::AddIOp::create(ib, lanes->laneMid8, lanes->lane8)),
          arith::AddIOp::create(ib, colBase,
                                arith::AddIOp::create(ib,
                                                      indexConst(ib, dp * 16),
                                                      lanes->laneHi8)),
          true);
      for (int64_t h = 0; h < 2; ++h) {
        int64_t blk = 2 * dp + h;
        SmallVector<Value> res =
            mmaM16N8K16(ib, p.elem, aRegs, {bRegs[2 * h], bRegs[2 * h + 1]},
                        ArrayRef<Value>(state).slice(blk * 4, 4));
        for (int64_t i = 0; i < 4; ++i)
          state[blk * 4 + i] = res[i];
      }
    }
  }
}

/// The accumulators, maxima and (quad-reduced) sums back to their tiles;
/// with split scores the second half's row sums join the first's through
/// the correction buffer.
void FusedStep::writeBack(ImplicitLocOpBuilder &ab, ValueRange fin) {
  const int64_t nAcc = p.nAcc();
  // The accumulator tile shares memory with the operand tiles (placed by
  // mla-outline-gpu-kernels once a barrier separates their uses): a loop
  // ending in a tile skip ends in no barrier of its own.
  if (inTileSkip)
    gpu::BarrierOp::create(ab);
  for (int64_t blk = 0; blk < p.vBlocks; ++blk)
    for (int64_t i = 0; i < 4; ++i)
      memref::StoreOp::create(
          ab, fin[blk * 4 + i], acc,
          ValueRange{i < 2 ? row0 : row1, accCol(ab, blk, i & 1)});
  Value lTot[2] = {rowReduce(ab, fin[nAcc + 2], false),
                   rowReduce(ab, fin[nAcc + 3], false)};
  if (p.splitScores) {
    Value second = arith::AndIOp::create(
        ab,
        arith::CmpIOp::create(ab, arith::CmpIPredicate::eq, lanes->quadPos,
                              indexConst(ab, 0)),
        arith::CmpIOp::create(ab, arith::CmpIPredicate::eq, colPart,
                              indexConst(ab, 1)));
    guarded(ab, second, [&](ImplicitLocOpBuilder &ib) {
      for (int64_t r = 0; r < 2; ++r)
        memref::StoreOp::create(ib, lTot[r], corrBuf,
                                ValueRange{r ? row1 : row0});
    });
    gpu::BarrierOp::create(ab);
    for (int64_t r = 0; r < 2; ++r)
      lTot[r] = arith::AddFOp::create(
          ab, lTot[r],
          memref::LoadOp::create(ab, corrBuf, ValueRange{r ? row1 : row0}));
  }
  guarded(ab, owner, [&](ImplicitLocOpBuilder &ib) {
    for (int64_t r = 0; r < 2; ++r) {
      memref::StoreOp::create(ib, fin[nAcc + r], mBuf,
                              ValueRange{r ? row1 : row0});
      memref::StoreOp::create(ib, lTot[r], lBuf, ValueRange{r ? row1 : row0});
    }
  });
  gpu::BarrierOp::create(ab);
}

SmallVector<Value> FusedStep::ldmatrix4(ImplicitLocOpBuilder &ib, Value mem,
                                        Value r, Value c, bool trans) {
  Value frag = nvgpu::LdMatrixOp::create(
      ib, VectorType::get({4, 2}, p.elem), mem, ValueRange{r, c},
      ib.getBoolAttr(trans), ib.getI32IntegerAttr(4));
  SmallVector<Value> regs;
  for (int64_t i = 0; i < 4; ++i)
    regs.push_back(mmaOperand(
        ib, vector::ExtractOp::create(ib, frag, ArrayRef<int64_t>{i})));
  return regs;
}

/// Over the lanes that share an accumulator row (the instruction's C
/// layout: the four lanes of a quad).
Value FusedStep::rowReduce(ImplicitLocOpBuilder &ib, Value x, bool isMax) {
  return reduceAcrossRow(ib, scoreInstr(p), ti.warpSize, x, isMax);
}

Value FusedStep::pack(ImplicitLocOpBuilder &ib, Value lo, Value hi) {
  return mmaOperand(ib, vector::FromElementsOp::create(
                            ib, VectorType::get({2}, p.elem),
                            ValueRange{castFloat(ib, lo, p.elem),
                                       castFloat(ib, hi, p.elem)}));
}

Value FusedStep::accCol(ImplicitLocOpBuilder &ib, int64_t blk, int64_t odd) {
  return arith::AddIOp::create(
      ib, colBase,
      arith::AddIOp::create(ib, lanes->twoTg, indexConst(ib, blk * 8 + odd)));
}

/// Bytes from the start of a swizzled operand to row `extraRows` of `view`.
Value FusedStep::rowBytes(ImplicitLocOpBuilder &ib, Value view,
                          Value extraRows) {
  Value r = arith::AddIOp::create(ib, viewRow(ib, view), extraRows);
  return arith::IndexCastUIOp::create(
      ib, ib.getI64Type(), arith::MulIOp::create(ib, r, indexConst(ib, 128)));
}

/// The descriptor of element (row 0, column `col`) of a swizzled operand
/// view plus `rowBytes`.
Value FusedStep::operandDesc(ImplicitLocOpBuilder &ib, ViewInfo info,
                             Value rowBytes, int64_t col, int64_t lbo) {
  Value root = swizzled.lookup(info.root);
  int64_t c = info.col0 + col;
  int64_t off = c / 64 * info.root.getType().getDimSize(0) * 128 + c % 64 * 2;
  Value addr = arith::AddIOp::create(
      ib, sharedAddress(ib, root),
      arith::AddIOp::create(
          ib, rowBytes,
          arith::ConstantIntOp::create(ib, ib.getI64Type(), off)));
  return wgmmaDescriptor(ib, addr, lbo, 1024);
}

} // namespace

FailureOr<StepPlan> mla::nvidia::planFusedStep(const StepShape &shape,
                                               bool wgmmaAllowed, Location loc,
                                               std::string *whyNot) {
  auto refuse = [&](Location loc, const Twine &why) {
    if (whyNot)
      *whyNot = why.str();
    return ::refuse(loc, why);
  };
  StepPlan p;
  p.elem = shape.elem;
  p.rows = shape.rows;
  p.dim = shape.dim;
  p.tile = shape.tile;
  p.dv = shape.dv;
  p.warps = shape.warps;
  if (!(p.elem.isBF16() || p.elem.isF16()))
    return refuse(loc, "mma.sync takes bf16/f16 operands");
  if (p.rows % 16 || p.tile % 16 || p.dim % 16 || p.rows == 0)
    return refuse(loc, "rows, key tile and head width must be multiples of 16");
  if (p.warps % (p.rows / 16) != 0)
    return refuse(loc, "the warps do not split evenly over the 16-row blocks");
  p.rowBlocks = p.rows / 16;
  p.colSplit = p.warps / p.rowBlocks;
  // Warps that share a row block all compute its scores: measured on the
  // H200 (decode, 16 rows), four-fold redundant Q·Kᵀ (4 warps) is 1.3x
  // slower than the shared-memory phases, two-fold is not.
  if (p.colSplit > 2)
    return refuse(loc, "more than two warps per 16-row block");
  if (p.dv % (16 * p.colSplit) != 0)
    return refuse(loc, "the value width does not split over the warps of a "
                       "row block in 16-column steps");
  // Two warps per row block split the key columns of the scores (each
  // computes half, row maxima and probabilities meet in shared memory)
  // when the halves are whole 16-key steps; otherwise both compute all.
  p.splitScores = p.colSplit == 2 && p.tile % 32 == 0;
  p.sBlocks = p.splitScores ? p.tile / 16 : p.tile / 8;
  p.vBlocks = p.dv / p.colSplit / 8;
  if (p.sBlocks * 4 > 64 || p.vBlocks * 4 > 128)
    return refuse(loc, "the score or accumulator fragments would not fit the "
                       "register file");
  p.wgmma = wgmmaAllowed && p.warps % 4 == 0 && p.rowBlocks % 4 == 0 &&
            (p.colSplit == 1 || p.splitScores) && p.dim % 64 == 0 &&
            (p.dv / p.colSplit) % 64 == 0 && p.tile <= 256;
  if (wgmmaAllowed && !p.wgmma) {
    StringRef why = "needs whole warpgroups of 64 rows, 64-column head and "
                    "value blocks and at most 256 keys";
    if (whyNot)
      *whyNot = why.str();
    LLVM_DEBUG(llvm::dbgs() << "mla-distribute: no warpgroup MMA at " << loc
                            << ": " << why << "\n");
  }
  return p;
}

LogicalResult mla::nvidia::fuseAttentionStep(AttentionStepOp op,
                                             const ThreadInfo &ti) {
  FailureOr<StepPlan> plan =
      planFusedStep({op.getElementType(), op.getRows(), op.getHeadDim(),
                     op.getTileKeys(), op.getValueDim(), ti.warps()},
                    ti.wgmma, op.getLoc());
  SmallVector<Operation *> pure;
  if (failed(plan))
    return failure();
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
  FusedStep fused(op, ti, *plan);
  if (plan->wgmma)
    fused.swizzleOperands(swizzleRoots);
  for (Operation *pureOp : pure)
    pureOp->moveBefore(op);
  LLVM_DEBUG(
      llvm::dbgs() << "mla-distribute: fused attention step at " << op.getLoc()
                   << " (" << (plan->wgmma ? "wgmma" : "mma.sync") << ", "
                   << (plan->splitScores ? "split" : "whole") << " scores)\n");
  return fused.emit();
}
