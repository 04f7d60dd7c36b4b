//===- ExpandSoftmax.cpp - mla-expand-softmax -----------------------------===//
//
// mla.attention_step as its three blockwise parts (Q·Kᵀ, online softmax,
// P·V over scratch tiles), then mla.online_softmax as four parallel phases
// over (row, 8-column chunk) and rows, so that every thread of a GPU
// workgroup (or every vector lane of the host loops) has work:
//   1. chunk maxima of the visible logits,
//   2. row maxima, the reference (0 while a row has seen nothing, so that
//      exp2(-inf - ref) = 0 instead of NaN) and the correction,
//   3. chunk exponentials, stored to P, and their sums,
//   4. row sums: l = l * corr + sum.
// Each phase evaluates the op's element function inline.
//
//===----------------------------------------------------------------------===//
#include "ExpandSoftmax.h"
#include "AttentionLayout.h"
#include "Utils.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <limits>

namespace mla {
#define GEN_PASS_DEF_MLAEXPANDSOFTMAX
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kChunk = 8;
} // namespace

void mla::expandOnlineSoftmax(OnlineSoftmaxOp op) {
  MemRefType sType = op.getS().getType();
  const int64_t rows = sType.getDimSize(0), cols = sType.getDimSize(1);
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  Type f32 = Float32Type::get(op.getContext());
  Type pElem = op.getP().getType().getElementType();
  ImplicitLocOpBuilder top = builderAtGridTop(op.getLoc(), op->getBlock());
  Value partial =
      memref::AllocaOp::create(top, MemRefType::get({rows, chunks}, f32));
  Value refBuf = memref::AllocaOp::create(top, MemRefType::get({rows}, f32));

  ImplicitLocOpBuilder b(op.getLoc(), op);
  Value c0 = indexConst(b, 0), c1 = indexConst(b, 1);
  Value cRows = indexConst(b, rows), cChunks = indexConst(b, chunks);
  Value cChunk = indexConst(b, kChunk), cCols = indexConst(b, cols);
  Value negInf = f32Const(b, -std::numeric_limits<double>::infinity());
  Value zeroF = f32Const(b, 0.0);
  Value s = op.getS(), p = op.getP(), mBuf = op.getM(), lBuf = op.getL(),
        corrBuf = op.getCorr();
  // The logit of (row, c) and whether it is visible; columns past the tile
  // (a chunk that overhangs it) are not.
  auto element = [&](ImplicitLocOpBuilder &cb, Value row,
                     Value c) -> std::pair<Value, Value> {
    Value inTile =
        arith::CmpIOp::create(cb, arith::CmpIPredicate::ult, c, cCols);
    Value safeC = arith::SelectOp::create(cb, inTile, c, c0);
    Value sc = memref::LoadOp::create(cb, s, ValueRange{row, safeC});
    SmallVector<Value> r = inlineRegion(cb, op.getBody(), {row, safeC, sc});
    Value visible = cols % kChunk == 0
                        ? r[1]
                        : arith::AndIOp::create(cb, inTile, r[1]).getResult();
    return {r[0], visible};
  };
  parallelFor(
      b, {cRows, cChunks}, [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
        Value row = iv[0];
        Value first = arith::MulIOp::create(rb, iv[1], cChunk);
        Value mx = reduceLoop(
            rb, c0, cChunk, c1, negInf,
            [&](ImplicitLocOpBuilder &cb, Value k, Value m) -> Value {
              auto [x, visible] =
                  element(cb, row, arith::AddIOp::create(cb, first, k));
              return arith::MaximumFOp::create(
                  cb, m, arith::SelectOp::create(cb, visible, x, negInf));
            });
        memref::StoreOp::create(rb, mx, partial, ValueRange{row, iv[1]});
      });
  parallelFor(b, {cRows}, [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
    Value row = iv[0];
    Value mOld = memref::LoadOp::create(rb, mBuf, ValueRange{row});
    Value mNew = reduceLoop(
        rb, c0, cChunks, c1, mOld,
        [&](ImplicitLocOpBuilder &cb, Value c, Value m) -> Value {
          return arith::MaximumFOp::create(
              cb, m, memref::LoadOp::create(cb, partial, ValueRange{row, c}));
        });
    Value isEmpty =
        arith::CmpFOp::create(rb, arith::CmpFPredicate::OEQ, mNew, negInf);
    Value ref = arith::SelectOp::create(rb, isEmpty, zeroF, mNew);
    memref::StoreOp::create(
        rb, math::Exp2Op::create(rb, arith::SubFOp::create(rb, mOld, ref)),
        corrBuf, ValueRange{row});
    memref::StoreOp::create(rb, mNew, mBuf, ValueRange{row});
    memref::StoreOp::create(rb, ref, refBuf, ValueRange{row});
  });
  parallelFor(
      b, {cRows, cChunks}, [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
        Value row = iv[0];
        Value ref = memref::LoadOp::create(rb, refBuf, ValueRange{row});
        Value first = arith::MulIOp::create(rb, iv[1], cChunk);
        Value sum = reduceLoop(
            rb, c0, cChunk, c1, zeroF,
            [&](ImplicitLocOpBuilder &cb, Value k, Value total) -> Value {
              Value c = arith::AddIOp::create(cb, first, k);
              auto [x, visible] = element(cb, row, c);
              Value e =
                  math::Exp2Op::create(cb, arith::SubFOp::create(cb, x, ref));
              Value pv = arith::SelectOp::create(cb, visible, e, zeroF);
              auto store = [&](ImplicitLocOpBuilder &sb) {
                memref::StoreOp::create(sb, castFloat(sb, pv, pElem), p,
                                        ValueRange{row, c});
              };
              if (cols % kChunk == 0) {
                store(cb);
              } else {
                auto ifOp = scf::IfOp::create(
                    cb,
                    arith::CmpIOp::create(cb, arith::CmpIPredicate::ult, c,
                                          cCols),
                    /*withElseRegion=*/false);
                ImplicitLocOpBuilder ib(cb.getLoc(),
                                        ifOp.thenBlock()->getTerminator());
                store(ib);
              }
              return arith::AddFOp::create(cb, total, pv);
            });
        memref::StoreOp::create(rb, sum, partial, ValueRange{row, iv[1]});
      });
  parallelFor(b, {cRows}, [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
    Value row = iv[0];
    Value sum = reduceLoop(
        rb, c0, cChunks, c1, zeroF,
        [&](ImplicitLocOpBuilder &cb, Value c, Value total) -> Value {
          return arith::AddFOp::create(
              cb, total,
              memref::LoadOp::create(cb, partial, ValueRange{row, c}));
        });
    Value lOld = memref::LoadOp::create(rb, lBuf, ValueRange{row});
    Value corr = memref::LoadOp::create(rb, corrBuf, ValueRange{row});
    memref::StoreOp::create(
        rb,
        arith::AddFOp::create(rb, arith::MulFOp::create(rb, lOld, corr), sum),
        lBuf, ValueRange{row});
  });
  op.erase();
}

OnlineSoftmaxOp mla::decomposeAttentionStep(AttentionStepOp op) {
  StepScratch scratch = allocateStepScratch(op, /*scores=*/true,
                                            /*probs=*/true, /*corr=*/true);
  ImplicitLocOpBuilder b(op.getLoc(), op);
  auto qk = MatmulOp::create(b, op.getQ(), op.getK(), scratch.scores, Value());
  qk.setTransposeB(true);
  auto sm = OnlineSoftmaxOp::create(b, scratch.scores, scratch.probs, op.getM(),
                                    op.getL(), scratch.corr);
  sm.getBody().takeBody(op.getBody());
  auto pv =
      MatmulOp::create(b, scratch.probs, op.getV(), op.getAcc(), scratch.corr);
  pv.setAccumulate(true);
  op.erase();
  return sm;
}

namespace {
struct ExpandSoftmaxPass
    : public mla::impl::MLAExpandSoftmaxBase<ExpandSoftmaxPass> {
  void runOnOperation() override {
    SmallVector<AttentionStepOp> steps;
    getOperation().walk([&](AttentionStepOp op) { steps.push_back(op); });
    for (AttentionStepOp op : steps)
      decomposeAttentionStep(op);
    SmallVector<OnlineSoftmaxOp> ops;
    getOperation().walk([&](OnlineSoftmaxOp op) { ops.push_back(op); });
    for (OnlineSoftmaxOp op : ops)
      expandOnlineSoftmax(op);
  }
};
} // namespace
