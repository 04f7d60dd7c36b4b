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
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include "llvm/Support/MathExtras.h"

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
              Value e = stepExp2(cb, x, ref);
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
  foldAllVisible(op);
  sm.getBody().takeBody(op.getBody());
  auto pv =
      MatmulOp::create(b, scratch.probs, op.getV(), op.getAcc(), scratch.corr);
  pv.setAccumulate(true);
  op.erase();
  return sm;
}

FinishFactors mla::finishFactors(ImplicitLocOpBuilder &b, Value m, Value l,
                                 Value scale) {
  Value zeroF = f32Const(b, 0.0);
  Value empty = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, l, zeroF);
  Value safeL = arith::SelectOp::create(b, empty, f32Const(b, 1.0), l);
  Value inv = arith::DivFOp::create(b, scale ? scale : f32Const(b, 1.0), safeL);
  Value lse = arith::MulFOp::create(
      b, arith::AddFOp::create(b, m, math::Log2Op::create(b, safeL)),
      f32Const(b, llvm::numbers::ln2));
  Value negInf = f32Const(b, -std::numeric_limits<double>::infinity());
  return {arith::SelectOp::create(b, empty, zeroF, inv),
          arith::SelectOp::create(b, empty, negInf, lse)};
}

void mla::expandAttentionFinish(AttentionFinishOp op) {
  // Each iteration reads `chunk` accumulator columns (as wide as the old
  // epilogue's vectors) and runs the output region on each of its blocks.
  const int64_t width = op.getWidth(), dv = op.getValueDim();
  int64_t chunk = width;
  while (chunk * 2 <= 16 && dv % (chunk * 2) == 0)
    chunk *= 2;
  ImplicitLocOpBuilder b(op.getLoc(), op);
  auto chunkType = VectorType::get({chunk}, b.getF32Type());
  Value c0 = indexConst(b, 0), cChunk = indexConst(b, chunk);
  parallelFor(
      b, {indexConst(b, op.getRows()), indexConst(b, dv / chunk)},
      [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
        Value row = iv[0];
        Value col = arith::MulIOp::create(rb, iv[1], cChunk);
        Value scale = op.getScale() ? memref::LoadOp::create(rb, op.getScale(),
                                                             ValueRange{row})
                                          .getResult()
                                    : Value();
        FinishFactors f = finishFactors(
            rb, memref::LoadOp::create(rb, op.getM(), ValueRange{row}),
            memref::LoadOp::create(rb, op.getL(), ValueRange{row}), scale);
        Value acc = vector::LoadOp::create(rb, chunkType, op.getAcc(),
                                           ValueRange{row, col});
        Value o = arith::MulFOp::create(
            rb, acc, vector::BroadcastOp::create(rb, chunkType, f.inv));
        for (int64_t i = 0; i < chunk; i += width) {
          Value part = o;
          if (width != chunk)
            part = sliceVector(rb, o, i, width);
          inlineRegion(rb, op.getOutput(),
                       {row,
                        i == 0
                            ? col
                            : arith::AddIOp::create(rb, col, indexConst(rb, i))
                                  .getResult(),
                        part});
        }
        Value first =
            arith::CmpIOp::create(rb, arith::CmpIPredicate::eq, iv[1], c0);
        scf::IfOp::create(rb, first, [&](OpBuilder &nb, Location loc) {
          ImplicitLocOpBuilder ib(loc, nb);
          inlineRegion(ib, op.getLseBody(), {row, f.lse});
          scf::YieldOp::create(ib);
        });
      });
  op.erase();
}

namespace {
struct ExpandSoftmaxPass
    : public mla::impl::MLAExpandSoftmaxBase<ExpandSoftmaxPass> {
  void runOnOperation() override {
    SmallVector<AttentionStepOp> steps;
    getOperation().walk([&](AttentionStepOp op) { steps.push_back(op); });
    for (AttentionStepOp op : steps) {
      stageStepQueries(op);
      decomposeAttentionStep(op);
    }
    SmallVector<OnlineSoftmaxOp> ops;
    getOperation().walk([&](OnlineSoftmaxOp op) { ops.push_back(op); });
    for (OnlineSoftmaxOp op : ops)
      expandOnlineSoftmax(op);
    SmallVector<AttentionFinishOp> finishes;
    getOperation().walk([&](AttentionFinishOp op) { finishes.push_back(op); });
    for (AttentionFinishOp op : finishes)
      expandAttentionFinish(op);
  }
};
} // namespace
