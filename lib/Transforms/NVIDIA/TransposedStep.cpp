//===- TransposedStep.cpp - attention step with keys as wgmma's M ---------===//
//
// One key tile of flash attention on sm_90a for fewer than 64 query rows
// (decode's head groups: 16 heads, 32 rows with two draft tokens), by
// warpgroup MMA with both products transposed so that no row of the
// instruction's M is padding:
//
//   Sᵀ (keys x rows)  = K · Qᵀ     A = the 64-key tile (K-major), B = Q
//   Oᵀ (dv x rows)   += Vᵀ · Pᵀ    A = the value columns of the same tile
//                                  (MN-major), B = P (rows x keys)
//
// One or two warpgroups. In each, warp w holds keys 16w .. 16w + 15 of the
// scores and value columns 16w .. of each of the warpgroup's 64-column
// blocks of the accumulators (two warpgroups: each computes all scores,
// the same in both, and owns half of the value blocks, so that 32 rows'
// accumulators take 64 registers a lane instead of 128); each lane
// holds the same query rows (the columns of the C layout, the mma.sync
// m16n8 accumulator layout per warp and 8 columns) in both, so that the
// softmax's per-row maxima, corrections and sums apply to the lane's own
// accumulators. A row's maximum is taken over the lane's keys, across the
// lanes that share its column (XOR shuffles), then across the four warps
// of its warpgroup through shared memory; P (16-bit) goes to the
// warpgroup's 128-byte-swizzled tile of rows x 64 keys, the B operand of
// the second product. Accumulators, maxima and per-lane partial sums stay
// in registers across the key loop; after it, the accumulators are
// written back once (transposed) and the sums meet across lanes and
// warps.
//
// Strategy: planTransposedStep (-debug-only=mla-distribute says why not).
// The operands' layout and descriptors are Wgmma.h's.
//
//===----------------------------------------------------------------------===//
#include "../AttentionLayout.h"
#include "../GPU/MatrixEmitter.h"
#include "../Utils.h"
#include "NVIDIA.h"
#include "Wgmma.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/Debug.h"

#include <limits>

#define DEBUG_TYPE "mla-distribute"

using namespace mlir;
using namespace mla;
using namespace mla::nvidia;

namespace {

/// Keys of a tile: warpgroup MMA's M.
constexpr int64_t kTileKeys = 64;
/// Warps of the warpgroup.
constexpr int64_t kWarps = 4;

class TransposedStep {
public:
  TransposedStep(AttentionStepOp op, const ThreadInfo &ti, const StepPlan &p)
      : op(op), ti(ti), p(p), ci(p.frag->c),
        fragEm(createMatrixEmitter(*p.frag, ti)), frag(*fragEm),
        loop(stepKeyLoop(op, /*tileSkip=*/true)), q(op.getQ()), k(op.getK()),
        v(op.getV()), acc(op.getAcc()), mBuf(op.getM()), lBuf(op.getL()),
        qInfo(analyzeView(q)), kInfo(analyzeView(k)), vInfo(analyzeView(v)) {
    // A fragment's elements: their row (key) and column (query row)
    // offsets, each element's index among them.
    for (int64_t e = 0; e < ci.elems; ++e) {
      auto index = [](SmallVectorImpl<int64_t> &offs, int64_t o) {
        auto *it = llvm::find(offs, o);
        if (it == offs.end()) {
          offs.push_back(o);
          return int64_t(offs.size()) - 1;
        }
        return int64_t(it - offs.begin());
      };
      elemKey.push_back(index(keyOffsets, MatrixEmitter::elemCoord(ci.row, e)));
      elemCol.push_back(index(colOffsets, MatrixEmitter::elemCoord(ci.col, e)));
    }
    nBlocks = p.rows / p.frag->n;
    groups = p.warps / kWarps;
    mBlocks = p.dv / kTileKeys / groups;
  }

  void moveOperands(ArrayRef<memref::AllocaOp> roots) {
    swizzled = swizzleOperands(loop, roots);
  }
  LogicalResult emit();

private:
  /// Accumulator registers: mBlocks x nBlocks fragments.
  int64_t nAcc() const { return mBlocks * nBlocks * ci.elems; }
  /// Query rows a lane holds (distinct columns of its fragments).
  int64_t nRows() const { return nBlocks * int64_t(colOffsets.size()); }
  /// The lane's row index (0 .. nRows) of element `e` of n-block `j`.
  int64_t rowIdx(int64_t j, int64_t e) const {
    return j * int64_t(colOffsets.size()) + elemCol[e];
  }

  void setUp(ImplicitLocOpBuilder &b);
  SmallVector<Value> initialState(ImplicitLocOpBuilder &b);
  SmallVector<Value> step(ImplicitLocOpBuilder &ib,
                          ArrayRef<BlockArgument> args);
  SmallVector<Value> scores(ImplicitLocOpBuilder &ib);
  void values(ImplicitLocOpBuilder &ib, SmallVectorImpl<Value> &state);
  void writeBack(ImplicitLocOpBuilder &ab, ValueRange fin);
  /// The value column of element `e` of the lane's fragments in the
  /// warpgroup's 64-column block `mb`.
  Value accColumn(ImplicitLocOpBuilder &b, int64_t mb, int64_t e) {
    Value col = arith::AddIOp::create(b, keys[elemKey[e]],
                                      indexConst(b, mb * kTileKeys));
    return groups > 1 ? arith::AddIOp::create(b, col, colBase) : col;
  }
  /// `x` of each of the lane's rows combined over the warpgroup's keys:
  /// across the lanes of a column, then the warps (through `xBuf`).
  SmallVector<Value> acrossKeys(ImplicitLocOpBuilder &ib,
                                ArrayRef<Value> perLane, bool isMax);
  /// The shared byte address of element (row, col) of a swizzled operand
  /// view plus `extraRows` rows.
  Value operandAddr(ImplicitLocOpBuilder &ib, Value view, ViewInfo info,
                    Value extraRows, int64_t col);

  AttentionStepOp op;
  const ThreadInfo &ti;
  StepPlan p;
  const FragLayout &ci;
  std::unique_ptr<MatrixEmitter> fragEm;
  MatrixEmitter &frag;
  scf::ForOp loop;
  Value q, k, v, acc, mBuf, lBuf;
  ViewInfo qInfo, kInfo, vInfo;
  /// Warpgroups; each computes all scores and owns mBlocks 64-column
  /// blocks of the values.
  int64_t groups = 1, nBlocks = 0, mBlocks = 0;
  SmallVector<int64_t> keyOffsets, colOffsets, elemKey, elemCol;
  DenseMap<Operation *, Value> swizzled;
  Value pTile, xBuf;
  // setUp: the warp, its warpgroup and first warp there, the first
  // value column of the warpgroup's blocks, this lane's keys (tile rows)
  // and query rows, whether it leads its column in its warp, and owns the
  // rows' m and l.
  Value warp, group, groupWarp0, colBase;
  SmallVector<Value> keys, rows;
  Value colLead, owner, negInf;
};

/// The probability tile (rows x 64 keys per warpgroup, swizzled: wgmma's
/// B; warpgroup g's copy is column block g) and the exchange buffer of the
/// warps' per-row values, at the top of the grid.
void TransposedStep::setUp(ImplicitLocOpBuilder &b) {
  frag.beginFragments(b);
  ImplicitLocOpBuilder top = builderAtGridTop(loop.getLoc(), loop->getBlock());
  auto pt = memref::AllocaOp::create(
      top, MemRefType::get({groups, p.rows, kTileKeys}, p.elem));
  pt->setAttr(pt.getAlignmentAttrName(), top.getI64IntegerAttr(kSwizzleAlign));
  pTile = pt;
  xBuf = memref::AllocaOp::create(
      top,
      MemRefType::get({p.warps, p.rows}, Float32Type::get(b.getContext())));
  warp = frag.group;
  // One warpgroup: the warp's own index (the same IR as before there were
  // several).
  Value groupLocal = warp;
  group = groupWarp0 = colBase = indexConst(b, 0);
  if (groups > 1) {
    group = arith::DivUIOp::create(b, warp, indexConst(b, kWarps));
    groupLocal = arith::RemUIOp::create(b, warp, indexConst(b, kWarps));
    groupWarp0 = arith::MulIOp::create(b, group, indexConst(b, kWarps));
    colBase =
        arith::MulIOp::create(b, group, indexConst(b, mBlocks * kTileKeys));
  }
  Value keyBase = arith::AddIOp::create(
      b, arith::MulIOp::create(b, groupLocal, indexConst(b, p.frag->m)),
      frag.cRowLane);
  for (int64_t off : keyOffsets)
    keys.push_back(arith::AddIOp::create(b, keyBase, indexConst(b, off)));
  for (int64_t j = 0; j < nBlocks; ++j)
    for (int64_t off : colOffsets)
      rows.push_back(arith::AddIOp::create(b, frag.cColLane,
                                           indexConst(b, j * p.frag->n + off)));
  colLead = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, frag.cRowLane,
                                  indexConst(b, 0));
  owner =
      arith::AndIOp::create(b, colLead,
                            arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                                  warp, indexConst(b, 0)));
  negInf = f32Const(b, -std::numeric_limits<double>::infinity());
}

/// The accumulators (zeros when the tile was just zero-filled: the fill
/// goes), m of each of the lane's rows, l (per-lane partial sums; the
/// owner starts from l[row]).
SmallVector<Value> TransposedStep::initialState(ImplicitLocOpBuilder &b) {
  SmallVector<Value> init;
  Value zeroF = f32Const(b, 0.0);
  if (scf::ParallelOp fill = zeroFillBefore(loop, gridTile(acc))) {
    fill.erase();
    init.assign(nAcc(), zeroF);
  } else {
    for (int64_t mb = 0; mb < mBlocks; ++mb)
      for (int64_t j = 0; j < nBlocks; ++j)
        for (int64_t e = 0; e < ci.elems; ++e) {
          Value col = accColumn(b, mb, e);
          init.push_back(memref::LoadOp::create(
              b, acc, ValueRange{rows[rowIdx(j, e)], col}));
        }
  }
  appendRowState(b, mBuf, lBuf, rows, owner, init);
  return init;
}

LogicalResult TransposedStep::emit() {
  ImplicitLocOpBuilder b(loop.getLoc(), loop);
  setUp(b);
  return carryStepState(
      op, initialState(b),
      [&](ImplicitLocOpBuilder &ib, ArrayRef<BlockArgument> args) {
        return step(ib, args);
      },
      [&](ImplicitLocOpBuilder &ab, ValueRange fin) { writeBack(ab, fin); });
}

Value TransposedStep::operandAddr(ImplicitLocOpBuilder &ib, Value view,
                                  ViewInfo info, Value extraRows, int64_t col) {
  return swizzledAddress(ib, swizzled.lookup(info.root), info,
                         swizzledRowBytes(ib, view, extraRows), col);
}

/// Sᵀ = K·Qᵀ: dim / 16 wgmma m64n<rows>k16 in one group, A the key tile
/// and B the query tile, both K-major.
SmallVector<Value> TransposedStep::scores(ImplicitLocOpBuilder &ib) {
  Value zero = indexConst(ib, 0);
  SmallVector<Value> s;
  NVVM::WgmmaFenceAlignedOp::create(ib);
  for (int64_t k0 = 0; k0 < p.dim; k0 += 16)
    s = wgmma(
        ib, p.elem, p.rows, s,
        wgmmaDescriptor(ib, operandAddr(ib, k, kInfo, zero, k0), 16, 1024), {},
        wgmmaDescriptor(ib, operandAddr(ib, q, qInfo, zero, k0), 16, 1024),
        /*transB=*/false);
  NVVM::WgmmaGroupSyncAlignedOp::create(ib);
  NVVM::WgmmaWaitGroupSyncOp::create(ib, 0);
  return registerFence(ib, s);
}

SmallVector<Value> TransposedStep::acrossKeys(ImplicitLocOpBuilder &ib,
                                              ArrayRef<Value> perLane,
                                              bool isMax) {
  SmallVector<Value> x;
  for (Value v : perLane)
    x.push_back(
        reduceAcrossLanes(ib, ci.col, p.frag->lanes, ti.warpSize, v, isMax));
  guarded(ib, colLead, [&](ImplicitLocOpBuilder &gb) {
    for (auto [r, val] : llvm::zip(rows, x))
      memref::StoreOp::create(gb, val, xBuf, ValueRange{warp, r});
  });
  gpu::BarrierOp::create(ib);
  // The warps of this lane's warpgroup (each holds every key's scores).
  auto groupWarp = [&](int64_t w) -> Value {
    return groups > 1 ? arith::AddIOp::create(ib, groupWarp0, indexConst(ib, w))
                            .getResult()
                      : indexConst(ib, w);
  };
  SmallVector<Value> out;
  for (Value r : rows) {
    Value acc = memref::LoadOp::create(ib, xBuf, ValueRange{groupWarp(0), r});
    for (int64_t w = 1; w < kWarps; ++w) {
      Value o = memref::LoadOp::create(ib, xBuf, ValueRange{groupWarp(w), r});
      acc = isMax ? arith::MaximumFOp::create(ib, acc, o).getResult()
                  : arith::AddFOp::create(ib, acc, o).getResult();
    }
    out.push_back(acc);
  }
  return out;
}

/// One key tile: the scores, their element function and the rows' maxima
/// over the warpgroup, P to its tile, then acc = corr·acc + Vᵀ·Pᵀ.
SmallVector<Value> TransposedStep::step(ImplicitLocOpBuilder &ib,
                                        ArrayRef<BlockArgument> args) {
  const int64_t ce = ci.elems, nS = nBlocks * ce, na = nAcc();
  SmallVector<Value> s = scores(ib);
  SmallVector<Value> x(nS), vis(nS), mx(nRows(), negInf);
  for (int64_t j = 0; j < nBlocks; ++j)
    for (int64_t e = 0; e < ce; ++e) {
      int64_t i = j * ce + e, r = rowIdx(j, e);
      SmallVector<Value> res =
          inlineStepElement(ib, op, {rows[r], keys[elemKey[e]], s[i]});
      x[i] = res[0];
      vis[i] = res[1];
      mx[r] = arith::MaximumFOp::create(
          ib, mx[r], arith::SelectOp::create(ib, vis[i], x[i], negInf));
    }
  mx = acrossKeys(ib, mx, /*isMax=*/true);
  RowUpdate u = updateRows(
      ib, ValueRange(ArrayRef<BlockArgument>(args).slice(na, nRows())), mx,
      negInf);
  const SmallVector<Value> &mNew = u.mNew, &ref = u.ref, &corr = u.corr;
  SmallVector<Value> sum(nRows(), f32Const(ib, 0.0));
  for (int64_t j = 0; j < nBlocks; ++j)
    for (int64_t e = 0; e < ce; ++e) {
      int64_t i = j * ce + e, r = rowIdx(j, e);
      Value ex = stepExp2(ib, x[i], ref[r]);
      Value prob = arith::SelectOp::create(ib, vis[i], ex, f32Const(ib, 0.0));
      sum[r] = arith::AddFOp::create(ib, sum[r], prob);
      Value key = keys[elemKey[e]];
      if (groups > 1)
        key = arith::AddIOp::create(
            ib, key,
            arith::MulIOp::create(ib, group, indexConst(ib, kTileKeys)));
      SmallVector<Value> at = swizzledIndex(ib, rows[r], key);
      memref::StoreOp::create(ib, castFloat(ib, prob, p.elem), pTile, at);
    }
  // P is read by the tensor cores (the async proxy: applySwizzle fences
  // every barrier).
  gpu::BarrierOp::create(ib);
  SmallVector<Value> state;
  for (int64_t mb = 0; mb < mBlocks; ++mb)
    for (int64_t j = 0; j < nBlocks; ++j)
      for (int64_t e = 0; e < ce; ++e) {
        int64_t a = (mb * nBlocks + j) * ce + e;
        state.push_back(arith::MulFOp::create(ib, args[a], corr[rowIdx(j, e)]));
      }
  values(ib, state);
  for (int64_t r = 0; r < nRows(); ++r)
    state.push_back(mNew[r]);
  for (int64_t r = 0; r < nRows(); ++r)
    state.push_back(arith::AddFOp::create(
        ib, arith::MulFOp::create(ib, args[na + nRows() + r], corr[r]),
        sum[r]));
  // The next iteration's copies overwrite the key tile, its scores P.
  gpu::BarrierOp::create(ib);
  return state;
}

/// Oᵀ += Vᵀ·Pᵀ: for each 64-column block of values, tile / 16 wgmma
/// m64n<rows>k16 with A the block's columns of 16 keys (MN-major: 64-column
/// blocks R·128 bytes apart, 8-key groups 1024) and B the probability tile
/// (K-major).
void TransposedStep::values(ImplicitLocOpBuilder &ib,
                            SmallVectorImpl<Value> &state) {
  const int64_t per = nBlocks * ci.elems;
  SmallVector<Value> regs = registerFence(ib, state);
  const int64_t vRootRows = vInfo.root.getType().getDimSize(0);
  Value pAddr = sharedAddress(ib, pTile);
  // The warpgroup's copy of P and its value blocks: whole column blocks
  // of the swizzled tiles further on.
  Value vGroup;
  if (groups > 1) {
    auto times = [&](int64_t bytes) -> Value {
      return arith::MulIOp::create(
          ib, arith::IndexCastUIOp::create(ib, ib.getI64Type(), group),
          arith::ConstantIntOp::create(ib, ib.getI64Type(), bytes));
    };
    pAddr = arith::AddIOp::create(ib, pAddr, times(swizzledBlockBytes(p.rows)));
    vGroup = times(mBlocks * swizzledBlockBytes(vRootRows));
  }
  NVVM::WgmmaFenceAlignedOp::create(ib);
  for (int64_t mb = 0; mb < mBlocks; ++mb) {
    SmallVector<Value> blk(regs.begin() + mb * per,
                           regs.begin() + (mb + 1) * per);
    for (int64_t kk = 0; kk < p.tile / 16; ++kk) {
      Value aAddr =
          operandAddr(ib, v, vInfo, indexConst(ib, kk * 16), mb * kTileKeys);
      if (vGroup)
        aAddr = arith::AddIOp::create(ib, aAddr, vGroup);
      Value bAddr = arith::AddIOp::create(
          ib, pAddr,
          arith::ConstantIntOp::create(ib, ib.getI64Type(), kk * 32));
      blk =
          wgmma(ib, p.elem, p.rows, blk,
                wgmmaDescriptor(ib, aAddr, swizzledBlockBytes(vRootRows), 1024),
                {}, wgmmaDescriptor(ib, bAddr, 16, 1024), /*transB=*/false,
                /*transA=*/true);
    }
    llvm::copy(blk, regs.begin() + mb * per);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(ib);
  NVVM::WgmmaWaitGroupSyncOp::create(ib, 0);
  SmallVector<Value> done = registerFence(ib, regs);
  state.assign(done.begin(), done.end());
}

/// The accumulators back to their tile (row = query row, column = value
/// column), the rows' sums over the warpgroup, m and l by their owner.
void TransposedStep::writeBack(ImplicitLocOpBuilder &ab, ValueRange fin) {
  const int64_t na = nAcc();
  // The accumulator tile shares memory with the operand tiles (placed by
  // mla-outline-gpu-kernels once a barrier separates their uses): a loop
  // ending in a tile skip ends in no barrier of its own, and copies may
  // still be in flight (a pipelined loop's past its end; the queries' copy
  // where the loop ran no iteration): waitAllAsyncCopies.
  waitAllAsyncCopies(ab);
  gpu::BarrierOp::create(ab);
  for (int64_t mb = 0; mb < mBlocks; ++mb)
    for (int64_t j = 0; j < nBlocks; ++j)
      for (int64_t e = 0; e < ci.elems; ++e) {
        Value col = accColumn(ab, mb, e);
        memref::StoreOp::create(ab, fin[(mb * nBlocks + j) * ci.elems + e], acc,
                                ValueRange{rows[rowIdx(j, e)], col});
      }
  SmallVector<Value> lPart(fin.begin() + na + nRows(),
                           fin.begin() + na + 2 * nRows());
  SmallVector<Value> lTot = acrossKeys(ab, lPart, /*isMax=*/false);
  guarded(ab, owner, [&](ImplicitLocOpBuilder &gb) {
    for (int64_t r = 0; r < nRows(); ++r) {
      memref::StoreOp::create(gb, fin[na + r], mBuf, ValueRange{rows[r]});
      memref::StoreOp::create(gb, lTot[r], lBuf, ValueRange{rows[r]});
    }
  });
  gpu::BarrierOp::create(ab);
}

LogicalResult refuse(AttentionStepOp op, const Twine &why) {
  LLVM_DEBUG(llvm::dbgs() << "mla-distribute: no transposed attention step at "
                          << op.getLoc() << ": " << why << "\n");
  return failure();
}

} // namespace

FailureOr<StepPlan> mla::nvidia::planTransposedStep(const StepShape &shape,
                                                    bool wgmmaAllowed,
                                                    std::string *whyNot) {
  auto no = [&](StringRef why) -> FailureOr<StepPlan> {
    if (whyNot)
      *whyNot = why.str();
    return failure();
  };
  if (!wgmmaAllowed)
    return no("warpgroup MMA is not allowed");
  if (!(shape.elem.isBF16() || shape.elem.isF16()))
    return no("needs bf16/f16 operands");
  if (shape.rows % 8 || shape.rows == 0 || shape.rows >= 64)
    return no("needs fewer than 64 query rows in steps of 8");
  if ((shape.warps != kWarps && shape.warps != 2 * kWarps) ||
      shape.tile != kTileKeys)
    return no("needs one or two warpgroups (warps=4 or 8) and 64-key tiles "
              "(tile_kv=64)");
  const int64_t groups = shape.warps / kWarps;
  if (shape.dim % 64 || shape.dv % (64 * groups))
    return no("needs head widths in 64-column blocks and value widths in "
              "64-column blocks for each warpgroup");
  // Accumulators: dv / 64 / groups blocks of rows / 8 fragments of 4 per
  // lane.
  if (shape.dv / 64 / groups * shape.rows / 8 * 4 > 128)
    return no("needs value width x rows at most 4096 per warpgroup (the "
              "accumulators in registers)");
  StepPlan p = stepPlanOf(shape);
  p.frag = &mmaSyncInstr(p.elem);
  p.rowBlocks = 1;
  p.colSplit = 1;
  p.splitScores = false;
  p.sBlocks = p.rows / p.frag->n;
  p.vBlocks = p.dv / kTileKeys / groups * p.sBlocks;
  p.wgmma = true;
  p.transposed = true;
  return p;
}

LogicalResult mla::nvidia::fuseTransposedStep(AttentionStepOp op,
                                              const ThreadInfo &ti,
                                              const StepPlan &plan) {
  SmallVector<Operation *> pure;
  if (std::string why; failed(checkStepLoop(op, pure, why, /*tileSkip=*/true)))
    return refuse(op, why);
  SmallVector<memref::AllocaOp> roots;
  if (!canUseSwizzledOperands(op, roots))
    return refuse(op, "the query, key or value tile cannot take the swizzled "
                      "layout");
  TransposedStep step(op, ti, plan);
  step.moveOperands(roots);
  for (Operation *pureOp : pure)
    pureOp->moveBefore(op);
  LLVM_DEBUG(llvm::dbgs() << "mla-distribute: transposed attention step at "
                          << op.getLoc() << " (wgmma, keys as M)\n");
  return step.emit();
}
