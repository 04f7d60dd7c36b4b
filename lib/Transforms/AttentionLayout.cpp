//===- AttentionLayout.cpp - the tiles of one attention workgroup ---------===//
#include "AttentionLayout.h"
#include "Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mla;

Value mla::paddedTile(ImplicitLocOpBuilder &b, int64_t rows, int64_t cols,
                      Type elem) {
  int64_t pad = kTileRowPadBytes * 8 / elem.getIntOrFloatBitWidth();
  auto buffer =
      memref::AllocaOp::create(b, MemRefType::get({rows, cols + pad}, elem));
  return memref::SubViewOp::create(
      b, buffer, ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(rows), b.getIndexAttr(cols)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
}

int64_t mla::alignedBytes(int64_t bytes) { return (bytes + 15) / 16 * 16; }

int64_t mla::swizzledTileBytes(int64_t bytes) {
  return (bytes + kSwizzledTileAlign - 1) / kSwizzledTileAlign *
         kSwizzledTileAlign;
}

int64_t mla::paddedTileBytes(int64_t rows, int64_t cols, int64_t elemBytes) {
  return alignedBytes(rows * (cols * elemBytes + kTileRowPadBytes));
}

int64_t mla::WorkgroupTiles::bytes() const {
  const bool wgmma = lowering == StepLowering::Wgmma ||
                     lowering == StepLowering::WgmmaTransposed;
  auto operand = [&](int64_t r, int64_t c) {
    return wgmma ? swizzledTileBytes(r * c * elemBytes)
                 : paddedTileBytes(r, c, elemBytes);
  };
  int64_t q = queryTile ? operand(rows, dim) : 0;
  int64_t kv = operand(stages * keys, dim);
  if (separateValues)
    kv += operand(stages * keys, dv);
  int64_t acc = paddedTileBytes(rows, dv, 4);
  int64_t row = alignedBytes(rows * 4);
  // The page numbers and, with a mask, the tile skip's flag.
  int64_t pages =
      pageSlots * alignedBytes(keys * 4) + (tileSkip ? alignedBytes(4) : 0);
  switch (lowering) {
  case StepLowering::Phases:
    // S (f32) and P, m, l, the row scratch and the correction, the
    // softmax's partials per chunk of 8 keys (ExpandSoftmax.cpp), pages.
    return q + kv + acc + paddedTileBytes(rows, keys, 4) +
           paddedTileBytes(rows, keys, elemBytes) + 4 * row +
           alignedBytes(rows * (keys / 8) * 4) + pages;
  case StepLowering::MmaSync:
  case StepLowering::Wgmma:
    // Split scores: the probability tile and the halves' maxima; m, l,
    // the row scratch and the correction; pages.
    return std::max(q + kv, acc) +
           (splitScores ? paddedTileBytes(rows, keys, elemBytes) +
                              alignedBytes(2 * rows * 4)
                        : 0) +
           4 * row + pages;
  case StepLowering::WgmmaTransposed:
    // Each warpgroup's probability tile (rows x keys, swizzled) and the
    // warps' per-row values; m, l, the row scratch and the correction;
    // pages.
    return std::max(q + kv, acc) +
           swizzledTileBytes(warps / 4 * rows * keys * elemBytes) +
           alignedBytes(warps * rows * 4) + 4 * row + pages;
  case StepLowering::Register: {
    int64_t a = accTile ? acc : 0;
    int64_t operands = stages == 1 ? std::max({q, kv, a}) : q + kv + a;
    return operands + 3 * row + pages + alignedBytes(extraBytes);
  }
  }
  llvm_unreachable("unknown step lowering");
}

bool mla::decodeQueriesInPlace(const ArchInfo *arch, int64_t qLen) {
  return qLen == 1 || (arch && arch->readsQueriesInPlace());
}

bool mla::prefillQueriesInPlace(const ArchInfo *arch, bool masked) {
  return arch && arch->readsQueriesInPlace() && !masked;
}

int64_t mla::finishWidth(int64_t dv) {
  return std::min<int64_t>(4, vectorWidthFor(dv));
}

int64_t mla::stepOperandBytes(int64_t queryRows, int64_t keyRows, int64_t dim,
                              int64_t elemBytes) {
  uint64_t rows = llvm::SaturatingAdd<uint64_t>(queryRows, keyRows);
  uint64_t bytes = llvm::SaturatingMultiply<uint64_t>(
      llvm::SaturatingMultiply<uint64_t>(rows, dim), elemBytes);
  return static_cast<int64_t>(
      std::min<uint64_t>(bytes, std::numeric_limits<int64_t>::max()));
}

namespace {
/// The memref.alloca under `v`'s subviews when it sits directly in an
/// mla.grid or a function body, else null.
memref::AllocaOp stateBuffer(Value v) {
  while (auto sub = v.getDefiningOp<memref::SubViewOp>())
    v = sub.getSource();
  auto alloca = v.getDefiningOp<memref::AllocaOp>();
  if (!alloca || !isa<GridOp, func::FuncOp>(alloca->getParentOp()))
    return nullptr;
  return alloca;
}
} // namespace

StepScratch mla::allocateStepScratch(AttentionStepOp op, bool scores,
                                     bool probs, bool corr) {
  StepScratch s;
  const int64_t rows = op.getRows(), keys = op.getTileKeys();
  Type f32 = Float32Type::get(op.getContext());
  ImplicitLocOpBuilder top = builderAtGridTop(op.getLoc(), op->getBlock());
  if (scores || probs) {
    ImplicitLocOpBuilder b = top;
    if (memref::AllocaOp acc = stateBuffer(op.getAcc()))
      b.setInsertionPoint(acc);
    if (scores)
      s.scores = paddedTile(b, rows, keys, f32);
    if (probs)
      s.probs = paddedTile(b, rows, keys, op.getElementType());
  }
  if (corr) {
    ImplicitLocOpBuilder b = top;
    if (memref::AllocaOp l = stateBuffer(op.getL()))
      b.setInsertionPointAfter(l);
    s.corr = memref::AllocaOp::create(b, MemRefType::get({rows}, f32));
  }
  return s;
}

scf::ParallelOp mla::stageStepQueries(AttentionStepOp op) {
  Value q = op.getQ();
  if (stateBuffer(q))
    return nullptr;
  const int64_t rows = op.getRows(), dim = op.getHeadDim();
  Type elem = op.getElementType();
  ImplicitLocOpBuilder top = builderAtGridTop(op.getLoc(), op->getBlock());
  Value tile = paddedTile(top, rows, dim, elem);
  // Right after the view (or at the top of the grid for an argument).
  ImplicitLocOpBuilder b = top;
  if (Operation *def = q.getDefiningOp())
    b.setInsertionPointAfter(def);
  const int64_t vw = vectorWidthFor(dim);
  auto vecType = VectorType::get({vw}, elem);
  Value cVw = indexConst(b, vw);
  // Through a unit-stride subview the copy reads the view's source (e.g.
  // the kernel's q argument, whose layout NVIDIA's alignment marking
  // knows), at the view's offsets.
  auto view = q.getDefiningOp<memref::SubViewOp>();
  if (view && !llvm::all_of(view.getStaticStrides(),
                            [](int64_t st) { return st == 1; }))
    view = nullptr;
  scf::ParallelOp copy = parallelFor(
      b, {indexConst(b, rows), indexConst(b, dim / vw)},
      [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
        Value d = arith::MulIOp::create(ib, iv[1], cVw);
        Value qRow = stepQueryRow(ib, op, iv[0]);
        Value v;
        if (!view) {
          v = vector::LoadOp::create(ib, vecType, q, ValueRange{qRow, d});
        } else {
          llvm::SmallBitVector dropped = view.getDroppedDims();
          SmallVector<Value> at;
          Value local[2] = {qRow, d};
          int64_t next = 0;
          for (auto [i, off] : llvm::enumerate(view.getMixedOffsets())) {
            Value offset =
                getValueOrCreateConstantIndexOp(ib, ib.getLoc(), off);
            if (dropped.test(i)) {
              at.push_back(offset);
              continue;
            }
            Value x = local[next++];
            at.push_back(
                isConstantIntValue(off, 0)
                    ? x
                    : arith::AddIOp::create(ib, offset, x).getResult());
          }
          v = vector::LoadOp::create(ib, vecType, view.getSource(), at);
        }
        vector::StoreOp::create(ib, v, tile, ValueRange{iv[0], d});
      });
  op.getQMutable().assign(tile);
  op.removeQueryGroupsAttr(); // the tile's rows are the step's
  return copy;
}

Value mla::stepQueryRow(ImplicitLocOpBuilder &b, AttentionStepOp op,
                        Value row) {
  std::optional<ArrayRef<int64_t>> groups = op.getQueryGroups();
  if (!groups)
    return row;
  Value g = indexConst(b, (*groups)[0]);
  Value group = arith::DivUIOp::create(b, row, g);
  return arith::AddIOp::create(
      b, arith::MulIOp::create(b, group, indexConst(b, (*groups)[1])),
      arith::RemUIOp::create(b, row, g));
}

SmallVector<Value> mla::inlineStepElement(ImplicitLocOpBuilder &b,
                                          AttentionStepOp op, ValueRange args,
                                          bool assumeVisible) {
  SmallVector<Value> r = inlineRegion(b, op.getBody(), args);
  if (assumeVisible)
    r[1] = arith::ConstantIntOp::create(b, 1, 1);
  else if (Value all = op.getAllVisible())
    r[1] = arith::OrIOp::create(b, all, r[1]);
  return r;
}

Value mla::stepExp2(ImplicitLocOpBuilder &b, Value x, Value ref) {
  return math::Exp2Op::create(b, arith::SubFOp::create(b, x, ref));
}

void mla::foldAllVisible(AttentionStepOp op) {
  Value all = op.getAllVisible();
  if (!all)
    return;
  Operation *yield = op.getBody().front().getTerminator();
  ImplicitLocOpBuilder b(yield->getLoc(), yield);
  yield->setOperand(1, arith::OrIOp::create(b, all, yield->getOperand(1)));
  op.getAllVisibleMutable().clear();
}
