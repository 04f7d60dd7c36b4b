//===- ExpandPaging.cpp - mla-expand-paging --------------------------------===//
//
// Makes the paged-KV indirection of mla.load_kv_tile explicit: per tile row,
// page = block_table[b][t / P], slot = t % P, then a vectorised row copy.
// Rows at or past `end` are zero-filled so that later products stay finite.
//
//===----------------------------------------------------------------------===//
#include "mla/Transforms/Passes.h"
#include "mla/Transforms/Utils.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

#define DEBUG_TYPE "mla-expand-paging"

namespace mla {
#define GEN_PASS_DEF_MLAEXPANDPAGING
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
void expand(LoadKVTileOp op) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  auto tileType = op.getTile().getType();
  auto kvType = op.getKv().getType();
  const int64_t rows = tileType.getDimSize(0), width = tileType.getDimSize(1);
  const int64_t vw = vectorWidthFor(width);
  auto vecType = VectorType::get({vw}, tileType.getElementType());
  Value c0 = indexConst(b, 0), c1 = indexConst(b, 1);
  Value cWidth = indexConst(b, width), cVw = indexConst(b, vw);
  // The page size: a constant (divisions become shifts for powers of two) or
  // the pool's run-time dim 1.
  Value pageSize = kvType.isDynamicDim(1)
                       ? Value(memref::DimOp::create(b, op.getKv(), 1))
                       : indexConst(b, kvType.getDimSize(1));
  Value zeros = arith::ConstantOp::create(
      b, vecType,
      DenseElementsAttr::get(vecType,
                             b.getFloatAttr(tileType.getElementType(), 0.0)));

  forLoop(b, c0, indexConst(b, rows), c1, [&](ImplicitLocOpBuilder &rb,
                                               Value r) {
    Value t = arith::AddIOp::create(rb, op.getStart(), r);
    Value inRange =
        arith::CmpIOp::create(rb, arith::CmpIPredicate::slt, t, op.getEnd());
    scf::IfOp::create(
        rb, inRange,
        [&](OpBuilder &nb, Location loc) {
          ImplicitLocOpBuilder ib(loc, nb);
          Value pageIdx = arith::DivUIOp::create(ib, t, pageSize);
          Value slot = arith::RemUIOp::create(ib, t, pageSize);
          Value entry = memref::LoadOp::create(
              ib, op.getBlockTable(), ValueRange{op.getBatch(), pageIdx});
          Value page =
              arith::IndexCastOp::create(ib, ib.getIndexType(), entry);
          forLoop(ib, c0, cWidth, cVw, [&](ImplicitLocOpBuilder &db, Value d) {
            Value v = vector::LoadOp::create(db, vecType, op.getKv(),
                                             ValueRange{page, slot, d});
            vector::StoreOp::create(db, v, op.getTile(), ValueRange{r, d});
          });
          scf::YieldOp::create(ib);
        },
        [&](OpBuilder &nb, Location loc) {
          ImplicitLocOpBuilder ib(loc, nb);
          forLoop(ib, c0, cWidth, cVw, [&](ImplicitLocOpBuilder &db, Value d) {
            vector::StoreOp::create(db, zeros, op.getTile(), ValueRange{r, d});
          });
          scf::YieldOp::create(ib);
        });
  });
  op.erase();
}

struct ExpandPagingPass
    : public mla::impl::MLAExpandPagingBase<ExpandPagingPass> {
  void runOnOperation() override {
    SmallVector<LoadKVTileOp> ops;
    getOperation().walk([&](LoadKVTileOp op) { ops.push_back(op); });
    for (LoadKVTileOp op : ops)
      expand(op);
  }
};
} // namespace
