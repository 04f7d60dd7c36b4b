//===- MatrixEmitter.cpp - mla.matmul once, for every instruction ---------===//
#include "MatrixEmitter.h"
#include "../AMD/AMD.h"
#include "../NVIDIA/MmaSync.h"
#include "../NVIDIA/Wgmma.h"
#include "../Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

#include "llvm/Support/Debug.h"
#include "llvm/Support/MathExtras.h"

#define DEBUG_TYPE "mla-distribute"

using namespace mlir;
using namespace mla;

void MatrixEmitter::begin(ImplicitLocOpBuilder &b, MatmulOp) { beginLanes(b); }

void MatrixEmitter::beginLanes(ImplicitLocOpBuilder &b) {
  if (groupSize() == 1) {
    group = ti.tid;
    lane = Value();
    return;
  }
  group = arith::DivUIOp::create(b, ti.tid, indexConst(b, groupSize()));
  lane = arith::RemUIOp::create(b, ti.tid, indexConst(b, groupSize()));
}

void MatrixEmitter::beginFragments(ImplicitLocOpBuilder &b) {
  beginLanes(b);
  cRowLane = laneCoord(b, instr.c.row);
  cColLane = laneCoord(b, instr.c.col);
}

Value MatrixEmitter::laneCoord(
    ImplicitLocOpBuilder &b,
    const LayoutTerm (&terms)[FragLayout::kMaxTerms]) const {
  Value sum;
  for (const LayoutTerm &t : terms) {
    if (t.mod == 0 || t.source != LayoutTerm::L || t.mul == 0)
      continue;
    Value v = lane;
    if (t.div > 1)
      v = arith::DivUIOp::create(b, v, indexConst(b, t.div));
    // lane < lanes: the modulo is a no-op when div * mod covers them all.
    if (int64_t(t.div) * t.mod < groupSize())
      v = arith::RemUIOp::create(b, v, indexConst(b, t.mod));
    if (t.mul != 1)
      v = arith::MulIOp::create(b, v, indexConst(b, t.mul));
    sum = sum ? arith::AddIOp::create(b, sum, v).getResult() : v;
  }
  return sum;
}

int64_t
MatrixEmitter::elemCoord(const LayoutTerm (&terms)[FragLayout::kMaxTerms],
                         int64_t e) {
  int64_t c = 0;
  for (const LayoutTerm &t : terms)
    if (t.source == LayoutTerm::E)
      c += t.eval(0, e);
  return c;
}

AccTile MatrixEmitter::accTile(ImplicitLocOpBuilder &b, Value tile, int64_t m,
                               int64_t n) {
  const FragLayout &c = instr.c;
  Value cNt = indexConst(b, n / instr.n);
  auto origin = [&](Value idx, int64_t size) -> Value {
    return size == 1
               ? idx
               : arith::MulIOp::create(b, idx, indexConst(b, size)).getResult();
  };
  AccTile t;
  t.m0 = origin(arith::DivUIOp::create(b, tile, cNt), instr.m);
  t.n0 = origin(arith::RemUIOp::create(b, tile, cNt), instr.n);
  Value rowLane = laneCoord(b, c.row), colLane = laneCoord(b, c.col);
  Value rowBase =
      rowLane ? arith::AddIOp::create(b, t.m0, rowLane).getResult() : t.m0;
  Value colBase =
      colLane ? arith::AddIOp::create(b, t.n0, colLane).getResult() : t.n0;
  DenseMap<int64_t, Value> rows, cols, oks;
  auto at = [&](DenseMap<int64_t, Value> &cache, Value base, int64_t off) {
    Value &v = cache[off];
    if (!v)
      v = off == 0
              ? base
              : arith::AddIOp::create(b, base, indexConst(b, off)).getResult();
    return v;
  };
  const bool full = m % instr.m == 0;
  Value always = arith::ConstantIntOp::create(b, 1, 1);
  for (int64_t e = 0; e < c.elems; ++e) {
    int64_t r = elemCoord(c.row, e);
    t.rows.push_back(at(rows, rowBase, r));
    t.cols.push_back(at(cols, colBase, elemCoord(c.col, e)));
    Value &ok = oks[r];
    if (!ok)
      ok = full ? always
                : arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                        t.rows.back(), indexConst(b, m))
                      .getResult();
    t.ok.push_back(ok);
  }
  return t;
}

/// The lane bits (below `lanes`) that no term of `terms` reads.
static uint64_t unreadLaneBits(const LayoutTerm (&terms)[FragLayout::kMaxTerms],
                               int64_t lanes) {
  uint64_t used = 0;
  for (const LayoutTerm &t : terms)
    if (t.mod != 0 && t.source == LayoutTerm::L && t.mul != 0)
      for (int64_t bit = llvm::Log2_64(t.div);
           bit < llvm::Log2_64(int64_t(t.div) * t.mod); ++bit)
        used |= uint64_t(1) << bit;
  return ~used & (llvm::PowerOf2Ceil(lanes) - 1);
}

Value MatrixEmitter::rowLeader(ImplicitLocOpBuilder &b) const {
  uint64_t bits =
      unreadLaneBits(instr.c.row, std::min<int64_t>(groupSize(), ti.warpSize));
  if (bits == 0 || !lane)
    return arith::ConstantIntOp::create(b, 1, 1);
  // Low bits: lane % 2^n (as the column's lane part computes it).
  Value low =
      llvm::isMask_64(bits)
          ? arith::RemUIOp::create(b, lane, indexConst(b, bits + 1)).getResult()
          : arith::AndIOp::create(b, lane, indexConst(b, bits)).getResult();
  return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, low,
                               indexConst(b, 0));
}

Value mla::reduceAcrossLanes(ImplicitLocOpBuilder &b,
                             const LayoutTerm (&terms)[FragLayout::kMaxTerms],
                             int64_t lanes, int64_t warpSize, Value x,
                             bool isMax, bool maxNum) {
  // Shuffles cross the lane bits the coordinate does not read.
  const uint64_t unread = unreadLaneBits(terms, lanes);
  for (int64_t off = 1; off < std::min(lanes, warpSize); off *= 2) {
    if (!(unread & uint64_t(off)))
      continue;
    Value other = gpu::ShuffleOp::create(b, x, int32_t(off), warpSize,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    if (!isMax)
      x = arith::AddFOp::create(b, x, other);
    else if (maxNum)
      x = arith::MaxNumFOp::create(b, x, other);
    else
      x = arith::MaximumFOp::create(b, x, other);
  }
  return x;
}

namespace {

/// One thread, one element: f32 fused multiply-adds on operands of any
/// float type.
class ScalarFmaEmitter : public MatrixEmitter {
public:
  using MatrixEmitter::MatrixEmitter;
  SmallVector<Value> step(ImplicitLocOpBuilder &b, MatmulOp op,
                          const AccTile &t, Value k0, ValueRange acc) override {
    Type f32 = b.getF32Type();
    Value a = castFloat(
        b, memref::LoadOp::create(b, op.getA(), ValueRange{t.rows[0], k0}),
        f32);
    Value bv = castFloat(
        b,
        memref::LoadOp::create(b, op.getB(),
                               op.getTransposeB() ? ValueRange{t.cols[0], k0}
                                                  : ValueRange{k0, t.cols[0]}),
        f32);
    return {math::FmaOp::create(b, a, bv, acc[0])};
  }
};

Value scaleRow(ImplicitLocOpBuilder &b, MatmulOp op, Value v, Value row) {
  if (!op.getCScale())
    return v;
  return arith::MulFOp::create(
      b, v, memref::LoadOp::create(b, op.getCScale(), ValueRange{row}));
}

/// The accumulators of `t` from C (rows past M as 0), optionally scaled by
/// c_scale.
SmallVector<Value> loadC(ImplicitLocOpBuilder &b, MatmulOp op, const AccTile &t,
                         bool scale) {
  Value zero = f32Const(b, 0.0);
  SmallVector<Value> out;
  for (size_t e = 0; e < t.rows.size(); ++e)
    out.push_back(guardedValue(b, t.ok[e], zero, [&](ImplicitLocOpBuilder &ib) {
      Value v = memref::LoadOp::create(ib, op.getC(),
                                       ValueRange{t.rows[e], t.cols[e]});
      return scale ? scaleRow(ib, op, v, t.rows[e]) : v;
    }));
  return out;
}

/// The accumulators back to C, one guard per run of elements in the same
/// rows.
void storeC(ImplicitLocOpBuilder &b, Value c, const AccTile &t,
            ArrayRef<Value> acc) {
  for (size_t e = 0; e < acc.size();) {
    size_t end = e + 1;
    while (end < acc.size() && t.ok[end] == t.ok[e])
      ++end;
    guarded(b, t.ok[e], [&](ImplicitLocOpBuilder &ib) {
      for (size_t i = e; i < end; ++i)
        memref::StoreOp::create(ib, acc[i], c,
                                ValueRange{t.rows[i], t.cols[i]});
    });
    e = end;
  }
}

/// acc += A(tile rows) · B(tile columns), walking K in the instruction's
/// steps.
SmallVector<Value> product(ImplicitLocOpBuilder &b, MatmulOp op,
                           MatrixEmitter &em, const AccTile &t,
                           ArrayRef<Value> init) {
  int64_t k = op.getA().getType().getDimSize(1);
  auto kLoop = scf::ForOp::create(
      b, indexConst(b, 0), indexConst(b, k), indexConst(b, em.instr.k),
      em.packAcc(b, init),
      [&](OpBuilder &nb, Location loc, Value k0, ValueRange acc) {
        ImplicitLocOpBuilder kb(loc, nb);
        scf::YieldOp::create(kb, em.step(kb, op, t, k0, acc));
      });
  return em.unpackAcc(b, kLoop.getResults());
}

/// The accumulating product at the end of a loop whose C tile nothing else
/// in the loop touches (the P·V of the online softmax): the accumulators
/// stay in registers across the loop's iterations, loaded once before it
/// and stored once after it (followed by a barrier), instead of a
/// shared-memory round trip per iteration. Needs full tiles spread evenly
/// over the groups.
LogicalResult hoistAccumulator(MatmulOp op, MatrixEmitter &em) {
  auto loop = dyn_cast<scf::ForOp>(op->getParentOp());
  if (!loop || !op.getAccumulate() ||
      op->getNextNode() != loop.getBody()->getTerminator()) {
    LLVM_DEBUG(llvm::dbgs()
               << "mla-distribute: accumulator of the matmul at " << op.getLoc()
               << " not hoisted: not an accumulating product at "
                  "the end of a loop body\n");
    return failure();
  }
  // Nothing else in the loop may touch C's buffer.
  Value root = op.getC();
  while (auto sub = root.getDefiningOp<memref::SubViewOp>())
    root = sub.getSource();
  bool otherUse = false;
  loop.walk([&](Operation *user) {
    if (user == op.getOperation())
      return;
    for (Value v : user->getOperands()) {
      Value r = v;
      while (auto sub = r.getDefiningOp<memref::SubViewOp>())
        r = sub.getSource();
      if (r == root && isa<MemRefType>(v.getType()))
        otherUse = true;
    }
  });
  const int64_t m = op.getA().getType().getDimSize(0);
  const int64_t n = op.getC().getType().getDimSize(1);
  const int64_t tiles = (m / em.instr.m) * (n / em.instr.n);
  if (otherUse || m % em.instr.m != 0 || tiles % em.groups() != 0) {
    LLVM_DEBUG(llvm::dbgs()
               << "mla-distribute: accumulator of the matmul at " << op.getLoc()
               << " not hoisted: "
               << (otherUse ? "the loop touches its C tile elsewhere"
                            : "its tiles do not spread evenly over the "
                              "instruction's groups")
               << "\n");
    return failure();
  }
  ImplicitLocOpBuilder b(loop.getLoc(), loop);
  em.begin(b, op);
  const int64_t perGroup = tiles / em.groups(), elems = em.instr.c.elems;
  auto fragType = VectorType::get({perGroup * elems}, b.getF32Type());
  auto tileOf = [&](ImplicitLocOpBuilder &ib, int64_t i) {
    AccTile t = em.accTile(
        ib,
        arith::AddIOp::create(ib, em.group, indexConst(ib, i * em.groups())), m,
        n);
    em.beginTile(ib, op, t);
    return t;
  };
  // Before the loop: this group's accumulators from C.
  SmallVector<Value> init;
  for (int64_t i = 0; i < perGroup; ++i)
    llvm::append_range(init, loadC(b, op, tileOf(b, i), /*scale=*/false));
  Value initVec = vector::FromElementsOp::create(b, fragType, init);
  IRRewriter rewriter(loop.getContext());
  FailureOr<LoopLikeOpInterface> newLoop = loop.replaceWithAdditionalYields(
      rewriter, ValueRange{initVec}, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &, Location loc, ArrayRef<BlockArgument> args) {
        ImplicitLocOpBuilder ib(loc, op);
        Value frags = args[0];
        for (int64_t i = 0; i < perGroup; ++i) {
          AccTile t = tileOf(ib, i);
          SmallVector<Value> acc;
          for (int64_t j = 0; j < elems; ++j)
            acc.push_back(
                scaleRow(ib, op,
                         vector::ExtractOp::create(
                             ib, frags, ArrayRef<int64_t>{i * elems + j}),
                         t.rows[j]));
          SmallVector<Value> res = product(ib, op, em, t, acc);
          for (int64_t j = 0; j < elems; ++j)
            frags = vector::InsertOp::create(ib, res[j], frags,
                                             ArrayRef<int64_t>{i * elems + j});
        }
        return SmallVector<Value>{frags};
      });
  if (failed(newLoop))
    return failure();
  // The barrier mla-distribute puts after a matmul still separates this
  // iteration's reads of B from the next iteration's copies into it.
  Value c = op.getC();
  ImplicitLocOpBuilder inB(op.getLoc(), op);
  gpu::BarrierOp::create(inB);
  op.erase();
  // After the loop (the old loop is gone): the accumulators back to C,
  // visible to all threads.
  ImplicitLocOpBuilder ab((*newLoop)->getLoc(), (*newLoop)->getContext());
  ab.setInsertionPointAfter(*newLoop);
  Value frags = (*newLoop)->getResults().back();
  for (int64_t i = 0; i < perGroup; ++i) {
    SmallVector<Value> acc;
    for (int64_t j = 0; j < elems; ++j)
      acc.push_back(vector::ExtractOp::create(
          ab, frags, ArrayRef<int64_t>{i * elems + j}));
    storeC(ab, c, tileOf(ab, i), acc);
  }
  gpu::BarrierOp::create(ab);
  return success();
}

} // namespace

std::unique_ptr<MatrixEmitter> mla::createMatrixEmitter(const MatrixInstr &mi,
                                                        const ThreadInfo &ti) {
  switch (mi.vendor) {
  case MatrixVendor::NVIDIA:
    if (mi.scope == MatrixScope::Warpgroup)
      return nvidia::createWgmmaEmitter(mi, ti);
    return nvidia::createMmaSyncEmitter(mi, ti);
  case MatrixVendor::AMD:
    return amd::createMfmaEmitter(mi, ti);
  case MatrixVendor::Any:
    break;
  }
  return std::make_unique<ScalarFmaEmitter>(mi, ti);
}

void mla::lowerMatmul(MatmulOp op, MatrixEmitter &em) {
  if (em.keepsAccumulatorsInLoops() && succeeded(hoistAccumulator(op, em)))
    return;
  ImplicitLocOpBuilder b(op.getLoc(), op);
  em.begin(b, op);
  const int64_t m = op.getA().getType().getDimSize(0);
  const int64_t n = op.getC().getType().getDimSize(1);
  const int64_t tiles = llvm::divideCeil(m, em.instr.m) * (n / em.instr.n);
  forLoop(b, em.group, indexConst(b, tiles), indexConst(b, em.groups()),
          [&](ImplicitLocOpBuilder &tb, Value tileIdx) {
            AccTile t = em.accTile(tb, tileIdx, m, n);
            em.beginTile(tb, op, t);
            SmallVector<Value> init =
                op.getAccumulate()
                    ? loadC(tb, op, t, /*scale=*/true)
                    : SmallVector<Value>(em.instr.c.elems, f32Const(tb, 0.0));
            storeC(tb, op.getC(), t, product(tb, op, em, t, init));
          });
  gpu::BarrierOp::create(b);
  op.erase();
}
