//===- TileDecode.cpp - mla-tile for mla.decode ---------------------------===//
#include "AttentionLayout.h"
#include "KindRoles.h"
#include "TileCore.h"
#include "Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/FormatVariadic.h"

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

/// Where a workgroup's rows go in the workspace.
struct SplitRows {
  Value req, split, headBase, cSq, cGroup, c0;
};

/// The normalised rows of one split (o = acc / l) and their LSE into the
/// workspace.
void writeSplitPartial(ImplicitLocOpBuilder &g, const AttentionTiles &t,
                       const SplitRows &w, Value wsO, Value wsL) {
  const int64_t vw = vectorWidthFor(t.dv);
  Value cVw = indexConst(g, vw);
  parallelFor(g, {w.cSq, w.cGroup, indexConst(g, t.dv / vw)},
              [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
                Value i = iv[0], row = tileRow(rb, w.cGroup, iv[0], iv[1]);
                Value head = arith::AddIOp::create(rb, w.headBase, iv[1]);
                Value d = arith::MulIOp::create(rb, iv[2], cVw);
                RowResult r = normalisedRow(rb, t, row, d, vw);
                vector::StoreOp::create(rb, r.scaled, wsO,
                                        ValueRange{w.req, i, head, w.split, d});
                // One iteration per row writes the LSE.
                Value first = arith::CmpIOp::create(
                    rb, arith::CmpIPredicate::eq, iv[2], w.c0);
                scf::IfOp::create(rb, first, [&](OpBuilder &nb, Location loc) {
                  ImplicitLocOpBuilder ib(loc, nb);
                  memref::StoreOp::create(ib, rowLse(ib, t, row, r), wsL,
                                          ValueRange{w.req, i, head, w.split});
                  scf::YieldOp::create(ib);
                });
              });
}
} // namespace

//===----------------------------------------------------------------------===//
// mla.decode
//===----------------------------------------------------------------------===//

LogicalResult tileDecode(DecodeOp op) {
  ConfigAttr cfg = op.getConfigAttr();
  if (!cfg)
    return op.emitOpError()
           << "has no #mla.config; run mla-select-config before mla-tile";
  recordDecodeInfo(op);
  ImplicitLocOpBuilder b(op.getLoc(), op);
  const int64_t sq = op.getQLen(), heads = op.getNumHeads(),
                dim = op.getHeadDim(), dv = op.getLatentDim();
  const int64_t tile = cfg.getTileKv(), splits = cfg.getKvSplits(),
                group = cfg.getHeadGroup(), rows = sq * group;
  Type elem = op.getQ().getType().getElementType();
  Type f32 = b.getF32Type();
  const int64_t qvw = vectorWidthFor(dim);

  // Workspace for the partial results of every split.
  Value batch = dimValue(b, op.getQ(), 0);
  int64_t dyn = ShapedType::kDynamic;
  auto wsOType = MemRefType::get({dyn, sq, heads, splits, dv}, f32);
  auto wsLType = MemRefType::get({dyn, sq, heads, splits}, f32);
  Value wsO = memref::AllocOp::create(b, wsOType, ValueRange{batch});
  Value wsL = memref::AllocOp::create(b, wsLType, ValueRange{batch});

  auto [grid, ids] =
      createGrid(b, batch, indexConst(b, heads / group), indexConst(b, splits));
  grid.setConfigAttr(cfg);
  {
    ImplicitLocOpBuilder g = ImplicitLocOpBuilder::atBlockBegin(
        op.getLoc(), &grid.getBody().front());
    Value req = ids[0], hgroup = ids[1], split = ids[2];
    Value c0 = indexConst(g, 0), c1 = indexConst(g, 1);
    Value cTile = indexConst(g, tile), cSq = indexConst(g, sq);
    Value cGroup = indexConst(g, group);
    Value headBase = arith::MulIOp::create(g, hgroup, cGroup);

    // This split's key range [start, end).
    SplitRange range = splitKeyRange(g, op, req, split, c0, c1, cTile);
    Value len = range.len, usedSplits = range.usedSplits, start = range.start,
          end = range.end;

    // Values are the first `dv` columns of the staged key rows.
    AttentionTiles t =
        allocateTiles(g, rows, tile, dim, dv, elem, /*separateValues=*/false,
                      op.getMask().empty() ? cfg.getStages() : 1);

    auto rowOf = [&](ImplicitLocOpBuilder &ib, Value i, Value hh) {
      return tileRow(ib, cGroup, i, hh);
    };

    // A split past the used ones (balanced split-KV) holds no key: it only
    // writes LSE = -inf, which tells the merge not to read its output.
    // Everything else happens in the `then` branch (uniform per workgroup).
    auto activeIf = scf::IfOp::create(
        g,
        arith::CmpIOp::create(g, arith::CmpIPredicate::slt, split, usedSplits),
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
    g.setInsertionPoint(activeIf.thenBlock()->getTerminator());
    initSoftmaxState(g, t);

    // Stage this group's queries.
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

    // Row i * group + hh: request req, head headBase + hh, query position
    // len - sq + i.
    Variants variants = variantsOf(op.getScore(), op.getMask(), op.getSink());
    variants.position = [&](ImplicitLocOpBuilder &rb,
                            Value row) -> std::array<Value, 3> {
      Value i = group == 1 ? row : arith::DivUIOp::create(rb, row, cGroup);
      Value hh = group == 1 ? indexConst(rb, 0)
                            : arith::RemUIOp::create(rb, row, cGroup);
      return {
          req, arith::AddIOp::create(rb, headBase, hh),
          arith::AddIOp::create(rb, arith::SubIOp::create(rb, len, cSq), i)};
    };
    emitOnlineSoftmax(
        g, t, start, end, op.getScale(), variants,
        [&](ImplicitLocOpBuilder &tb, Value t0, Value kTile, Value) {
          LoadKVTileOp::create(tb, op.getKv(), op.getBlockTable(), req, t0, end,
                               kTile);
        },
        // Query i (row i * group + hh) sees keys t <= len - sq + i.
        [&](ImplicitLocOpBuilder &rb, Value row) -> Value {
          Value i = group == 1 ? row : arith::DivUIOp::create(rb, row, cGroup);
          return arith::AddIOp::create(rb, arith::SubIOp::create(rb, len, cSq),
                                       arith::AddIOp::create(rb, i, c1));
        });
    // The sink joins the denominator once per row: in split 0's part, which
    // the merge weighs by its LSE like any other.
    if (variants.sink) {
      auto first = scf::IfOp::create(
          g, arith::CmpIOp::create(g, arith::CmpIPredicate::eq, split, c0),
          /*withElseRegion=*/false);
      ImplicitLocOpBuilder sb(op.getLoc(), first.thenBlock()->getTerminator());
      applySink(sb, t, variants);
    }

    // Epilogue: normalise and write this split's partial result.
    writeSplitPartial(g, t, {req, split, headBase, cSq, cGroup, c0}, wsO, wsL);
  }

  MergeOp::create(b, wsO, wsL, op.getO(), op.getLse());
  memref::DeallocOp::create(b, wsO);
  memref::DeallocOp::create(b, wsL);
  op.erase();
  return success();
}

} // namespace mla::tiling
