//===- ExpandPaging.cpp - mla-expand-paging -------------------------------===//
//
// Makes the paged-KV indirection of mla.load_kv_tile explicit: per tile row,
// page = block_table[b][t / P], slot = t % P, then a vectorised row copy.
// Rows at or past `end` are zero-filled so that later products stay finite.
//
// The page numbers are looked up once per row into a small workgroup buffer
// that the copy reads. In general that is a phase of its own before the
// copy (on GPUs: a barrier per tile). Where the target stages pages ahead
// (ArchInfo::stagesPagesAhead) and the tile is the key loop's (its start is
// the loop's induction variable, the other operands loop-invariant), the
// buffer has two slots: the first tile's pages are staged before the loop
// (when it runs a tile, on targets whose block table is no bounds-checked
// buffer),
// and each iteration stages the next tile's pages into the slot its copy
// does not read, in a phase marked mla.unsynchronized: the copy's and the
// step's barriers order it, so the loop has no barrier of its own for the
// pages. The phase is also marked mla.next_tile (it writes only what the
// next iteration reads), which lets mla-distribute read the next tile's
// KV rows early, into registers (ArchInfo::prefetchesThroughRegisters).
//
//===----------------------------------------------------------------------===//
#include "Utils.h"
#include "WorkgroupTiles.h"
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
/// The stages of the attention step in `loop`'s body (1 without one).
int64_t loopStages(scf::ForOp loop) {
  for (AttentionStepOp step : loop.getBody()->getOps<AttentionStepOp>())
    return step.getStages();
  return 1;
}

/// The key loop whose next tile `op` may stage pages for on `arch`, or null
/// (with the reason under -debug-only=mla-expand-paging).
scf::ForOp stagingLoop(LoadKVTileOp op, const ArchInfo &arch) {
  auto loop = dyn_cast<scf::ForOp>(op->getParentOp());
  const char *why =
      !loop ? "not directly in an scf.for"
      : !arch.stagesPagesAhead(
            loopStages(loop),
            pagesPerKeyTile(op.getKv().getType(),
                            op.getTile().getType().getDimSize(0)))
          ? "the target stages no pages ahead for its step's stages and "
            "its tile's pages"
      : op.getStart() != loop.getInductionVar()
          ? "its start is not the loop's induction variable"
      : !llvm::all_of(ValueRange{op.getKv(), op.getBlockTable(), op.getBatch(),
                                 op.getEnd()},
                      [&](Value v) { return loop.isDefinedOutsideOfLoop(v); })
          ? "its pool, block table, request or end change in the loop"
          : nullptr;
  if (why) {
    LLVM_DEBUG(llvm::dbgs() << "mla-expand-paging: pages of " << op.getLoc()
                            << " staged per tile: " << why << "\n");
    return nullptr;
  }
  return loop;
}

void expand(LoadKVTileOp op, const ArchInfo *arch) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  auto tileType = op.getTile().getType();
  auto kvType = op.getKv().getType();
  const int64_t rows = tileType.getDimSize(0), width = tileType.getDimSize(1);
  const int64_t vw = vectorWidthFor(width);
  auto vecType = VectorType::get({vw}, tileType.getElementType());
  Value cVw = indexConst(b, vw);
  scf::ForOp loop = arch ? stagingLoop(op, *arch) : nullptr;
  // The page size: a constant (divisions become shifts for powers of two) or
  // the pool's run-time dim 1.
  auto pageSizeAt = [&](ImplicitLocOpBuilder &pb) -> Value {
    return kvType.isDynamicDim(1)
               ? Value(memref::DimOp::create(pb, op.getKv(), 1))
               : indexConst(pb, kvType.getDimSize(1));
  };
  Value pageSize = pageSizeAt(b);
  Value zeros = arith::ConstantOp::create(
      b, vecType,
      DenseElementsAttr::get(vecType,
                             b.getFloatAttr(tileType.getElementType(), 0.0)));

  // The page of each row, looked up once per row (not once per copied
  // chunk) into a small buffer of the workgroup, placed with the tiles at
  // the top of the enclosing grid (or function): one slot, or two where
  // the loop's copies stage the next tile's. Rows past `end` look up entry
  // 0, which every block-table row has.
  ImplicitLocOpBuilder topBuilder =
      builderAtGridTop(op.getLoc(), op->getBlock());
  auto pagesBuf = memref::AllocaOp::create(
      topBuilder, loop ? MemRefType::get({2, rows}, b.getI32Type())
                       : MemRefType::get({rows}, b.getI32Type()));
  // Element `row` of slot `slot` (the one-slot buffer has no slot index).
  auto at = [&](Value slot, Value row) -> SmallVector<Value> {
    if (!loop)
      return {row};
    return {slot, row};
  };
  auto stage = [&](ImplicitLocOpBuilder &rb, Value row, Value tileStart,
                   Value slot, Value ps) {
    Value c0 = indexConst(rb, 0);
    Value t = arith::AddIOp::create(rb, tileStart, row);
    Value inRange =
        arith::CmpIOp::create(rb, arith::CmpIPredicate::slt, t, op.getEnd());
    Value pageIdx = arith::SelectOp::create(
        rb, inRange, arith::DivUIOp::create(rb, t, ps), c0);
    memref::StoreOp::create(
        rb,
        memref::LoadOp::create(rb, op.getBlockTable(),
                               ValueRange{op.getBatch(), pageIdx}),
        pagesBuf, at(slot, row));
  };
  Value slot = indexConst(b, 0);
  if (loop) {
    // The first tile's pages, before the loop, into slot 0; tile i's in
    // slot i % 2. Where the block table is a bounds-checked buffer (AMD) they
    // are read even when the loop runs no tile (a table without columns
    // reads zeros); elsewhere only when it runs one.
    ImplicitLocOpBuilder pb(loop.getLoc(), loop);
    if (!arch->hasBufferOps()) {
      auto runs = scf::IfOp::create(
          pb,
          arith::CmpIOp::create(pb, arith::CmpIPredicate::slt,
                                loop.getLowerBound(), loop.getUpperBound()),
          /*withElseRegion=*/false);
      pb.setInsertionPoint(runs.thenBlock()->getTerminator());
    }
    Value ps = pageSizeAt(pb);
    parallelFor(pb, {indexConst(pb, rows)},
                [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
                  stage(rb, iv[0], loop.getLowerBound(), indexConst(rb, 0), ps);
                });
    Value i = arith::DivUIOp::create(
        b,
        arith::SubIOp::create(b, loop.getInductionVar(), loop.getLowerBound()),
        loop.getStep());
    slot = arith::RemUIOp::create(b, i, indexConst(b, 2));
    Value next = arith::SubIOp::create(b, indexConst(b, 1), slot);
    Value nextStart = arith::AddIOp::create(b, op.getStart(), loop.getStep());
    // The next tile's pages, into the slot the copy does not read; the
    // copy's barrier orders them before the next iteration's copy, and the
    // previous iteration's barriers order the reads of that slot before.
    scf::ParallelOp ahead = parallelFor(
        b, {indexConst(b, rows)}, [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
          stage(rb, iv[0], nextStart, next, pageSize);
        });
    ahead->setAttr(MLADialect::kUnsynchronizedAttrName, b.getUnitAttr());
    ahead->setAttr(MLADialect::kNextTileAttrName, b.getUnitAttr());
  } else {
    parallelFor(b, {indexConst(b, rows)},
                [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
                  stage(rb, iv[0], op.getStart(), slot, pageSize);
                });
  }

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
              Value slotInPage = arith::RemUIOp::create(ib, t, pageSize);
              Value entry = memref::LoadOp::create(ib, pagesBuf, at(slot, r));
              Value page =
                  arith::IndexCastOp::create(ib, ib.getIndexType(), entry);
              Value v = vector::LoadOp::create(ib, vecType, op.getKv(),
                                               ValueRange{page, slotInPage, d});
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
    // Without a #mla.target (hand-written IR) pages are staged per tile.
    const ArchInfo *arch = nullptr;
    if (getOperation()->hasAttr(MLADialect::kTargetAttrName)) {
      FailureOr<const ArchInfo *> target =
          moduleTarget(getOperation(), "mla-expand-paging");
      if (failed(target))
        return signalPassFailure();
      arch = *target;
    }
    SmallVector<LoadKVTileOp> ops;
    getOperation().walk([&](LoadKVTileOp op) { ops.push_back(op); });
    for (LoadKVTileOp op : ops)
      expand(op, arch);
  }
};
} // namespace
