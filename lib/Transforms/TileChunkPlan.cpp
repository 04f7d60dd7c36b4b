//===- TileChunkPlan.cpp - mla-tile for mla.chunk_plan --------------------===//
//
// The plan of decode's length-aware schedule as one workgroup: two or three
// scans over the sequence lengths in blocks of kScanBlock, each block a
// parallel load and a Hillis-Steele scan in workgroup memory, with the
// running total kept in a workgroup-memory cell. Every value the scans share is read in a
// parallel loop (each followed by a barrier on GPUs), never by the scalar
// code of all threads, so that no thread reads a cell while another
// rewrites it.
//
//===----------------------------------------------------------------------===//
#include "TileCore.h"
#include "Utils.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mla;
using namespace mla::tiling;

namespace mla::tiling {
namespace {
/// Lengths per scan block (a power of two: the scan has log2 steps).
constexpr int64_t kScanBlock = 256;
static_assert(llvm::isPowerOf2_64(kScanBlock));

Value i32Load(ImplicitLocOpBuilder &b, Value memref, ValueRange idx) {
  Value v = memref::LoadOp::create(b, memref, idx);
  return arith::IndexCastOp::create(b, b.getIndexType(), v);
}

void i32Store(ImplicitLocOpBuilder &b, Value v, Value memref, ValueRange idx) {
  Value i = arith::IndexCastOp::create(b, b.getI32Type(), v);
  memref::StoreOp::create(b, i, memref, idx);
}

/// The workgroup buffers of the scans: two blocks (ping-pong) and the
/// cells (0: key tiles T, 1: chunks K, 2: the chunk size q).
struct ScanTiles {
  Value a, b, cells;
};

/// An exclusive scan of `count(b)` over b in [0, batch): `use(b, excl,
/// count)` runs once per b with the sum of the counts before it; the total
/// ends in cells[cell].
void scanCounts(
    ImplicitLocOpBuilder &g, const ScanTiles &t, Value batch, int64_t cell,
    function_ref<Value(ImplicitLocOpBuilder &, Value)> count,
    function_ref<void(ImplicitLocOpBuilder &, Value, Value, Value)> use) {
  Value c0 = indexConst(g, 0), c1 = indexConst(g, 1);
  Value cBlock = indexConst(g, kScanBlock), cCell = indexConst(g, cell);
  parallelFor(g, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
    i32Store(ib, indexConst(ib, 0), t.cells, cCell);
  });
  forLoop(g, c0, batch, cBlock, [&](ImplicitLocOpBuilder &lb, Value base) {
    auto inBatch = [&](ImplicitLocOpBuilder &ib, Value i) {
      Value bIdx = arith::AddIOp::create(ib, base, i);
      return std::pair(bIdx, arith::CmpIOp::create(
                                 ib, arith::CmpIPredicate::slt, bIdx, batch));
    };
    parallelFor(lb, {cBlock}, [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
      auto [bIdx, in] = inBatch(ib, iv[0]);
      // Past the batch: 0, without reading the lengths.
      Value clamped = arith::SelectOp::create(ib, in, bIdx, indexConst(ib, 0));
      Value n = arith::SelectOp::create(ib, in, count(ib, clamped),
                                        indexConst(ib, 0));
      i32Store(ib, n, t.a, iv[0]);
    });
    // Inclusive Hillis-Steele scan: log2(kScanBlock) steps, a <-> b.
    Value src = t.a, dst = t.b;
    for (int64_t d = 1; d < kScanBlock; d *= 2) {
      parallelFor(lb, {cBlock}, [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
        Value cd = indexConst(ib, d);
        Value has =
            arith::CmpIOp::create(ib, arith::CmpIPredicate::sge, iv[0], cd);
        Value prev =
            maxIdx(ib, arith::SubIOp::create(ib, iv[0], cd), indexConst(ib, 0));
        Value add = arith::SelectOp::create(ib, has, i32Load(ib, src, prev),
                                            indexConst(ib, 0));
        i32Store(ib, arith::AddIOp::create(ib, i32Load(ib, src, iv[0]), add),
                 dst, iv[0]);
      });
      std::swap(src, dst);
    }
    parallelFor(lb, {cBlock}, [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
      auto [bIdx, in] = inBatch(ib, iv[0]);
      auto ifIn = scf::IfOp::create(ib, in, /*withElseRegion=*/false);
      ImplicitLocOpBuilder tb(ib.getLoc(), ifIn.thenBlock()->getTerminator());
      Value n = count(tb, bIdx);
      Value excl = arith::SubIOp::create(
          tb,
          arith::AddIOp::create(tb, i32Load(tb, t.cells, cCell),
                                i32Load(tb, src, iv[0])),
          n);
      use(tb, bIdx, excl, n);
    });
    parallelFor(lb, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
      Value total = arith::AddIOp::create(
          ib, i32Load(ib, t.cells, cCell),
          i32Load(ib, src, indexConst(ib, kScanBlock - 1)));
      i32Store(ib, total, t.cells, cCell);
    });
  });
}
} // namespace

//===----------------------------------------------------------------------===//
// mla.chunk_plan
//===----------------------------------------------------------------------===//

LogicalResult tileChunkPlan(ChunkPlanOp op) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  Value c1 = indexConst(b, 1);
  auto [grid, ids] = createGrid(b, c1, c1, c1);
  (void)ids;
  ImplicitLocOpBuilder g =
      ImplicitLocOpBuilder::atBlockBegin(op.getLoc(), &grid.getBody().front());
  Type i32 = g.getI32Type();
  ScanTiles t{memref::AllocaOp::create(g, MemRefType::get({kScanBlock}, i32)),
              memref::AllocaOp::create(g, MemRefType::get({kScanBlock}, i32)),
              memref::AllocaOp::create(g, MemRefType::get({3}, i32))};
  Value batch = dimValue(g, op.getSeqLens(), 0);
  Value c0 = indexConst(g, 0), cTile = indexConst(g, op.getTileKv());
  Value plan = op.getPlan();
  auto tilesOf = [&](ImplicitLocOpBuilder &ib, Value req) -> Value {
    Value len =
        maxIdx(ib, i32Load(ib, op.getSeqLens(), req), indexConst(ib, 0));
    return arith::CeilDivSIOp::create(ib, len, cTile);
  };
  // q = max(1, ceil(T / chunks), ceil(sqrt(T / balance))), T from cell 0
  // (final after the first scan; read inside parallel loops only).
  auto chunkTiles = [&](ImplicitLocOpBuilder &ib, int64_t chunks) -> Value {
    Value total = i32Load(ib, t.cells, indexConst(ib, 0));
    Value q = maxIdx(
        ib, arith::CeilDivSIOp::create(ib, total, indexConst(ib, chunks)),
        indexConst(ib, 1));
    // ceil(sqrt(T / balance)): the least r with r·r·balance >= T, by
    // bisection over [0, 2^16] (T < 2^31), in integers so that every target
    // computes the same q.
    Value lo = indexConst(ib, 0), hi = indexConst(ib, 1 << 16);
    Value cBalance = indexConst(ib, op.getBalance());
    for (int step = 0; step < 17; ++step) {
      Value mid = arith::DivUIOp::create(ib, arith::AddIOp::create(ib, lo, hi),
                                         indexConst(ib, 2));
      Value enough = arith::CmpIOp::create(
          ib, arith::CmpIPredicate::sge,
          arith::MulIOp::create(ib, arith::MulIOp::create(ib, mid, mid),
                                cBalance),
          total);
      hi = arith::SelectOp::create(ib, enough, mid, hi);
      lo = arith::SelectOp::create(ib, enough, lo, mid);
    }
    return maxIdx(ib, q, hi);
  };
  Value cQ = indexConst(g, 2);
  // n_b = max(1, ceil(T_b / q)) with q from cell 2.
  auto chunksOf = [&](ImplicitLocOpBuilder &ib, Value req) -> Value {
    return maxIdx(ib,
                  arith::CeilDivSIOp::create(ib, tilesOf(ib, req),
                                             i32Load(ib, t.cells, cQ)),
                  indexConst(ib, 1));
  };
  // 1. T = Σ ceil(len_b / tile_kv), then q for `chunks` chunks.
  scanCounts(g, t, batch, 0, tilesOf,
             [](ImplicitLocOpBuilder &, Value, Value, Value) {});
  parallelFor(g, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
    i32Store(ib, chunkTiles(ib, op.getChunks()), t.cells, cQ);
  });
  // 2. With refine > 1: K at that q; more than `chunks` (more than one
  // wave of the workgroups aimed at) takes q for refine · chunks.
  if (op.getRefine() > 1) {
    scanCounts(g, t, batch, 1, chunksOf,
               [](ImplicitLocOpBuilder &, Value, Value, Value) {});
    parallelFor(g, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
      Value over = arith::CmpIOp::create(ib, arith::CmpIPredicate::sgt,
                                         i32Load(ib, t.cells, c1),
                                         indexConst(ib, op.getChunks()));
      Value q = arith::SelectOp::create(
          ib, over, chunkTiles(ib, op.getRefine() * op.getChunks()),
          i32Load(ib, t.cells, cQ));
      i32Store(ib, q, t.cells, cQ);
    });
  }
  // 3. n_b; C_b and the requests of the chunks.
  scanCounts(
      g, t, batch, 1, chunksOf,
      [&](ImplicitLocOpBuilder &ib, Value req, Value first, Value n) {
        i32Store(ib, first, plan,
                 {c0, arith::AddIOp::create(ib, req, indexConst(ib, 2))});
        forLoop(ib, c0, n, indexConst(ib, 1),
                [&](ImplicitLocOpBuilder &jb, Value j) {
                  i32Store(
                      jb, req, plan,
                      {indexConst(jb, 1), arith::AddIOp::create(jb, first, j)});
                });
      });
  // 4. The header: K, q, and C_B = K.
  parallelFor(g, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
    Value k = i32Load(ib, t.cells, indexConst(ib, 1));
    i32Store(ib, k, plan, {c0, c0});
    i32Store(ib, i32Load(ib, t.cells, cQ), plan, {c0, indexConst(ib, 1)});
    i32Store(ib, k, plan,
             {c0, arith::AddIOp::create(ib, batch, indexConst(ib, 2))});
  });
  op.erase();
  return success();
}

} // namespace mla::tiling
