//===- TileChunkPlan.cpp - mla-tile for mla.chunk_plan --------------------===//
//
// The plan of decode's length-aware schedule as one workgroup: two or three
// scans over the sequence lengths in blocks of kScanBlock (with windows,
// the first also writes each request's first tile P_b, and a last loop the
// windows' ends), each block a parallel load and a Hillis-Steele scan in
// workgroup memory (steps past the block's requests skipped), with the
// running total kept in a workgroup-memory cell; adaptive plans sum their
// search's candidate counts between the scans (a tree reduction per
// block). Every value the scans share is read in a parallel loop (each
// followed by a barrier on GPUs), never by the scalar code of all threads,
// so that no thread reads a cell while another rewrites it. A batch of at
// most kScanBlock requests is read from global memory once: its key tiles
// (and, with windows, first tiles and lengths) are kept in workgroup
// memory for the scans (RequestCache).
//
//===----------------------------------------------------------------------===//
#include "TileCore.h"
#include "Utils.h"
#include "mla/runtime/ChunkSchedule.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mla;
using namespace mla::tiling;

namespace mla::tiling {
namespace {
/// Lengths per scan block (a power of four: the scan has log2 steps, in
/// pairs).
constexpr int64_t kScanBlock = 256;
static_assert(llvm::isPowerOf2_64(kScanBlock) &&
                  (kScanBlock & 0x5555555555555555) == kScanBlock,
              "a power of four: the scan's steps come in pairs");

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
    // Inclusive Hillis-Steele scan: log2(kScanBlock) steps, a <-> b, in
    // pairs (d, 2d); a pair with d at or past the block's requests is
    // skipped, both steps at once so that the result stays in the same
    // buffer: the entries of the block's requests are final by then (the
    // entries past them, zeros, no longer read but for the block's total
    // at n - 1).
    Value n = minIdx(lb, arith::SubIOp::create(lb, batch, base), cBlock);
    Value src = t.a, dst = t.b;
    for (int64_t d = 1; d < kScanBlock; d *= 4) {
      auto ifPair =
          scf::IfOp::create(lb,
                            arith::CmpIOp::create(lb, arith::CmpIPredicate::slt,
                                                  indexConst(lb, d), n),
                            /*withElseRegion=*/false);
      ImplicitLocOpBuilder pb(lb.getLoc(), ifPair.thenBlock()->getTerminator());
      for (int64_t step : {d, 2 * d}) {
        parallelFor(pb, {cBlock}, [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
          Value cd = indexConst(ib, step);
          Value has =
              arith::CmpIOp::create(ib, arith::CmpIPredicate::sge, iv[0], cd);
          Value prev = maxIdx(ib, arith::SubIOp::create(ib, iv[0], cd),
                              indexConst(ib, 0));
          Value add = arith::SelectOp::create(ib, has, i32Load(ib, src, prev),
                                              indexConst(ib, 0));
          i32Store(ib, arith::AddIOp::create(ib, i32Load(ib, src, iv[0]), add),
                   dst, iv[0]);
        });
        std::swap(src, dst);
      }
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
          i32Load(ib, src, ValueRange{arith::SubIOp::create(ib, n, c1)}));
      i32Store(ib, total, t.cells, cCell);
    });
  });
}

/// Sums `count(b, j)` over b in [0, batch) for each j in [0, n) into
/// cells [cell, cell + n): per block of kScanBlock requests, a parallel
/// evaluation of the n counts into `buf` (n x kScanBlock) and a tree
/// reduction there (log2 steps, each a parallel loop), added to the cells.
void sumCounts(
    ImplicitLocOpBuilder &g, Value buf, Value cells, Value batch, int64_t cell,
    int64_t n,
    function_ref<Value(ImplicitLocOpBuilder &, Value, int64_t)> count) {
  Value c0 = indexConst(g, 0), c1 = indexConst(g, 1);
  Value cBlock = indexConst(g, kScanBlock);
  auto at = [](ImplicitLocOpBuilder &ib, int64_t v) {
    return indexConst(ib, v);
  };
  parallelFor(g, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
    for (int64_t j = 0; j < n; ++j)
      i32Store(ib, at(ib, 0), cells, at(ib, cell + j));
  });
  forLoop(g, c0, batch, cBlock, [&](ImplicitLocOpBuilder &lb, Value base) {
    parallelFor(lb, {cBlock}, [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
      Value bIdx = arith::AddIOp::create(ib, base, iv[0]);
      Value in =
          arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, bIdx, batch);
      // Past the batch: 0, without reading the lengths.
      Value clamped = arith::SelectOp::create(ib, in, bIdx, at(ib, 0));
      for (int64_t j = 0; j < n; ++j)
        i32Store(
            ib,
            arith::SelectOp::create(ib, in, count(ib, clamped, j), at(ib, 0)),
            buf, {at(ib, j), iv[0]});
    });
    // A step whose d is at or past the block's requests adds zeros (the
    // entries past them): skipped.
    Value inBlock = minIdx(lb, arith::SubIOp::create(lb, batch, base), cBlock);
    for (int64_t d = kScanBlock / 2; d >= 1; d /= 2) {
      auto ifStep =
          scf::IfOp::create(lb,
                            arith::CmpIOp::create(lb, arith::CmpIPredicate::slt,
                                                  at(lb, d), inBlock),
                            /*withElseRegion=*/false);
      ImplicitLocOpBuilder sb(lb.getLoc(), ifStep.thenBlock()->getTerminator());
      parallelFor(sb, {at(sb, d)},
                  [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
                    Value other = arith::AddIOp::create(ib, iv[0], at(ib, d));
                    for (int64_t j = 0; j < n; ++j)
                      i32Store(ib,
                               arith::AddIOp::create(
                                   ib, i32Load(ib, buf, {at(ib, j), iv[0]}),
                                   i32Load(ib, buf, {at(ib, j), other})),
                               buf, {at(ib, j), iv[0]});
                  });
    }
    parallelFor(lb, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
      for (int64_t j = 0; j < n; ++j)
        i32Store(
            ib,
            arith::AddIOp::create(ib, i32Load(ib, cells, at(ib, cell + j)),
                                  i32Load(ib, buf, {at(ib, j), at(ib, 0)})),
            cells, at(ib, cell + j));
    });
  });
}
} // namespace

//===----------------------------------------------------------------------===//
// mla.chunk_plan
//===----------------------------------------------------------------------===//

namespace {
/// Cells of the scans' workgroup memory; adaptive plans add one per
/// candidate of their search (kCandidates + j: the request-aligned chunks
/// of q + j tiles).
enum Cell : int64_t {
  kTotalTiles,
  kChunkCount,
  kChunkTiles,
  kWindowsChosen,
  kCandidates
};

/// What a batch of at most kScanBlock requests keeps in workgroup memory,
/// so that the scans after the first read no global memory: T_b (filled
/// before the first scan) and, with windows, P_b (written by the first
/// scan beside the plan's row 2). Each phase of the plan is a round trip to
/// global memory otherwise (five in all).
struct RequestCache {
  Value tiles, firsts, lens; ///< firsts, lens: with windows only
  Value used;                ///< i1: the batch has at most kScanBlock requests
};

/// One index: `then` where `cond` holds, `otherwise` elsewhere (an scf.if,
/// so that only the taken side's loads run).
Value indexIf(ImplicitLocOpBuilder &ib, Value cond,
              function_ref<Value(ImplicitLocOpBuilder &)> then,
              function_ref<Value(ImplicitLocOpBuilder &)> otherwise) {
  auto ifOp = scf::IfOp::create(ib, TypeRange{ib.getIndexType()}, cond,
                                /*withElseRegion=*/true);
  ImplicitLocOpBuilder tb(ib.getLoc(), ifOp.thenBlock(),
                          ifOp.thenBlock()->end());
  scf::YieldOp::create(tb, then(tb));
  ImplicitLocOpBuilder eb(ib.getLoc(), ifOp.elseBlock(),
                          ifOp.elseBlock()->end());
  scf::YieldOp::create(eb, otherwise(eb));
  return ifOp.getResult(0);
}

/// Builds one mla.chunk_plan's workgroup: the sizes it computes and the
/// plan rows it writes (MLAOps.td describes the plan).
struct PlanBuilder {
  mutable ChunkPlanOp op; // its getters are not const
  ImplicitLocOpBuilder &g;
  ScanTiles t;
  Value batch, plan;
  RequestCache cache;

  Value cell(ImplicitLocOpBuilder &ib, Cell c) const {
    return i32Load(ib, t.cells, indexConst(ib, c));
  }
  /// max(len_b, 0) from the lengths.
  Value lengthOf(ImplicitLocOpBuilder &ib, Value req) const {
    return maxIdx(ib, i32Load(ib, op.getSeqLens(), req), indexConst(ib, 0));
  }
  /// ceil(len / tile_kv) for a length `len` >= 0.
  Value tilesOfLength(ImplicitLocOpBuilder &ib, Value len) const {
    return arith::CeilDivSIOp::create(ib, len, indexConst(ib, op.getTileKv()));
  }
  /// T_b = ceil(max(len_b, 0) / tile_kv) from the lengths.
  Value tilesFromLengths(ImplicitLocOpBuilder &ib, Value req) const {
    return tilesOfLength(ib, lengthOf(ib, req));
  }
  /// T_b, from the cache where it is used (after fillCache).
  Value tilesOf(ImplicitLocOpBuilder &ib, Value req) const {
    return indexIf(
        ib, cache.used,
        [&](ImplicitLocOpBuilder &cb) { return i32Load(cb, cache.tiles, req); },
        [&](ImplicitLocOpBuilder &ub) { return tilesFromLengths(ub, req); });
  }
  /// max(len_b, 0), from the cache where it is used (with windows).
  Value lenOf(ImplicitLocOpBuilder &ib, Value req) const {
    return indexIf(
        ib, cache.used,
        [&](ImplicitLocOpBuilder &cb) { return i32Load(cb, cache.lens, req); },
        [&](ImplicitLocOpBuilder &ub) { return lengthOf(ub, req); });
  }
  /// The cache's T_b (and, with windows, lengths), one parallel phase (a
  /// barrier on GPUs).
  void fillCache() const {
    parallelFor(g, {indexConst(g, kScanBlock)},
                [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
                  Value in = arith::CmpIOp::create(
                      ib, arith::CmpIPredicate::slt, iv[0], batch);
                  auto ifIn = scf::IfOp::create(
                      ib, arith::AndIOp::create(ib, cache.used, in),
                      /*withElseRegion=*/false);
                  ImplicitLocOpBuilder tb(ib.getLoc(),
                                          ifIn.thenBlock()->getTerminator());
                  Value len = lengthOf(tb, iv[0]);
                  i32Store(tb, tilesOfLength(tb, len), cache.tiles, iv[0]);
                  if (cache.lens)
                    i32Store(tb, len, cache.lens, iv[0]);
                });
  }
  /// P_b into the plan's row 2 and, where it is used, the cache.
  void storeFirstTile(ImplicitLocOpBuilder &ib, Value req, Value first) const {
    i32Store(ib, first, plan, {indexConst(ib, 2), req});
    auto ifUsed = scf::IfOp::create(ib, cache.used, /*withElseRegion=*/false);
    ImplicitLocOpBuilder tb(ib.getLoc(), ifUsed.thenBlock()->getTerminator());
    i32Store(tb, first, cache.firsts, req);
  }
  /// q = max(1, ceil(T / chunks), ceil(sqrt(T / balance))), T from its
  /// cell (final after the first scan; read inside parallel loops only).
  /// Adaptive: max(1, ceil(T / chunks), ceil(T / (max(B, 1) ·
  /// kMergeChunks)), 2·T > chunks ? ceil(kMinChunkKeys / tile_kv) : 1),
  /// the least q of its search.
  Value chunkTiles(ImplicitLocOpBuilder &ib, int64_t chunks) const {
    Value total = cell(ib, kTotalTiles);
    Value q = maxIdx(
        ib, arith::CeilDivSIOp::create(ib, total, indexConst(ib, chunks)),
        indexConst(ib, 1));
    if (op.getAdaptive()) {
      Value perMerge =
          arith::MulIOp::create(ib, maxIdx(ib, batch, indexConst(ib, 1)),
                                indexConst(ib, rt::schedule::kMergeChunks));
      Value crowded = arith::CmpIOp::create(
          ib, arith::CmpIPredicate::sgt,
          arith::MulIOp::create(ib, total, indexConst(ib, 2)),
          indexConst(ib, chunks));
      Value least = arith::SelectOp::create(
          ib, crowded,
          indexConst(ib, llvm::divideCeil(rt::schedule::kMinChunkKeys,
                                          op.getTileKv())),
          indexConst(ib, 1));
      return maxIdx(ib, maxIdx(ib, q, least),
                    arith::CeilDivSIOp::create(ib, total, perMerge));
    }
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
  }
  /// Request-aligned chunks of request `req`: max(1, ceil(T_b / q)).
  Value requestChunks(ImplicitLocOpBuilder &ib, Value req) const {
    return maxIdx(
        ib,
        arith::CeilDivSIOp::create(ib, tilesOf(ib, req), cell(ib, kChunkTiles)),
        indexConst(ib, 1));
  }
  /// The request-aligned chunks of request `req` for chunks of `q` tiles,
  /// in unsigned 32-bit arithmetic: max(1, (T_b + q - 1) / q) (T_b >= 0,
  /// q >= 1, both below 2^31 as T is): the search's counts, where a 64-bit
  /// signed ceiling division per candidate made the plan kernel slower.
  Value requestChunks32(ImplicitLocOpBuilder &ib, Value req, Value q) const {
    Type i32 = ib.getI32Type();
    auto to32 = [&](Value v) {
      return arith::IndexCastUIOp::create(ib, i32, v).getResult();
    };
    Value t = to32(tilesOf(ib, req)), q32 = to32(q);
    Value one = arith::ConstantIntOp::create(ib, i32, 1);
    Value n = arith::DivUIOp::create(
        ib, arith::SubIOp::create(ib, arith::AddIOp::create(ib, t, q32), one),
        q32);
    n = arith::MaxUIOp::create(ib, n, one);
    return arith::IndexCastUIOp::create(ib, ib.getIndexType(), n);
  }
  /// P_b, request `req`'s first tile in the batch (the plan's row 2 until
  /// an adaptive plan that chose request-aligned chunks rewrites it).
  Value firstTile(ImplicitLocOpBuilder &ib, Value req) const {
    return indexIf(
        ib, cache.used,
        [&](ImplicitLocOpBuilder &cb) {
          return i32Load(cb, cache.firsts, req);
        },
        [&](ImplicitLocOpBuilder &ub) {
          return i32Load(ub, plan, {indexConst(ub, 2), req});
        });
  }
  /// The windows request `req` meets: (P_b + T_b - 1) / q - P_b / q + 1
  /// (1 without keys).
  Value windowChunks(ImplicitLocOpBuilder &ib, Value req) const {
    Value q = cell(ib, kChunkTiles), tiles = tilesOf(ib, req);
    Value p = firstTile(ib, req);
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
  }
  /// Whether this launch cuts windows (i1): always with windows, by the
  /// plan's choice when adaptive.
  Value windowsChosen(ImplicitLocOpBuilder &ib) const {
    if (!op.getAdaptive())
      return arith::ConstantIntOp::create(ib, 1, 1);
    return arith::CmpIOp::create(ib, arith::CmpIPredicate::ne,
                                 cell(ib, kWindowsChosen), indexConst(ib, 0));
  }
  /// n_b of the plan's cut (adaptive: only the chosen cut's count is
  /// computed, so that request-aligned chunks read no window position).
  Value chunksOf(ImplicitLocOpBuilder &ib, Value req) const {
    if (!op.getWindows())
      return requestChunks(ib, req);
    if (!op.getAdaptive())
      return windowChunks(ib, req);
    return indexIf(
        ib, windowsChosen(ib),
        [&](ImplicitLocOpBuilder &tb) { return windowChunks(tb, req); },
        [&](ImplicitLocOpBuilder &eb) { return requestChunks(eb, req); });
  }
  /// What recording the window starts of request `req`'s chunks needs,
  /// read once before its chunk loop: its first window P_b / q, whether
  /// its first chunk starts that window (P_b on a window's first tile,
  /// with keys), and its P_b, T_b and length for the keys of the chunks
  /// that open windows (rows 4-7).
  struct WindowStart {
    Value window, firstOpens;
    Value p, tiles, len;
  };
  WindowStart windowStartOf(ImplicitLocOpBuilder &ib, Value req) const {
    Value q = cell(ib, kChunkTiles), p = firstTile(ib, req);
    Value tiles = tilesOf(ib, req);
    Value aligned = arith::CmpIOp::create(ib, arith::CmpIPredicate::eq,
                                          arith::RemUIOp::create(ib, p, q),
                                          indexConst(ib, 0));
    Value keys = arith::CmpIOp::create(ib, arith::CmpIPredicate::sgt, tiles,
                                       indexConst(ib, 0));
    return {arith::DivUIOp::create(ib, p, q),
            arith::AndIOp::create(ib, aligned, keys), p, tiles, lenOf(ib, req)};
  }
  /// Window `w`'s first chunk into rows 4-7: request `req`, tiles
  /// [startTile, endTile) of it as keys [startTile·tile_kv,
  /// min(len, endTile·tile_kv)), its length `len` (max(len_b, 0)).
  void storeOpening(ImplicitLocOpBuilder &ib, Value w, Value req,
                    Value startTile, Value endTile, Value len) const {
    Value cTile = indexConst(ib, op.getTileKv());
    i32Store(ib, req, plan,
             {indexConst(ib, rt::schedule::kOpeningRequestRow), w});
    i32Store(ib, arith::MulIOp::create(ib, startTile, cTile), plan,
             {indexConst(ib, rt::schedule::kOpeningStartRow), w});
    i32Store(ib, minIdx(ib, len, arith::MulIOp::create(ib, endTile, cTile)),
             plan, {indexConst(ib, rt::schedule::kOpeningEndRow), w});
    i32Store(ib, len, plan,
             {indexConst(ib, rt::schedule::kOpeningLengthRow), w});
  }
  /// Chunk j of a request (chunk k) records k as its window's first when
  /// it starts the window: j > 0, or the request's first chunk when
  /// `ws.firstOpens`; and its keys (the window's tiles [w·q, (w+1)·q) of
  /// the request's [P_b, P_b + T_b)) into rows 4-7.
  void recordWindowStart(ImplicitLocOpBuilder &jb, const WindowStart &ws,
                         Value j, Value k, Value req) const {
    Value later = arith::CmpIOp::create(jb, arith::CmpIPredicate::sgt, j,
                                        indexConst(jb, 0));
    auto ifOpens =
        scf::IfOp::create(jb, arith::OrIOp::create(jb, ws.firstOpens, later),
                          /*withElseRegion=*/false);
    ImplicitLocOpBuilder ob(jb.getLoc(), ifOpens.thenBlock()->getTerminator());
    Value w = arith::AddIOp::create(ob, ws.window, j);
    i32Store(ob, k, plan, {indexConst(ob, 3), w});
    Value q = cell(ob, kChunkTiles);
    Value from = arith::MulIOp::create(ob, w, q);
    // It opens the window: from >= P_b.
    Value startTile = arith::SubIOp::create(ob, from, ws.p);
    Value endTile = minIdx(
        ob, ws.tiles,
        arith::SubIOp::create(ob, arith::AddIOp::create(ob, from, q), ws.p));
    storeOpening(ob, w, req, startTile, endTile, ws.len);
  }
  /// Request `req`'s chunks [first, first + n): their request in row 1
  /// and, where the plan cut windows, their windows' first chunks in row
  /// 3 and those chunks' keys in rows 4-7 (adaptive: only when it chose
  /// windows; when it did not, C_b·q in row 2 in place of P_b, and each
  /// chunk k's keys at window k).
  void writeChunks(ImplicitLocOpBuilder &ib, Value req, Value first,
                   Value n) const {
    // `ws`: the windows' cut. `aligned`: request-aligned chunks in the
    // windows' layout (adaptive), whose rows 4-7 need T_b and the length.
    struct Aligned {
      Value tiles, len;
    };
    auto loop = [&](ImplicitLocOpBuilder &lb, const WindowStart *ws,
                    const Aligned *aligned) {
      forLoop(lb, indexConst(lb, 0), n, indexConst(lb, 1),
              [&](ImplicitLocOpBuilder &jb, Value j) {
                Value k = arith::AddIOp::create(jb, first, j);
                i32Store(jb, req, plan, {indexConst(jb, 1), k});
                if (ws)
                  recordWindowStart(jb, *ws, j, k, req);
                if (aligned) {
                  Value q = cell(jb, kChunkTiles);
                  Value startTile = arith::MulIOp::create(jb, j, q);
                  storeOpening(jb, k, req, startTile,
                               minIdx(jb, aligned->tiles,
                                      arith::AddIOp::create(jb, startTile, q)),
                               aligned->len);
                }
              });
    };
    if (!op.getWindows())
      return loop(ib, nullptr, nullptr);
    if (!op.getAdaptive()) {
      WindowStart ws = windowStartOf(ib, req);
      return loop(ib, &ws, nullptr);
    }
    auto ifWindows =
        scf::IfOp::create(ib, windowsChosen(ib), /*withElseRegion=*/true);
    ImplicitLocOpBuilder tb(ib.getLoc(),
                            ifWindows.thenBlock()->getTerminator());
    WindowStart ws = windowStartOf(tb, req);
    loop(tb, &ws, nullptr);
    ImplicitLocOpBuilder eb(ib.getLoc(),
                            ifWindows.elseBlock()->getTerminator());
    Aligned aligned{tilesOf(eb, req), lenOf(eb, req)};
    loop(eb, nullptr, &aligned);
    // Request-aligned chunks in the windows' layout: row 2 holds C_b·q.
    i32Store(eb, arith::MulIOp::create(eb, first, cell(eb, kChunkTiles)), plan,
             {indexConst(eb, 2), req});
  }
  /// Row 3's other entries, for w in [0, chunks]: windows: window 0 starts
  /// at chunk 0 (with the requests without keys before the first key) and
  /// the windows past the last (w >= ceil(T / q)) at K; request-aligned
  /// chunks (adaptive): window w is chunk min(w, K), and row 2 holds C_b·q
  /// in place of P_b (writeChunks), so that window w's range in the batch
  /// is chunk w's in its request. Rows 4-7 of the windows that no chunk
  /// with keys opens (writeChunks writes the others): an empty range.
  void finishWindows() {
    parallelFor(
        g, {indexConst(g, op.getChunks() + 1)},
        [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
          Value w = iv[0], k = cell(ib, kChunkCount);
          Value used = arith::CeilDivSIOp::create(ib, cell(ib, kTotalTiles),
                                                  cell(ib, kChunkTiles));
          Value isFirst = arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, w,
                                                indexConst(ib, 0));
          Value past =
              arith::CmpIOp::create(ib, arith::CmpIPredicate::sge, w, used);
          Value chosen = windowsChosen(ib);
          Value setWindow = arith::AndIOp::create(
              ib, chosen, arith::OrIOp::create(ib, isFirst, past));
          Value notChosen = arith::XOrIOp::create(
              ib, chosen, arith::ConstantIntOp::create(ib, 1, 1));
          auto ifSet = scf::IfOp::create(
              ib, arith::OrIOp::create(ib, setWindow, notChosen),
              /*withElseRegion=*/false);
          ImplicitLocOpBuilder sb(ib.getLoc(),
                                  ifSet.thenBlock()->getTerminator());
          Value v = arith::SelectOp::create(
              sb, chosen,
              arith::SelectOp::create(sb, isFirst, indexConst(sb, 0), k),
              minIdx(sb, w, k));
          i32Store(sb, v, plan, {indexConst(sb, 3), w});
          // Rows 4-7 of the windows no chunk with keys opened: an empty
          // range of request 0 (past the last window, no chunk at all;
          // window 0, with keys elsewhere, request 0's chunk without keys).
          // T_0 is read only for window 0 of a cut with keys (so B >= 1).
          Value zero = indexConst(ib, 0);
          Value readsFirst = arith::AndIOp::create(
              ib, chosen,
              arith::AndIOp::create(
                  ib, isFirst,
                  arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, w,
                                        used)));
          Value firstTiles = indexIf(
              ib, readsFirst,
              [&](ImplicitLocOpBuilder &tb) { return tilesOf(tb, zero); },
              [&](ImplicitLocOpBuilder &eb) { return indexConst(eb, 1); });
          Value firstKeyless = arith::CmpIOp::create(
              ib, arith::CmpIPredicate::eq, firstTiles, zero);
          Value empty = arith::SelectOp::create(
              ib, chosen, arith::OrIOp::create(ib, past, firstKeyless),
              arith::CmpIOp::create(ib, arith::CmpIPredicate::sge, w, k));
          auto ifEmpty = scf::IfOp::create(ib, empty, /*withElseRegion=*/false);
          ImplicitLocOpBuilder eb(ib.getLoc(),
                                  ifEmpty.thenBlock()->getTerminator());
          storeOpening(eb, w, indexConst(eb, 0), indexConst(eb, 0),
                       indexConst(eb, 0), indexConst(eb, 0));
        });
  }
};
} // namespace

LogicalResult tileChunkPlan(ChunkPlanOp op) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  Value c1 = indexConst(b, 1);
  auto [grid, ids] = createGrid(b, c1, c1, c1);
  (void)ids;
  ImplicitLocOpBuilder g =
      ImplicitLocOpBuilder::atBlockBegin(op.getLoc(), &grid.getBody().front());
  Type i32 = g.getI32Type();
  const bool windows = op.getWindows(), adaptive = op.getAdaptive();
  ScanTiles t{
      memref::AllocaOp::create(g, MemRefType::get({kScanBlock}, i32)),
      memref::AllocaOp::create(g, MemRefType::get({kScanBlock}, i32)),
      memref::AllocaOp::create(
          g, MemRefType::get(
                 {adaptive ? kCandidates + rt::schedule::kAdaptiveSearch : 3},
                 i32))};
  Value batchSize = dimValue(g, op.getSeqLens(), 0);
  auto cacheBlock = [&] {
    return memref::AllocaOp::create(g, MemRefType::get({kScanBlock}, i32));
  };
  RequestCache cache{cacheBlock(), windows ? cacheBlock() : Value(),
                     windows ? cacheBlock() : Value(),
                     arith::CmpIOp::create(g, arith::CmpIPredicate::sle,
                                           batchSize,
                                           indexConst(g, kScanBlock))};
  PlanBuilder pb{op, g, t, batchSize, op.getPlan(), cache};
  Value batch = pb.batch, plan = pb.plan;
  Value c0 = indexConst(g, 0);
  Value cQ = indexConst(g, kChunkTiles);
  auto tilesOf = [&](ImplicitLocOpBuilder &ib, Value req) {
    return pb.tilesOf(ib, req);
  };
  auto chunksOf = [&](ImplicitLocOpBuilder &ib, Value req) {
    return pb.chunksOf(ib, req);
  };
  // 1. T = Σ T_b (with windows, P_b into row 2), then q for `chunks`
  // chunks.
  pb.fillCache();
  scanCounts(g, t, batch, kTotalTiles, tilesOf,
             [&](ImplicitLocOpBuilder &ib, Value req, Value first, Value) {
               if (windows)
                 pb.storeFirstTile(ib, req, first);
             });
  parallelFor(g, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
    i32Store(ib, pb.chunkTiles(ib, op.getChunks()), t.cells, cQ);
  });
  // 2. Adaptive: the request-aligned chunks of q + j tiles for each j of
  // the search; the least q + j whose chunks fit one wave (at most
  // `chunks`) is taken, and when none fits the windows of q.
  if (adaptive) {
    constexpr int64_t n = rt::schedule::kAdaptiveSearch;
    Value search =
        memref::AllocaOp::create(g, MemRefType::get({n, kScanBlock}, i32));
    sumCounts(g, search, t.cells, batch, kCandidates, n,
              [&](ImplicitLocOpBuilder &ib, Value req, int64_t j) {
                Value q = arith::AddIOp::create(ib, pb.cell(ib, kChunkTiles),
                                                indexConst(ib, j));
                return pb.requestChunks32(ib, req, q);
              });
    parallelFor(g, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
      Value q0 = pb.cell(ib, kChunkTiles), q = q0;
      Value windowsCut = indexConst(ib, 1);
      for (int64_t j = n - 1; j >= 0; --j) {
        Value fits = arith::CmpIOp::create(
            ib, arith::CmpIPredicate::sle,
            pb.cell(ib, static_cast<Cell>(kCandidates + j)),
            indexConst(ib, op.getChunks()));
        q = arith::SelectOp::create(
            ib, fits, arith::AddIOp::create(ib, q0, indexConst(ib, j)), q);
        windowsCut =
            arith::SelectOp::create(ib, fits, indexConst(ib, 0), windowsCut);
      }
      i32Store(ib, q, t.cells, cQ);
      i32Store(ib, windowsCut, t.cells, indexConst(ib, kWindowsChosen));
    });
  }
  // 2. Otherwise, with refine > 1: K at that q; more than `chunks` (more
  // than one wave of the workgroups aimed at) takes q for refine · chunks.
  if (op.getRefine() > 1) {
    scanCounts(
        g, t, batch, kChunkCount,
        [&](ImplicitLocOpBuilder &ib, Value req) {
          return pb.requestChunks(ib, req);
        },
        [](ImplicitLocOpBuilder &, Value, Value, Value) {});
    parallelFor(g, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
      Value over = arith::CmpIOp::create(ib, arith::CmpIPredicate::sgt,
                                         pb.cell(ib, kChunkCount),
                                         indexConst(ib, op.getChunks()));
      Value q = arith::SelectOp::create(
          ib, over, pb.chunkTiles(ib, op.getRefine() * op.getChunks()),
          pb.cell(ib, kChunkTiles));
      i32Store(ib, q, t.cells, cQ);
    });
  }
  // 3. n_b; C_b and the requests of the chunks; with windows, each
  // window's first chunk.
  scanCounts(g, t, batch, kChunkCount, chunksOf,
             [&](ImplicitLocOpBuilder &ib, Value req, Value first, Value n) {
               i32Store(
                   ib, first, plan,
                   {c0, arith::AddIOp::create(ib, req, indexConst(ib, 2))});
               pb.writeChunks(ib, req, first, n);
             });
  // 4. The header: K, q, and C_B = K.
  parallelFor(g, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
    Value k = pb.cell(ib, kChunkCount);
    i32Store(ib, k, plan, {c0, c0});
    i32Store(ib, pb.cell(ib, kChunkTiles), plan, {c0, indexConst(ib, 1)});
    i32Store(ib, k, plan,
             {c0, arith::AddIOp::create(ib, batch, indexConst(ib, 2))});
  });
  // 5. With windows: the rest of row 3.
  if (windows)
    pb.finishWindows();
  // 6. The requests' finished-chunk counters (#mla.config fused_merge),
  // zero before the chunks count.
  parallelFor(g, {batch}, [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
    i32Store(ib, indexConst(ib, 0), plan,
             {indexConst(ib, rt::schedule::counterRow(windows)), iv[0]});
  });
  op.erase();
  return success();
}

} // namespace mla::tiling
