//===- TileChunkPlan.cpp - mla-tile for mla.chunk_plan --------------------===//
//
// The plan of decode's length-aware schedule as one workgroup: two or three
// scans over the sequence lengths (with windows, the first also writes each
// request's first tile P_b, and a last loop the windows' ends) in blocks of kScanBlock, each block a
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
  const bool windows = op.getWindows();
  Value cRowP = indexConst(g, 2), cRowW = indexConst(g, 3);
  // n_b = max(1, ceil(T_b / q)) with q from cell 2; with windows, the
  // windows request b meets: (P_b + T_b - 1) / q - P_b / q + 1 (1 without
  // keys), P_b from the plan's row 2.
  auto chunksOf = [&](ImplicitLocOpBuilder &ib, Value req) -> Value {
    Value q = i32Load(ib, t.cells, cQ), tiles = tilesOf(ib, req);
    if (!windows)
      return maxIdx(ib, arith::CeilDivSIOp::create(ib, tiles, q),
                    indexConst(ib, 1));
    Value p = i32Load(ib, plan, {cRowP, req});
    Value last = arith::DivUIOp::create(
        ib,
        arith::SubIOp::create(ib, arith::AddIOp::create(ib, p, tiles),
                              indexConst(ib, 1)),
        q);
    Value met = arith::AddIOp::create(
        ib, arith::SubIOp::create(ib, last, arith::DivUIOp::create(ib, p, q)),
        indexConst(ib, 1));
    Value none = arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, tiles,
                                       indexConst(ib, 0));
    return arith::SelectOp::create(ib, none, indexConst(ib, 1), met);
  };
  // 1. T = Σ ceil(len_b / tile_kv) (with windows, P_b into row 2), then q
  // for `chunks` chunks.
  scanCounts(g, t, batch, 0, tilesOf,
             [&](ImplicitLocOpBuilder &ib, Value req, Value first, Value) {
               if (windows)
                 i32Store(ib, first, plan, {cRowP, req});
             });
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
  // 3. n_b; C_b and the requests of the chunks; with windows, each
  // window's first chunk: the one that starts at its first tile (chunk j >
  // 0 of a request, or its first when P_b is a window's first tile).
  scanCounts(
      g, t, batch, 1, chunksOf,
      [&](ImplicitLocOpBuilder &ib, Value req, Value first, Value n) {
        i32Store(ib, first, plan,
                 {c0, arith::AddIOp::create(ib, req, indexConst(ib, 2))});
        Value p, q, w0, starts;
        if (windows) {
          p = i32Load(ib, plan, {cRowP, req});
          q = i32Load(ib, t.cells, cQ);
          w0 = arith::DivUIOp::create(ib, p, q);
          Value aligned = arith::CmpIOp::create(
              ib, arith::CmpIPredicate::eq, arith::RemUIOp::create(ib, p, q),
              indexConst(ib, 0));
          Value keys =
              arith::CmpIOp::create(ib, arith::CmpIPredicate::sgt,
                                    tilesOf(ib, req), indexConst(ib, 0));
          starts = arith::AndIOp::create(ib, aligned, keys);
        }
        forLoop(ib, c0, n, indexConst(ib, 1),
                [&](ImplicitLocOpBuilder &jb, Value j) {
                  Value k = arith::AddIOp::create(jb, first, j);
                  i32Store(jb, req, plan, {indexConst(jb, 1), k});
                  if (!windows)
                    return;
                  Value opens = arith::OrIOp::create(
                      jb, starts,
                      arith::CmpIOp::create(jb, arith::CmpIPredicate::sgt, j,
                                            indexConst(jb, 0)));
                  auto ifOpens =
                      scf::IfOp::create(jb, opens, /*withElseRegion=*/false);
                  ImplicitLocOpBuilder ob(jb.getLoc(),
                                          ifOpens.thenBlock()->getTerminator());
                  i32Store(ob, k, plan,
                           {cRowW, arith::AddIOp::create(ob, w0, j)});
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
  // 5. With windows: window 0 starts at chunk 0 (with the requests
  // without keys before the first key), and the windows past the last
  // (w >= ceil(T / q)) at K (the last window ends at K).
  if (windows) {
    parallelFor(
        g, {indexConst(g, op.getChunks() + 1)},
        [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
          Value w = iv[0];
          Value used = arith::CeilDivSIOp::create(ib, i32Load(ib, t.cells, c0),
                                                  i32Load(ib, t.cells, cQ));
          Value isFirst = arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, w,
                                                indexConst(ib, 0));
          Value past =
              arith::CmpIOp::create(ib, arith::CmpIPredicate::sge, w, used);
          auto ifSet =
              scf::IfOp::create(ib, arith::OrIOp::create(ib, isFirst, past),
                                /*withElseRegion=*/false);
          ImplicitLocOpBuilder sb(ib.getLoc(),
                                  ifSet.thenBlock()->getTerminator());
          Value v =
              arith::SelectOp::create(sb, isFirst, indexConst(sb, 0),
                                      i32Load(sb, t.cells, indexConst(sb, 1)));
          i32Store(sb, v, plan, {cRowW, w});
        });
  }
  op.erase();
  return success();
}

} // namespace mla::tiling
