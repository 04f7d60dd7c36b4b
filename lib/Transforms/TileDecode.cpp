//===- TileDecode.cpp - mla-tile for mla.decode ---------------------------===//
#include "AttentionLayout.h"
#include "KindRoles.h"
#include "TileCore.h"
#include "Utils.h"
#include "mla/runtime/ChunkSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/FormatVariadic.h"

#include <optional>

using namespace mlir;
using namespace mla;
using namespace mla::tiling;

namespace mla::tiling {
namespace {
/// Describes the kernel on its function (`mla.kernel_info`), for the package
/// manifest.
void recordDecodeInfo(DecodeOp op) {
  auto func = op->getParentOfType<func::FuncOp>();
  if (!func)
    return;
  Builder b(op.getContext());
  ConfigAttr cfg = op.getConfigAttr();
  int64_t page = op.getPageSize();
  std::string config =
      llvm::formatv("tile_kv={0} kv_splits={1} head_group={2} warps={3} "
                    "stages={4}",
                    cfg.getTileKv(), cfg.getKvSplits(), cfg.getHeadGroup(),
                    cfg.getWarps(), cfg.getStages())
          .str();
  if (cfg.getMinWorkgroups())
    config += " min_workgroups=" + std::to_string(cfg.getMinWorkgroups());
  if (!cfg.getWgmma())
    config += " wgmma=0";
  if (!cfg.getBlockedCopies())
    config += " blocked_copies=0";
  if (cfg.getKvChunks())
    config += " kv_chunks=" + std::to_string(cfg.getKvChunks());
  if (cfg.getWorkgroups())
    config += " workgroups=" + std::to_string(cfg.getWorkgroups());
  if (cfg.getKvChunks() && cfg.getChunkBalance() != rt::schedule::kChunkBalance)
    config += " chunk_balance=" + std::to_string(cfg.getChunkBalance());
  if (cfg.getMergeGroups() != 1)
    config += " merge_groups=" + std::to_string(cfg.getMergeGroups());
  if (cfg.getChunkWindows())
    config += " chunk_windows=" + std::to_string(cfg.getChunkWindows());
  if (cfg.getFusedMerge())
    config += " fused_merge=1";
  if (cfg.getLeadScores())
    config += " lead_scores=" + std::to_string(cfg.getLeadScores());
  NamedAttrList info;
  info.append("kernel", b.getStringAttr(rt::kernels::kDecode));
  info.append("dtype",
              b.getStringAttr(typeName(op.getQ().getType().getElementType())));
  info.append("heads", b.getI64IntegerAttr(op.getNumHeads()));
  info.append("q_len", b.getI64IntegerAttr(op.getQLen()));
  info.append("latent_dim", b.getI64IntegerAttr(op.getLatentDim()));
  info.append("rope_dim", b.getI64IntegerAttr(op.getRopeDim()));
  info.append("page_size",
              b.getI64IntegerAttr(ShapedType::isDynamic(page) ? 0 : page));
  info.append("config", b.getStringAttr(config));
  func->setAttr(MLADialect::kKernelInfoAttrName,
                info.getDictionary(op.getContext()));
  tagKindRoles(rt::KernelKind::Decode,
               {op.getQ(), op.getKv(), op.getBlockTable(), op.getSeqLens(),
                op.getScale(), op.getO(), op.getLse()});
}

/// Row `i * group + hh` of the tiles is query token i, head headBase + hh.
Value tileRow(ImplicitLocOpBuilder &ib, Value cGroup, Value i, Value hh) {
  return arith::AddIOp::create(ib, arith::MulIOp::create(ib, i, cGroup), hh);
}

/// The inverse of tileRow: query i and head hh in the group of tile row
/// `row` = i * group + hh.
Value rowQuery(ImplicitLocOpBuilder &ib, Value row, int64_t group) {
  return group == 1 ? row
                    : arith::DivUIOp::create(ib, row, indexConst(ib, group))
                          .getResult();
}
Value rowHead(ImplicitLocOpBuilder &ib, Value row, int64_t group) {
  return group == 1 ? indexConst(ib, 0)
                    : arith::RemUIOp::create(ib, row, indexConst(ib, group))
                          .getResult();
}

/// The keys of one split of one request: the request's length, the splits
/// that hold keys and this split's range [start, end).
struct SplitRange {
  Value len, usedSplits, start, end;
};

SplitRange splitKeyRange(ImplicitLocOpBuilder &g, DecodeOp op, Value req,
                         Value split, Value c0, Value c1, Value cTile) {
  ConfigAttr cfg = op.getConfigAttr();
  const int64_t heads = op.getNumHeads(), group = cfg.getHeadGroup(),
                splits = cfg.getKvSplits();
  Value lenI32 = memref::LoadOp::create(g, op.getSeqLens(), ValueRange{req});
  Value len =
      maxIdx(g, arith::IndexCastOp::create(g, g.getIndexType(), lenI32), c0);
  Value numTiles = arith::CeilDivSIOp::create(g, len, cTile);
  // Balanced split-KV: with min_workgroups, only as many of the splits as
  // fill the chip for this batch size hold keys; the rest are empty.
  Value usedSplits = indexConst(g, splits);
  if (int64_t minWg = cfg.getMinWorkgroups()) {
    Value perSplit = arith::MulIOp::create(g, dimValue(g, op.getQ(), 0),
                                           indexConst(g, heads / group));
    usedSplits = minIdx(
        g,
        maxIdx(g, arith::CeilDivSIOp::create(g, indexConst(g, minWg), perSplit),
               c1),
        usedSplits);
  }
  Value tilesPerSplit = arith::CeilDivSIOp::create(g, numTiles, usedSplits);
  Value chunk = arith::MulIOp::create(g, tilesPerSplit, cTile);
  Value start = arith::MulIOp::create(g, split, chunk);
  Value end = minIdx(g, len, arith::AddIOp::create(g, start, chunk));
  return {len, usedSplits, start, end};
}

/// The normalised rows of one key range (o = acc / l) and their LSE into
/// the workspaces, at `partAt(i, head)` (then the value column for o): the
/// tiles' mla.attention_finish (with the sink's scale when `sunk`).
void writePartial(
    ImplicitLocOpBuilder &g, const AttentionTiles &t, Value headBase,
    int64_t group, bool sunk, Value wsO, Value wsL,
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value, Value)>
        partAt) {
  // Row i * group + hh: query i, head headBase + hh.
  auto at = [&](ImplicitLocOpBuilder &rb, Value row) {
    return partAt(rb, rowQuery(rb, row, group),
                  arith::AddIOp::create(rb, headBase, rowHead(rb, row, group)));
  };
  emitFinish(
      g, t, sunk,
      [&](ImplicitLocOpBuilder &rb, Value row, Value col, Value o) {
        SmallVector<Value> atD = at(rb, row);
        atD.push_back(col);
        vector::StoreOp::create(rb, o, wsO, atD);
      },
      [&](ImplicitLocOpBuilder &rb, Value row, Value lse) {
        memref::StoreOp::create(rb, lse, wsL, at(rb, row));
      });
}

/// One key range [start, end) of request `req` for the head group at
/// `headBase`: the online softmax over it and the partial result at
/// `partAt`. `first` (i1) marks the request's first range, whose part
/// takes the sink.
struct KeyRange {
  Value req, len, start, end, first;
};

void emitKeyRange(
    ImplicitLocOpBuilder &g, DecodeOp op, const AttentionTiles &t,
    bool queriesInPlace, Value headBase, const KeyRange &kr, Value wsO,
    Value wsL,
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value, Value)>
        partAt) {
  const int64_t sq = op.getQLen(), dim = op.getHeadDim(),
                group = op.getConfigAttr().getHeadGroup();
  Type elem = op.getQ().getType().getElementType();
  const int64_t qvw = vectorWidthFor(dim);
  Value c1 = indexConst(g, 1);
  Value cSq = indexConst(g, sq), cGroup = indexConst(g, group);
  Value req = kr.req, len = kr.len;
  auto rowOf = [&](ImplicitLocOpBuilder &ib, Value i, Value hh) {
    return tileRow(ib, cGroup, i, hh);
  };
  initSoftmaxState(g, t);

  // This group's queries: in place (AttentionLayout.h) or staged.
  AttentionTiles tiles = t;
  const int64_t heads = op.getNumHeads();
  if (queriesInPlace && (sq == 1 || group == heads)) {
    tiles.qTile = queryView(
        g, op.getQ(), {req, g.getIndexAttr(0), headBase, g.getIndexAttr(0)},
        {1, sq, group, dim}, sq * group, dim);
  } else if (queriesInPlace) {
    // The request's Sq x H rows, from the group's first: step row i * group
    // + hh is row i * H + hh of the view (query_groups).
    Value all = queryView(
        g, op.getQ(),
        {req, g.getIndexAttr(0), g.getIndexAttr(0), g.getIndexAttr(0)},
        {1, sq, heads, dim}, sq * heads, dim);
    SmallVector<OpFoldResult> offsets = {headBase, g.getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {g.getIndexAttr((sq - 1) * heads + group),
                                       g.getIndexAttr(dim)};
    SmallVector<OpFoldResult> strides(2, g.getIndexAttr(1));
    tiles.qTile = memref::SubViewOp::create(g, all, offsets, sizes, strides);
    tiles.queryGroups = {group, heads};
  } else {
    auto qVec = VectorType::get({qvw}, elem);
    Value cQvw = indexConst(g, qvw);
    parallelFor(g, {cSq, cGroup, indexConst(g, dim / qvw)},
                [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
                  Value head = arith::AddIOp::create(ib, headBase, iv[1]);
                  Value d = arith::MulIOp::create(ib, iv[2], cQvw);
                  Value v = vector::LoadOp::create(
                      ib, qVec, op.getQ(), ValueRange{req, iv[0], head, d});
                  vector::StoreOp::create(
                      ib, v, t.qTile, ValueRange{rowOf(ib, iv[0], iv[1]), d});
                });
  }

  // Row i * group + hh: request req, head headBase + hh, query position
  // len - sq + i.
  Variants variants = variantsOf(op.getScore(), op.getMask(), op.getSink());
  variants.position = [&](ImplicitLocOpBuilder &rb,
                          Value row) -> std::array<Value, 3> {
    Value i = rowQuery(rb, row, group), hh = rowHead(rb, row, group);
    return {req, arith::AddIOp::create(rb, headBase, hh),
            arith::AddIOp::create(rb, arith::SubIOp::create(rb, len, cSq), i)};
  };
  Value end = kr.end;
  emitOnlineSoftmax(
      g, tiles, kr.start, end, op.getScale(), variants,
      [&](ImplicitLocOpBuilder &tb, Value t0, Value kTile, Value) {
        LoadKVTileOp::create(tb, op.getKv(), op.getBlockTable(), req, t0, end,
                             kTile);
      },
      // Query i (row i * group + hh) sees keys t <= len - sq + i.
      [&](ImplicitLocOpBuilder &rb, Value row) -> Value {
        Value i = rowQuery(rb, row, group);
        return arith::AddIOp::create(rb, arith::SubIOp::create(rb, len, cSq),
                                     arith::AddIOp::create(rb, i, c1));
      });
  // The sink joins the denominator once per row: in the first range's
  // part, which the merge weighs by its LSE like any other.
  if (variants.sink) {
    // The finish's scale: the sink's correction in the first range, 1 in
    // the others.
    fillBuffer(g, t.rowScratch, 1.0);
    auto first = scf::IfOp::create(g, kr.first, /*withElseRegion=*/false);
    ImplicitLocOpBuilder sb(op.getLoc(), first.thenBlock()->getTerminator());
    applySink(sb, t, variants);
  }
  // Epilogue: normalise and write this range's partial result.
  writePartial(g, t, headBase, group, variants.sink != nullptr, wsO, wsL,
               partAt);
}

/// The tiles of one decode workgroup (values are the first `dv` columns of
/// the staged key rows).
AttentionTiles decodeTiles(ImplicitLocOpBuilder &g, DecodeOp op) {
  ConfigAttr cfg = op.getConfigAttr();
  return allocateTiles(
      g, op.getQLen() * cfg.getHeadGroup(), cfg.getTileKv(), op.getHeadDim(),
      op.getLatentDim(), op.getQ().getType().getElementType(),
      /*separateValues=*/false, op.getMask().empty() ? cfg.getStages() : 1);
}

/// Reads mla.chunk_plan's plan (i32) as index values.
struct PlanReader {
  Value mem;
  Value at(ImplicitLocOpBuilder &ib, Value row, Value col) const {
    Value v = memref::LoadOp::create(ib, mem, ValueRange{row, col});
    return arith::IndexCastOp::create(ib, ib.getIndexType(), v);
  }
  /// Request `req`'s length (negative as 0).
  Value len(ImplicitLocOpBuilder &ib, DecodeOp op, Value req) const {
    Value v = memref::LoadOp::create(ib, op.getSeqLens(), ValueRange{req});
    return maxIdx(ib, arith::IndexCastOp::create(ib, ib.getIndexType(), v),
                  indexConst(ib, 0));
  }
};

/// A grid of `x` workgroups by `groups` head groups by `z`, with its ids
/// as (x, head group, z) whatever the order of its dims
/// (rt::schedule::headGroupGridDim: head groups vary fastest where there
/// are several).
std::pair<GridOp, SmallVector<Value, 3>>
headGroupGrid(ImplicitLocOpBuilder &b, Value x, int64_t groups, int64_t z) {
  if (rt::schedule::headGroupGridDim(groups) == 1)
    return createGrid(b, x, indexConst(b, groups), indexConst(b, z));
  auto [grid, ids] = createGrid(b, indexConst(b, groups), x, indexConst(b, z));
  return {grid, {ids[1], ids[0], ids[2]}};
}

/// Fixed split-KV (kv_chunks = 0): a grid of (batch, kv_splits) for each
/// head group (headGroupGrid), each workgroup one split of one request,
/// then mla.merge.
void tileFixedSplits(ImplicitLocOpBuilder &b, DecodeOp op,
                     bool queriesInPlace) {
  ConfigAttr cfg = op.getConfigAttr();
  const int64_t sq = op.getQLen(), heads = op.getNumHeads(),
                dv = op.getLatentDim();
  const int64_t tile = cfg.getTileKv(), splits = cfg.getKvSplits(),
                group = cfg.getHeadGroup();
  Type f32 = b.getF32Type();
  Value batch = dimValue(b, op.getQ(), 0);
  int64_t dyn = ShapedType::kDynamic;
  auto wsOType = MemRefType::get({dyn, sq, heads, splits, dv}, f32);
  auto wsLType = MemRefType::get({dyn, sq, heads, splits}, f32);
  Value wsO = memref::AllocOp::create(b, wsOType, ValueRange{batch});
  Value wsL = memref::AllocOp::create(b, wsLType, ValueRange{batch});

  auto [grid, ids] = headGroupGrid(b, batch, heads / group, splits);
  grid.setConfigAttr(cfg);
  {
    ImplicitLocOpBuilder g = ImplicitLocOpBuilder::atBlockBegin(
        op.getLoc(), &grid.getBody().front());
    Value req = ids[0], hgroup = ids[1], split = ids[2];
    Value c0 = indexConst(g, 0), c1 = indexConst(g, 1);
    Value cTile = indexConst(g, tile), cSq = indexConst(g, sq);
    Value cGroup = indexConst(g, group);
    Value headBase = arith::MulIOp::create(g, hgroup, cGroup);
    SplitRange range = splitKeyRange(g, op, req, split, c0, c1, cTile);
    AttentionTiles t = decodeTiles(g, op);

    // A split past the used ones (balanced split-KV) holds no key: it only
    // writes LSE = -inf, which tells the merge not to read its output.
    // Everything else happens in the `then` branch (uniform per workgroup).
    auto activeIf =
        scf::IfOp::create(g,
                          arith::CmpIOp::create(g, arith::CmpIPredicate::slt,
                                                split, range.usedSplits),
                          /*withElseRegion=*/true);
    {
      ImplicitLocOpBuilder eb(op.getLoc(),
                              activeIf.elseBlock()->getTerminator());
      Value negInf = f32Const(eb, kNegInf);
      parallelFor(eb, {cSq, cGroup},
                  [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
                    Value head = arith::AddIOp::create(rb, headBase, iv[1]);
                    memref::StoreOp::create(
                        rb, negInf, wsL, ValueRange{req, iv[0], head, split});
                  });
    }
    ImplicitLocOpBuilder tb(op.getLoc(), activeIf.thenBlock()->getTerminator());
    Value first =
        arith::CmpIOp::create(tb, arith::CmpIPredicate::eq, split, c0);
    emitKeyRange(tb, op, t, queriesInPlace, headBase,
                 {req, range.len, range.start, range.end, first}, wsO, wsL,
                 [&](ImplicitLocOpBuilder &, Value i, Value head) {
                   return SmallVector<Value>{req, i, head, split};
                 });
  }
  MergeOp::create(b, wsO, wsL, op.getO(), op.getLse());
  memref::DeallocOp::create(b, wsO);
  memref::DeallocOp::create(b, wsL);
}

/// The key range of plan chunk `slot` (request-aligned chunks of q tiles:
/// chunk j of its request holds keys [j·q·tile_kv, (j+1)·q·tile_kv)).
/// `chunkKeys` = q·tile_kv.
KeyRange requestChunkRange(ImplicitLocOpBuilder &lb, DecodeOp op,
                           const PlanReader &plan, Value chunkKeys,
                           Value slot) {
  Value c0 = indexConst(lb, 0), c2 = indexConst(lb, 2);
  Value req = plan.at(lb, indexConst(lb, 1), slot);
  Value j = arith::SubIOp::create(
      lb, slot, plan.at(lb, c0, arith::AddIOp::create(lb, req, c2)));
  Value len = plan.len(lb, op, req);
  Value start = arith::MulIOp::create(lb, j, chunkKeys);
  Value end = minIdx(lb, len, arith::AddIOp::create(lb, start, chunkKeys));
  Value first = arith::CmpIOp::create(lb, arith::CmpIPredicate::eq, j, c0);
  return {req, len, start, end, first};
}

/// Window `w`'s first chunk as the plan's rows 4-7 hold it (read with the
/// window's range, before its first chunk: ChunkSchedule.h, planRows).
struct WindowOpening {
  Value req, start, end, len;
};

WindowOpening readOpening(ImplicitLocOpBuilder &wb, const PlanReader &plan,
                          Value w) {
  auto row = [&](int64_t r) { return plan.at(wb, indexConst(wb, r), w); };
  return {row(rt::schedule::kOpeningRequestRow),
          row(rt::schedule::kOpeningStartRow),
          row(rt::schedule::kOpeningEndRow),
          row(rt::schedule::kOpeningLengthRow)};
}

/// The key range of plan chunk `slot` in window `w` (chunk_windows): its
/// request's tiles in [w·q, (w+1)·q) of the batch, P_b from the plan's row
/// 2; the request's first chunk is the one of the window it starts in
/// (its range starts at key 0). The window's first chunk (`slot ==
/// firstSlot`) takes the plan's rows 4-7 instead, which do not wait for
/// the chunk's request: `early`, read before the chunk loop, or else read
/// there.
KeyRange windowChunkRange(ImplicitLocOpBuilder &lb, DecodeOp op,
                          const PlanReader &plan, Value w, Value slot,
                          Value firstSlot,
                          const std::optional<WindowOpening> &early) {
  Value c0 = indexConst(lb, 0), c1 = indexConst(lb, 1);
  Value cTile = indexConst(lb, op.getConfigAttr().getTileKv());
  Type idx = lb.getIndexType();
  auto ifOpening = scf::IfOp::create(
      lb, TypeRange{idx, idx, idx, idx},
      arith::CmpIOp::create(lb, arith::CmpIPredicate::eq, slot, firstSlot),
      /*withElseRegion=*/true);
  {
    ImplicitLocOpBuilder tb(lb.getLoc(), ifOpening.thenBlock(),
                            ifOpening.thenBlock()->end());
    WindowOpening opening = early ? *early : readOpening(tb, plan, w);
    scf::YieldOp::create(
        tb, ValueRange{opening.req, opening.len, opening.start, opening.end});
  }
  ImplicitLocOpBuilder eb(lb.getLoc(), ifOpening.elseBlock(),
                          ifOpening.elseBlock()->end());
  Value req = plan.at(eb, c1, slot);
  Value p = plan.at(eb, indexConst(eb, 2), req);
  Value q = plan.at(eb, c0, c1);
  Value len = plan.len(eb, op, req);
  Value tiles = arith::CeilDivSIOp::create(eb, len, cTile);
  Value from = arith::MulIOp::create(eb, w, q);
  Value to = arith::AddIOp::create(eb, from, q);
  Value startTile = maxIdx(eb, arith::SubIOp::create(eb, from, p), c0);
  Value endTile = maxIdx(
      eb, minIdx(eb, tiles, arith::SubIOp::create(eb, to, p)), startTile);
  Value start = arith::MulIOp::create(eb, startTile, cTile);
  Value end = minIdx(eb, len, arith::MulIOp::create(eb, endTile, cTile));
  scf::YieldOp::create(eb, ValueRange{req, len, start, end});
  Value first = arith::CmpIOp::create(lb, arith::CmpIPredicate::eq,
                                      ifOpening.getResult(2), c0);
  return {ifOpening.getResult(0), ifOpening.getResult(1),
          ifOpening.getResult(2), ifOpening.getResult(3), first};
}

/// The window loop's chunk bound `last` with the early opening's rows read
/// in it: an opening chunk with keys (of a request of the batch, its end
/// within its length) means the window runs at least one chunk, so
/// max(last, first + 1) = last there. The bound reads all four rows, so
/// that their loads go out with the range's, ahead of the loop's guard
/// (LLVM sinks loads used only inside a loop below its guard, one round
/// trip later).
Value boundReadingOpening(ImplicitLocOpBuilder &wb, DecodeOp op,
                          const WindowOpening &opening, Value first,
                          Value last) {
  auto cmp = [&](arith::CmpIPredicate pred, Value a, Value b) {
    return arith::CmpIOp::create(wb, pred, a, b).getResult();
  };
  Value opens = arith::AndIOp::create(
      wb, cmp(arith::CmpIPredicate::slt, opening.start, opening.end),
      arith::AndIOp::create(
          wb,
          cmp(arith::CmpIPredicate::slt, opening.req,
              dimValue(wb, op.getQ(), 0)),
          cmp(arith::CmpIPredicate::sle, opening.end, opening.len)));
  Value atLeastOne =
      maxIdx(wb, last, arith::AddIOp::create(wb, first, indexConst(wb, 1)));
  return arith::SelectOp::create(wb, opens, atLeastOne, last);
}

/// #mla.config fused_merge, after chunk `kr.req`'s partial results: a
/// phase that only orders them (its barrier: any thread may have written
/// them), then one thread counts the chunk in its request's counter (the
/// plan's counterRow; an atomic add, acquire-release) and says in `flag`
/// (a workgroup cell) whether it completed the count, `groups` (the head
/// groups) times the request's chunks, and if so zeroes the counter for
/// the next launch; that workgroup then merges the request
/// (emitRequestMerge), every part being written.
void countAndMerge(ImplicitLocOpBuilder &lb, DecodeOp op, Value planMem,
                   bool windows, int64_t groups, Value flag, Value req,
                   Value wsO, Value wsL, const ArchInfo *arch) {
  PlanReader plan{planMem};
  auto requestChunks = [&](ImplicitLocOpBuilder &ib) {
    Value c0 = indexConst(ib, 0);
    Value lo =
        plan.at(ib, c0, arith::AddIOp::create(ib, req, indexConst(ib, 2)));
    Value hi =
        plan.at(ib, c0, arith::AddIOp::create(ib, req, indexConst(ib, 3)));
    return std::pair(lo, hi);
  };
  Value c1 = indexConst(lb, 1);
  parallelFor(lb, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
    memref::StoreOp::create(ib, arith::ConstantIntOp::create(ib, 0, 32), flag,
                            ValueRange{indexConst(ib, 0)});
  });
  parallelFor(lb, {c1}, [&](ImplicitLocOpBuilder &ib, ValueRange) {
    Value c0 = indexConst(ib, 0);
    Value row = indexConst(ib, rt::schedule::counterRow(windows));
    Value one = arith::ConstantIntOp::create(ib, 1, 32);
    // Release: the workgroup's partial results (ordered before this
    // thread by the barrier) reach the device before the count; acquire:
    // the other chunks' results, counted before, are seen by the merge
    // (the barrier after this phase orders the workgroup's reads).
    StringRef scope = arch ? arch->deviceSyncScope() : StringRef();
    LLVM::FenceOp::create(ib, LLVM::AtomicOrdering::release, scope);
    Value old = memref::AtomicRMWOp::create(ib, arith::AtomicRMWKind::addi, one,
                                            planMem, ValueRange{row, req});
    LLVM::FenceOp::create(ib, LLVM::AtomicOrdering::acquire, scope);
    auto [lo, hi] = requestChunks(ib);
    Value expected = arith::MulIOp::create(
        ib, arith::SubIOp::create(ib, hi, lo), indexConst(ib, groups));
    Value done = arith::IndexCastOp::create(
        ib, ib.getIndexType(), arith::AddIOp::create(ib, old, one));
    Value last =
        arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, done, expected);
    memref::StoreOp::create(ib,
                            arith::ExtUIOp::create(ib, ib.getI32Type(), last),
                            flag, ValueRange{c0});
    scf::IfOp::create(ib, last, [&](OpBuilder &nb, Location loc) {
      ImplicitLocOpBuilder tb(loc, nb);
      memref::StoreOp::create(tb, arith::ConstantIntOp::create(tb, 0, 32),
                              planMem, ValueRange{row, req});
      scf::YieldOp::create(tb);
    });
  });
  Value merges = arith::CmpIOp::create(
      lb, arith::CmpIPredicate::ne,
      memref::LoadOp::create(lb, flag, ValueRange{indexConst(lb, 0)}),
      arith::ConstantIntOp::create(lb, 0, 32));
  scf::IfOp::create(lb, merges, [&](OpBuilder &nb, Location loc) {
    ImplicitLocOpBuilder mb(loc, nb);
    auto [lo, hi] = requestChunks(mb);
    emitRequestMerge(mb, wsO, wsL, op.getO(), op.getLse(), req, lo, hi, arch);
    scf::YieldOp::create(mb);
  });
}

/// The length-aware schedule (kv_chunks > 0, #mla.config says more):
/// mla.chunk_plan from the lengths, a grid of workgroups for each head
/// group (headGroupGrid) that take the plan's chunks in turn (with
/// chunk_windows, the chunks of one window each), each chunk's partial
/// result in its own workspace slot, then mla.chunk_merge.
void tileChunks(ImplicitLocOpBuilder &b, DecodeOp op, const ArchInfo *arch,
                bool queriesInPlace) {
  ConfigAttr cfg = op.getConfigAttr();
  const int64_t sq = op.getQLen(), heads = op.getNumHeads(),
                dv = op.getLatentDim();
  const int64_t tile = cfg.getTileKv(), group = cfg.getHeadGroup();
  const bool windows = cfg.getChunkWindows();
  const int64_t chunks =
      rt::schedule::chunkTarget(cfg.getKvChunks(), heads / group);
  Type f32 = b.getF32Type();
  Value batch = dimValue(b, op.getQ(), 0);
  int64_t dyn = ShapedType::kDynamic;
  // Slots: at most batch + chunkSlots chunks (each request's last chunk may
  // be short, all others hold q tiles; with windows, one more chunk per
  // request that starts inside a window).
  const int64_t extra =
      rt::schedule::chunkSlots(cfg.getKvChunks(), heads / group, windows);
  Value slots = arith::AddIOp::create(b, batch, indexConst(b, extra));
  Value planMem = memref::AllocOp::create(
      b,
      MemRefType::get({rt::schedule::planRows(windows), dyn}, b.getI32Type()),
      ValueRange{arith::AddIOp::create(
          b, batch, indexConst(b, extra + rt::schedule::kPlanHeader))});
  Value wsO = memref::AllocOp::create(
      b, MemRefType::get({dyn, sq, heads, dv}, f32), ValueRange{slots});
  Value wsL = memref::AllocOp::create(b, MemRefType::get({dyn, sq, heads}, f32),
                                      ValueRange{slots});
  ChunkPlanOp::create(b, op.getSeqLens(), planMem, tile, chunks,
                      cfg.getChunkBalance(),
                      windows ? 1 : rt::schedule::kChunkRefine, windows,
                      /*adaptive=*/cfg.getChunkWindows() == 2);

  // Workgroups: `workgroups` (persistent), else one per window, else one
  // per possible chunk.
  const int64_t persistent = cfg.getWorkgroups();
  Value gridX = persistent ? indexConst(b, persistent)
                : windows  ? indexConst(b, chunks)
                           : slots;
  auto [grid, ids] = headGroupGrid(b, gridX, heads / group, 1);
  Value hgroup = ids[1], workgroup = ids[0];
  grid.setConfigAttr(cfg);
  ImplicitLocOpBuilder g =
      ImplicitLocOpBuilder::atBlockBegin(op.getLoc(), &grid.getBody().front());
  Value c0 = indexConst(g, 0), c1 = indexConst(g, 1);
  Value headBase = arith::MulIOp::create(g, hgroup, indexConst(g, group));
  PlanReader plan{planMem};
  // Request-aligned chunks: their count and keys, read once.
  Value numChunks, chunkKeys;
  if (!windows) {
    numChunks = plan.at(g, c0, c0);
    chunkKeys =
        arith::MulIOp::create(g, plan.at(g, c0, c1), indexConst(g, tile));
  }
  Value step = persistent ? indexConst(g, persistent)
               : windows  ? indexConst(g, chunks)
                          : arith::AddIOp::create(g, dimValue(g, op.getQ(), 0),
                                                  indexConst(g, extra));
  AttentionTiles t = decodeTiles(g, op);
  const bool fused = cfg.getFusedMerge();
  Value flag =
      fused ? memref::AllocaOp::create(g, MemRefType::get({1}, g.getI32Type()))
            : Value();
  // One chunk: the online softmax over its range and its partial result
  // (fused_merge: then its count, and the request's merge by the last).
  auto emitChunk = [&](ImplicitLocOpBuilder &lb, Value slot,
                       const KeyRange &kr) {
    emitKeyRange(lb, op, t, queriesInPlace, headBase, kr, wsO, wsL,
                 [&](ImplicitLocOpBuilder &, Value i, Value head) {
                   return SmallVector<Value>{slot, i, head};
                 });
    if (fused)
      countAndMerge(lb, op, planMem, windows, heads / group, flag, kr.req, wsO,
                    wsL, arch);
  };
  // Each chunk writes every tile before reading it (mla.fresh_tiles).
  auto chunkLoop = [&](ImplicitLocOpBuilder &lb, Value from, Value to,
                       Value by) {
    auto loop = scf::ForOp::create(lb, from, to, by);
    loop->setAttr(MLADialect::kFreshTilesAttrName, lb.getUnitAttr());
    return std::pair(loop, ImplicitLocOpBuilder(
                               op.getLoc(), loop.getBody()->getTerminator()));
  };
  if (!windows) {
    auto [loop, lb] = chunkLoop(g, workgroup, numChunks, step);
    Value slot = loop.getInductionVar();
    emitChunk(lb, slot, requestChunkRange(lb, op, plan, chunkKeys, slot));
  } else {
    // Window w runs chunks [plan[3][w], plan[3][w + 1]).
    auto windowLoop =
        scf::ForOp::create(g, workgroup, indexConst(g, chunks), step);
    ImplicitLocOpBuilder wb(op.getLoc(), windowLoop.getBody()->getTerminator());
    Value w = windowLoop.getInductionVar();
    Value cRowW = indexConst(wb, 3);
    Value firstSlot = plan.at(wb, cRowW, w);
    Value lastSlot = plan.at(wb, cRowW, arith::AddIOp::create(wb, w, c1));
    std::optional<WindowOpening> early;
    if (!arch || arch->readsWindowOpeningEarly()) {
      early = readOpening(wb, plan, w);
      lastSlot = boundReadingOpening(wb, op, *early, firstSlot, lastSlot);
    }
    auto [loop, lb] = chunkLoop(wb, firstSlot, lastSlot, c1);
    Value slot = loop.getInductionVar();
    emitChunk(lb, slot,
              windowChunkRange(lb, op, plan, w, slot, firstSlot, early));
  }
  if (!fused)
    ChunkMergeOp::create(b, wsO, wsL, planMem, op.getO(), op.getLse(),
                         cfg.getMergeGroups());
  memref::DeallocOp::create(b, wsO);
  memref::DeallocOp::create(b, wsL);
  memref::DeallocOp::create(b, planMem);
}
} // namespace

//===----------------------------------------------------------------------===//
// mla.decode
//===----------------------------------------------------------------------===//

LogicalResult tileDecode(DecodeOp op, const ArchInfo *arch) {
  ConfigAttr cfg = op.getConfigAttr();
  if (!cfg)
    return op.emitOpError()
           << "has no #mla.config; run mla-select-config before mla-tile";
  recordDecodeInfo(op);
  ImplicitLocOpBuilder b(op.getLoc(), op);
  const bool inPlace = decodeQueriesInPlace(arch, op.getQLen());
  if (cfg.getKvChunks())
    tileChunks(b, op, arch, inPlace);
  else
    tileFixedSplits(b, op, inPlace);
  op.erase();
  return success();
}

} // namespace mla::tiling
