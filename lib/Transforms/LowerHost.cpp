//===- LowerHost.cpp - mla-lower-host -------------------------------------===//
//
// Host lowering of blockwise ops. mla.matmul becomes loops whose innermost
// level is a 16-wide (or narrower) f32 vector FMA over the contiguous dim:
//   transpose_b (Q·Kᵀ): per (m, n) a vector dot product along k, reduced;
//   otherwise   (P·V) : per (m, k) a broadcast of A[m, k] times row B[k, :].
// The masked-copy idiom `store(cond ? load : 0)` of 16-bit floats becomes
// `store(0); if (cond) store(load)`: x86 has no bf16 vector registers, and
// LLVM would convert a bf16 phi through f32 with library calls.
//
//===----------------------------------------------------------------------===//
#include "Utils.h"
#include "mla/Transforms/Passes.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"

#define DEBUG_TYPE "mla-lower-host"

namespace mla {
#define GEN_PASS_DEF_MLALOWERHOST
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
void lowerMatmul(MatmulOp op) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  auto aType = op.getA().getType(), bType = op.getB().getType();
  Type f32 = b.getF32Type();
  const int64_t m = aType.getDimSize(0), k = aType.getDimSize(1);
  const int64_t n = op.getC().getType().getDimSize(1);
  Value c0 = indexConst(b, 0), c1 = indexConst(b, 1);
  Value cM = indexConst(b, m), cN = indexConst(b, n), cK = indexConst(b, k);

  if (op.getTransposeB()) {
    const int64_t vw = vectorWidthFor(k);
    auto vecF32 = VectorType::get({vw}, f32);
    Value zero = arith::ConstantOp::create(
        b, vecF32, DenseElementsAttr::get(vecF32, b.getF32FloatAttr(0.0)));
    forLoop(b, c0, cM, c1, [&](ImplicitLocOpBuilder &ib, Value i) {
      forLoop(ib, c0, cN, c1, [&](ImplicitLocOpBuilder &jb, Value j) {
        auto loop = scf::ForOp::create(
            jb, c0, cK, indexConst(jb, vw), ValueRange{zero},
            [&](OpBuilder &nb, Location loc, Value kk, ValueRange args) {
              ImplicitLocOpBuilder kb(loc, nb);
              Value av = castFloat(
                  kb,
                  vector::LoadOp::create(
                      kb, VectorType::get({vw}, aType.getElementType()),
                      op.getA(), ValueRange{i, kk}),
                  f32);
              Value bv = castFloat(
                  kb,
                  vector::LoadOp::create(
                      kb, VectorType::get({vw}, bType.getElementType()),
                      op.getB(), ValueRange{j, kk}),
                  f32);
              scf::YieldOp::create(
                  kb, ValueRange{vector::FMAOp::create(kb, av, bv, args[0])});
            });
        Value dot = vector::ReductionOp::create(jb, vector::CombiningKind::ADD,
                                                loop.getResult(0));
        if (op.getAccumulate()) {
          Value old = memref::LoadOp::create(jb, op.getC(), ValueRange{i, j});
          if (op.getCScale())
            old = arith::MulFOp::create(
                jb, old,
                memref::LoadOp::create(jb, op.getCScale(), ValueRange{i}));
          dot = arith::AddFOp::create(jb, dot, old);
        }
        memref::StoreOp::create(jb, dot, op.getC(), ValueRange{i, j});
      });
    });
    op.erase();
    return;
  }

  const int64_t vw = vectorWidthFor(n);
  auto vecF32 = VectorType::get({vw}, f32);
  auto vecB = VectorType::get({vw}, bType.getElementType());
  Value cVw = indexConst(b, vw);
  if (!op.getAccumulate())
    fillBuffer(b, op.getC(), 0.0);
  forLoop(b, c0, cM, c1, [&](ImplicitLocOpBuilder &ib, Value i) {
    if (Value scale = op.getCScale()) {
      // Row rescale first: C[i, :] *= c_scale[i].
      Value sv = vector::BroadcastOp::create(
          ib, vecF32, memref::LoadOp::create(ib, scale, ValueRange{i}));
      forLoop(ib, c0, cN, cVw, [&](ImplicitLocOpBuilder &jb, Value j) {
        Value cv =
            vector::LoadOp::create(jb, vecF32, op.getC(), ValueRange{i, j});
        vector::StoreOp::create(jb, arith::MulFOp::create(jb, cv, sv),
                                op.getC(), ValueRange{i, j});
      });
    }
    forLoop(ib, c0, cK, c1, [&](ImplicitLocOpBuilder &kb, Value kk) {
      Value a = castFloat(
          kb, memref::LoadOp::create(kb, op.getA(), ValueRange{i, kk}), f32);
      Value av = vector::BroadcastOp::create(kb, vecF32, a);
      forLoop(kb, c0, cN, cVw, [&](ImplicitLocOpBuilder &jb, Value j) {
        Value bv = castFloat(
            jb, vector::LoadOp::create(jb, vecB, op.getB(), ValueRange{kk, j}),
            f32);
        Value cv =
            vector::LoadOp::create(jb, vecF32, op.getC(), ValueRange{i, j});
        vector::StoreOp::create(jb, vector::FMAOp::create(jb, av, bv, cv),
                                op.getC(), ValueRange{i, j});
      });
    });
  });
  op.erase();
}

/// `store(cond ? v : zeros)` of a 16-bit float vector becomes `store(zeros);
/// if (cond) store(v)`: no 16-bit float value crosses control flow.
void storeInBranch(vector::StoreOp store) {
  auto ifOp = store.getValueToStore().getDefiningOp<scf::IfOp>();
  VectorType vt = store.getVectorType();
  if (!ifOp || ifOp.getNumResults() != 1 || ifOp.getElseRegion().empty() ||
      !ifOp->getResult(0).hasOneUse() || !isa<FloatType>(vt.getElementType()) ||
      vt.getElementTypeBitWidth() != 16)
    return;
  auto elseYield = cast<scf::YieldOp>(ifOp.elseBlock()->getTerminator());
  DenseElementsAttr zeros;
  if (!matchPattern(elseYield.getOperand(0), m_Constant(&zeros)) ||
      !zeros.isSplat() ||
      !cast<FloatAttr>(zeros.getSplatValue<Attribute>()).getValue().isZero())
    return;
  // The store's memref and indices must be available before the if.
  for (Value v : store->getOperands())
    if (v != ifOp.getResult(0) && v.getDefiningOp() &&
        v.getParentBlock() == store->getBlock() &&
        !v.getDefiningOp()->isBeforeInBlock(ifOp))
      return;
  OpBuilder b(ifOp);
  Value zeroVec = arith::ConstantOp::create(b, store.getLoc(), zeros);
  vector::StoreOp::create(b, store.getLoc(), zeroVec, store.getBase(),
                          store.getIndices());
  auto newIf = scf::IfOp::create(b, ifOp.getLoc(), TypeRange{},
                                 ifOp.getCondition(), /*withElse=*/false);
  Block *thenBlock = newIf.thenBlock();
  thenBlock->getTerminator()->erase();
  thenBlock->getOperations().splice(thenBlock->end(),
                                    ifOp.thenBlock()->getOperations());
  auto yield = cast<scf::YieldOp>(thenBlock->getTerminator());
  b.setInsertionPoint(yield);
  vector::StoreOp::create(b, store.getLoc(), yield.getOperand(0),
                          store.getBase(), store.getIndices());
  yield->setOperands({});
  store.erase();
  ifOp.erase();
}

/// The vector loads and stores of lowerMatmul run along the innermost dim
/// of every operand: it must have unit stride (vector.load's rule).
LogicalResult checkContiguousRows(MatmulOp op) {
  auto names = {"A", "B", "C"};
  Value operands[] = {op.getA(), op.getB(), op.getC()};
  for (auto [name, value] : llvm::zip(names, operands))
    if (!cast<MemRefType>(value.getType()).isLastDimUnitStride())
      return op.emitOpError("operand ")
             << name
             << " needs a unit stride in its last dim on the host (rows are "
                "loaded and stored as vectors)";
  return success();
}

struct LowerHostPass : public mla::impl::MLALowerHostBase<LowerHostPass> {
  void runOnOperation() override {
    SmallVector<vector::StoreOp> stores;
    getOperation().walk([&](vector::StoreOp op) { stores.push_back(op); });
    for (vector::StoreOp op : stores)
      storeInBranch(op);
    SmallVector<MatmulOp> ops;
    getOperation().walk([&](MatmulOp op) { ops.push_back(op); });
    for (MatmulOp op : ops)
      if (failed(checkContiguousRows(op)))
        return signalPassFailure();
    for (MatmulOp op : ops)
      lowerMatmul(op);
  }
};
} // namespace
