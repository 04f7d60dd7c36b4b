//===- ExpandPaging.cpp - mla-expand-paging -------------------------------===//
//
// Makes the paged-KV indirection of mla.load_kv_tile explicit: per tile row,
// page = block_table[b][t / P], slot = t % P, then a vectorised row copy.
// Rows at or past `end` are zero-filled so that later products stay finite.
//
//===----------------------------------------------------------------------===//
#include "Utils.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

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
  Value cVw = indexConst(b, vw);
  // The page size: a constant (divisions become shifts for powers of two) or
  // the pool's run-time dim 1.
  Value pageSize = kvType.isDynamicDim(1)
                       ? Value(memref::DimOp::create(b, op.getKv(), 1))
                       : indexConst(b, kvType.getDimSize(1));
  Value zeros = arith::ConstantOp::create(
      b, vecType,
      DenseElementsAttr::get(vecType,
                             b.getFloatAttr(tileType.getElementType(), 0.0)));

  // The page of each row, looked up once per row (not once per copied
  // chunk) into a small buffer of the workgroup, placed with the tiles at
  // the top of the enclosing grid (or function). Rows past `end` look up
  // entry 0, which every block-table row has.
  ImplicitLocOpBuilder topBuilder =
      builderAtGridTop(op.getLoc(), op->getBlock());
  auto pagesBuf = memref::AllocaOp::create(
      topBuilder, MemRefType::get({rows}, b.getI32Type()));
  Value c0 = indexConst(b, 0);
  parallelFor(b, {indexConst(b, rows)},
              [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
                Value t = arith::AddIOp::create(rb, op.getStart(), iv[0]);
                Value inRange = arith::CmpIOp::create(
                    rb, arith::CmpIPredicate::slt, t, op.getEnd());
                Value pageIdx = arith::SelectOp::create(
                    rb, inRange, arith::DivUIOp::create(rb, t, pageSize), c0);
                memref::StoreOp::create(
                    rb,
                    memref::LoadOp::create(rb, op.getBlockTable(),
                                           ValueRange{op.getBatch(), pageIdx}),
                    pagesBuf, ValueRange{iv[0]});
              });

  // One iteration per (row, vector chunk): on GPUs each thread copies
  // 16-byte pieces.
  parallelFor(
      b, {indexConst(b, rows), indexConst(b, width / vw)},
      [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
        Value r = iv[0];
        Value d = arith::MulIOp::create(rb, iv[1], cVw);
        Value t = arith::AddIOp::create(rb, op.getStart(), r);
        Value inRange = arith::CmpIOp::create(rb, arith::CmpIPredicate::slt, t,
                                              op.getEnd());
        auto ifOp = scf::IfOp::create(
            rb, inRange,
            [&](OpBuilder &nb, Location loc) {
              ImplicitLocOpBuilder ib(loc, nb);
              Value slot = arith::RemUIOp::create(ib, t, pageSize);
              Value entry = memref::LoadOp::create(ib, pagesBuf, ValueRange{r});
              Value page =
                  arith::IndexCastOp::create(ib, ib.getIndexType(), entry);
              Value v = vector::LoadOp::create(ib, vecType, op.getKv(),
                                               ValueRange{page, slot, d});
              scf::YieldOp::create(ib, v);
            },
            [&](OpBuilder &nb, Location loc) {
              ImplicitLocOpBuilder ib(loc, nb);
              scf::YieldOp::create(ib, zeros);
            });
        vector::StoreOp::create(rb, ifOp.getResult(0), op.getTile(),
                                ValueRange{r, d});
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
