//===- Tile.cpp - mla-tile: split-KV tiling with online softmax ------------===//
//
// mla.decode  -> workspace + mla.grid(request, head group, KV split) + mla.merge
// mla.merge   -> mla.grid over the merge's leading dims
//
// The grid bodies are blockwise programs: tiles live in memref.alloca buffers
// (LDS/shared memory on GPUs, the stack on the host), key tiles arrive through
// the logical mla.load_kv_tile and products go through mla.matmul. The online
// softmax works in the log2 domain: scores are multiplied by
// scale * log2(e) once, exponentials are exp2, and the LSE is converted back
// to the natural log when written.
//
//===----------------------------------------------------------------------===//
#include "mla/Transforms/Passes.h"
#include "mla/Transforms/Utils.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

#define DEBUG_TYPE "mla-tile"

namespace mla {
#define GEN_PASS_DEF_MLATILE
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;
const double kNegInf = -std::numeric_limits<double>::infinity();

Value minIdx(ImplicitLocOpBuilder &b, Value x, Value y) {
  return arith::MinSIOp::create(b, x, y);
}
Value maxIdx(ImplicitLocOpBuilder &b, Value x, Value y) {
  return arith::MaxSIOp::create(b, x, y);
}

/// A `rows x cols` tile whose rows are padded by 16 bytes: a memref.alloca
/// of `rows x (cols + pad)` and its `rows x cols` subview.
Value paddedTile(ImplicitLocOpBuilder &b, int64_t rows, int64_t cols,
                 Type elem) {
  int64_t pad = 16 * 8 / elem.getIntOrFloatBitWidth();
  auto buffer =
      memref::AllocaOp::create(b, MemRefType::get({rows, cols + pad}, elem));
  return memref::SubViewOp::create(
      b, buffer, ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(rows), b.getIndexAttr(cols)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
}

/// Creates an `mla.grid` with the given sizes and returns a builder at the
/// start of its body together with the three workgroup coordinates.
std::pair<GridOp, SmallVector<Value, 3>>
createGrid(ImplicitLocOpBuilder &b, Value gx, Value gy, Value gz) {
  auto grid = GridOp::create(b, gx, gy, gz);
  Block *body = new Block();
  grid.getBody().push_back(body);
  SmallVector<Value, 3> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(body->addArgument(b.getIndexType(), b.getLoc()));
  return {grid, ids};
}

/// Size of dim `d` of `memref` as an index value (constant when static).
Value dimValue(ImplicitLocOpBuilder &b, Value memref, int64_t d) {
  auto type = cast<MemRefType>(memref.getType());
  if (!type.isDynamicDim(d))
    return indexConst(b, type.getDimSize(d));
  return memref::DimOp::create(b, memref, d);
}

/// Records which semantic operand a function argument is, so that launchers
/// can bind their tensors by role (`mla.role` argument attribute).
void tagRole(Value v, StringRef role) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!func || arg.getOwner() != &func.getBody().front())
    return;
  func.setArgAttr(arg.getArgNumber(), "mla.role",
                  StringAttr::get(func.getContext(), role));
}

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

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
  NamedAttrList info;
  info.append("kernel", b.getStringAttr("decode"));
  info.append("dtype",
              b.getStringAttr(typeName(op.getQ().getType().getElementType())));
  info.append("heads", b.getI64IntegerAttr(op.getNumHeads()));
  info.append("q_len", b.getI64IntegerAttr(op.getQLen()));
  info.append("latent_dim", b.getI64IntegerAttr(op.getLatentDim()));
  info.append("rope_dim", b.getI64IntegerAttr(op.getRopeDim()));
  info.append("page_size",
              b.getI64IntegerAttr(ShapedType::isDynamic(page) ? 0 : page));
  info.append("config", b.getStringAttr(config));
  func->setAttr("mla.kernel_info", info.getDictionary(op.getContext()));
  for (auto [v, role] :
       {std::pair<Value, StringRef>{op.getQ(), "q"},
        {op.getKv(), "kv"},
        {op.getBlockTable(), "block_table"},
        {op.getSeqLens(), "seq_lens"},
        {op.getScale(), "scale"},
        {op.getO(), "o"},
        {op.getLse(), "lse"}})
    tagRole(v, role);
}

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
  const int64_t vw = vectorWidthFor(dv);
  const int64_t qvw = vectorWidthFor(dim);

  // Workspace for the partial results of every split.
  Value batch = dimValue(b, op.getQ(), 0);
  int64_t dyn = ShapedType::kDynamic;
  auto wsOType = MemRefType::get({dyn, sq, heads, splits, dv}, f32);
  auto wsLType = MemRefType::get({dyn, sq, heads, splits}, f32);
  Value wsO = memref::AllocOp::create(b, wsOType, ValueRange{batch});
  Value wsL = memref::AllocOp::create(b, wsLType, ValueRange{batch});

  auto [grid, ids] = createGrid(b, batch, indexConst(b, heads / group),
                                indexConst(b, splits));
  grid->setAttr("config", cfg);
  {
    ImplicitLocOpBuilder g = ImplicitLocOpBuilder::atBlockBegin(
        op.getLoc(), &grid.getBody().front());
    Value req = ids[0], hgroup = ids[1], split = ids[2];
    Value c0 = indexConst(g, 0), c1 = indexConst(g, 1);
    Value cTile = indexConst(g, tile), cSq = indexConst(g, sq);
    Value cGroup = indexConst(g, group);
    Value headBase = arith::MulIOp::create(g, hgroup, cGroup);

    // This split's key range [start, end).
    Value lenI32 = memref::LoadOp::create(g, op.getSeqLens(), ValueRange{req});
    Value len = maxIdx(
        g, arith::IndexCastOp::create(g, g.getIndexType(), lenI32), c0);
    Value numTiles = arith::CeilDivSIOp::create(g, len, cTile);
    // Balanced split-KV: with min_workgroups, only as many of the splits as
    // fill the chip for this batch size hold keys; the rest are empty.
    Value usedSplits = indexConst(g, splits);
    if (int64_t minWg = cfg.getMinWorkgroups()) {
      Value perSplit = arith::MulIOp::create(
          g, dimValue(g, op.getQ(), 0), indexConst(g, heads / group));
      usedSplits = minIdx(
          g, maxIdx(g, arith::CeilDivSIOp::create(g, indexConst(g, minWg),
                                                  perSplit),
                    c1),
          usedSplits);
    }
    Value tilesPerSplit = arith::CeilDivSIOp::create(g, numTiles, usedSplits);
    Value chunk = arith::MulIOp::create(g, tilesPerSplit, cTile);
    Value start = arith::MulIOp::create(g, split, chunk);
    Value end = minIdx(g, len, arith::AddIOp::create(g, start, chunk));

    // Tiles (fast memory). Matrix tiles get 16 bytes of padding per row:
    // their natural row strides are multiples of 128 bytes, which would put
    // the same column of consecutive rows in one shared-memory bank.
    Value qTile = paddedTile(g, rows, dim, elem);
    Value kTile = paddedTile(g, tile, dim, elem);
    Value sTile = paddedTile(g, rows, tile, f32);
    Value pTile = paddedTile(g, rows, tile, elem);
    Value acc = paddedTile(g, rows, dv, f32);
    auto mBuf = memref::AllocaOp::create(g, MemRefType::get({rows}, f32));
    auto lBuf = memref::AllocaOp::create(g, MemRefType::get({rows}, f32));
    auto corrBuf = memref::AllocaOp::create(g, MemRefType::get({rows}, f32));
    auto refBuf = memref::AllocaOp::create(g, MemRefType::get({rows}, f32));
    // Per (row, 8-column chunk) partial maxima, then partial sums.
    constexpr int64_t kChunk = 8;
    const int64_t chunks = tile / kChunk;
    auto partial =
        memref::AllocaOp::create(g, MemRefType::get({rows, chunks}, f32));

    // Row `i * group + hh` of the tiles is query token i, head headBase + hh.
    auto rowOf = [&](ImplicitLocOpBuilder &ib, Value i, Value hh) {
      return arith::AddIOp::create(ib, arith::MulIOp::create(ib, i, cGroup),
                                   hh);
    };

    // A split past the used ones (balanced split-KV) holds no key: it only
    // writes LSE = -inf, which tells the merge not to read its output.
    // Everything else happens in the `then` branch (uniform per workgroup).
    auto activeIf = scf::IfOp::create(
        g, arith::CmpIOp::create(g, arith::CmpIPredicate::slt, split,
                                 usedSplits),
        /*withElseRegion=*/true);
    {
      ImplicitLocOpBuilder eb(op.getLoc(), activeIf.elseBlock()->getTerminator());
      Value negInf = f32Const(eb, kNegInf);
      parallelFor(eb, {cSq, cGroup}, [&](ImplicitLocOpBuilder &rb,
                                         ValueRange iv) {
        Value head = arith::AddIOp::create(rb, headBase, iv[1]);
        memref::StoreOp::create(rb, negInf, wsL,
                                ValueRange{req, iv[0], head, split});
      });
    }
    g.setInsertionPoint(activeIf.thenBlock()->getTerminator());
    fillBuffer(g, acc, 0.0);
    fillBuffer(g, mBuf, kNegInf);
    fillBuffer(g, lBuf, 0.0);

    // Stage this group's queries.
    auto qVec = VectorType::get({qvw}, elem);
    Value cQvw = indexConst(g, qvw);
    parallelFor(g, {cSq, cGroup, indexConst(g, dim / qvw)},
                [&](ImplicitLocOpBuilder &ib, ValueRange iv) {
                  Value head = arith::AddIOp::create(ib, headBase, iv[1]);
                  Value d = arith::MulIOp::create(ib, iv[2], cQvw);
                  Value v = vector::LoadOp::create(
                      ib, qVec, op.getQ(), ValueRange{req, iv[0], head, d});
                  vector::StoreOp::create(ib, v, qTile,
                                          ValueRange{rowOf(ib, iv[0], iv[1]),
                                                     d});
                });

    Value scaleLog2 =
        arith::MulFOp::create(g, op.getScale(), f32Const(g, kLog2e));
    Value negInf = f32Const(g, kNegInf);
    Value zeroF = f32Const(g, 0.0);
    // V is the first `dv` columns of the staged key rows.
    Value vTile = memref::SubViewOp::create(
        g, kTile, ArrayRef<OpFoldResult>{g.getIndexAttr(0), g.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{g.getIndexAttr(tile), g.getIndexAttr(dv)},
        ArrayRef<OpFoldResult>{g.getIndexAttr(1), g.getIndexAttr(1)});

    // Online softmax over this split's key tiles.
    forLoop(g, start, end, cTile, [&](ImplicitLocOpBuilder &tb, Value t0) {
      LoadKVTileOp::create(tb, op.getKv(), op.getBlockTable(), req, t0, end,
                           kTile);
      auto qk = MatmulOp::create(tb, qTile, kTile, sTile, Value());
      qk.setTransposeB(true);
      // The online-softmax update, as four parallel phases over (row,
      // 8-column chunk) and rows, so that every thread of a GPU workgroup
      // has work: chunk maxima, row maxima and corrections, chunk
      // exponentials and sums, row sums.
      // Query i sees keys t <= len - sq + i; columns past `end` are padding.
      auto validCols = [&](ImplicitLocOpBuilder &rb, Value i) -> Value {
        Value visEnd = minIdx(
            rb, end,
            arith::AddIOp::create(rb, arith::SubIOp::create(rb, len, cSq),
                                  arith::AddIOp::create(rb, i, c1)));
        return minIdx(
            rb, maxIdx(rb, arith::SubIOp::create(rb, visEnd, t0), c0), cTile);
      };
      Value cChunks = indexConst(tb, chunks), cChunk = indexConst(tb, kChunk);
      // Columns [c * 8, c * 8 + 8) of the row that are visible.
      auto chunkCols = [&](ImplicitLocOpBuilder &rb, Value i, Value c)
          -> std::pair<Value, Value> {
        Value lo = arith::MulIOp::create(rb, c, cChunk);
        Value hi = minIdx(rb, arith::AddIOp::create(rb, lo, cChunk),
                          validCols(rb, i));
        return {lo, maxIdx(rb, hi, lo)};
      };
      parallelFor(tb, {cSq, cGroup, cChunks}, [&](ImplicitLocOpBuilder &rb,
                                                  ValueRange iv) {
        Value row = rowOf(rb, iv[0], iv[1]);
        auto [lo, hi] = chunkCols(rb, iv[0], iv[2]);
        Value mx = reduceLoop(
            rb, lo, hi, c1, negInf,
            [&](ImplicitLocOpBuilder &cb, Value c, Value m) -> Value {
              Value sc = memref::LoadOp::create(cb, sTile, ValueRange{row, c});
              return arith::MaximumFOp::create(
                  cb, m, arith::MulFOp::create(cb, sc, scaleLog2));
            });
        memref::StoreOp::create(rb, mx, partial, ValueRange{row, iv[2]});
      });
      parallelFor(tb, {cSq, cGroup}, [&](ImplicitLocOpBuilder &rb,
                                         ValueRange iv) {
        Value row = rowOf(rb, iv[0], iv[1]);
        Value mOld = memref::LoadOp::create(rb, mBuf, ValueRange{row});
        Value mNew = reduceLoop(
            rb, c0, cChunks, c1, mOld,
            [&](ImplicitLocOpBuilder &cb, Value c, Value m) -> Value {
              return arith::MaximumFOp::create(
                  cb, m,
                  memref::LoadOp::create(cb, partial, ValueRange{row, c}));
            });
        // While no key has been seen, keep the reference at 0 so that
        // exp2(-inf - ref) = 0 instead of NaN.
        Value isEmpty = arith::CmpFOp::create(rb, arith::CmpFPredicate::OEQ,
                                              mNew, negInf);
        Value ref = arith::SelectOp::create(rb, isEmpty, zeroF, mNew);
        memref::StoreOp::create(
            rb, math::Exp2Op::create(rb, arith::SubFOp::create(rb, mOld, ref)),
            corrBuf, ValueRange{row});
        memref::StoreOp::create(rb, mNew, mBuf, ValueRange{row});
        memref::StoreOp::create(rb, ref, refBuf, ValueRange{row});
      });
      parallelFor(tb, {cSq, cGroup, cChunks}, [&](ImplicitLocOpBuilder &rb,
                                                  ValueRange iv) {
        Value row = rowOf(rb, iv[0], iv[1]);
        auto [lo, hi] = chunkCols(rb, iv[0], iv[2]);
        Value ref = memref::LoadOp::create(rb, refBuf, ValueRange{row});
        Value first = arith::MulIOp::create(rb, iv[2], cChunk);
        Value sum = reduceLoop(
            rb, c0, cChunk, c1, zeroF,
            [&](ImplicitLocOpBuilder &cb, Value k, Value total) -> Value {
              Value c = arith::AddIOp::create(cb, first, k);
              Value sc = memref::LoadOp::create(cb, sTile, ValueRange{row, c});
              Value e = math::Exp2Op::create(
                  cb, arith::SubFOp::create(
                          cb, arith::MulFOp::create(cb, sc, scaleLog2), ref));
              Value valid = arith::AndIOp::create(
                  cb,
                  arith::CmpIOp::create(cb, arith::CmpIPredicate::sge, c, lo),
                  arith::CmpIOp::create(cb, arith::CmpIPredicate::slt, c, hi));
              Value p = arith::SelectOp::create(cb, valid, e, zeroF);
              memref::StoreOp::create(cb, castFloat(cb, p, elem), pTile,
                                      ValueRange{row, c});
              return arith::AddFOp::create(cb, total, p);
            });
        memref::StoreOp::create(rb, sum, partial, ValueRange{row, iv[2]});
      });
      parallelFor(tb, {cSq, cGroup}, [&](ImplicitLocOpBuilder &rb,
                                         ValueRange iv) {
        Value row = rowOf(rb, iv[0], iv[1]);
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
            arith::AddFOp::create(rb, arith::MulFOp::create(rb, lOld, corr),
                                  sum),
            lBuf, ValueRange{row});
      });
      // acc = diag(exp2(m_old - m_new)) * acc + P * V.
      auto pv = MatmulOp::create(tb, pTile, vTile, acc, corrBuf);
      pv.setAccumulate(true);
    });

    // Epilogue: normalise and write this split's partial result.
    auto accVec = VectorType::get({vw}, f32);
    Value cVw = indexConst(g, vw);
    parallelFor(
        g, {cSq, cGroup, indexConst(g, dv / vw)},
        [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
          Value i = iv[0], row = rowOf(rb, iv[0], iv[1]);
          Value head = arith::AddIOp::create(rb, headBase, iv[1]);
          Value d = arith::MulIOp::create(rb, iv[2], cVw);
          Value l = memref::LoadOp::create(rb, lBuf, ValueRange{row});
          Value empty =
              arith::CmpFOp::create(rb, arith::CmpFPredicate::OEQ, l, zeroF);
          Value safeL =
              arith::SelectOp::create(rb, empty, f32Const(rb, 1.0), l);
          Value inv = arith::SelectOp::create(
              rb, empty, zeroF,
              arith::DivFOp::create(rb, f32Const(rb, 1.0), safeL));
          Value a = vector::LoadOp::create(rb, accVec, acc, ValueRange{row, d});
          vector::StoreOp::create(
              rb,
              arith::MulFOp::create(
                  rb, a, vector::BroadcastOp::create(rb, accVec, inv)),
              wsO, ValueRange{req, i, head, split, d});
          // One iteration per row writes the LSE.
          Value first =
              arith::CmpIOp::create(rb, arith::CmpIPredicate::eq, iv[2], c0);
          scf::IfOp::create(rb, first, [&](OpBuilder &nb, Location loc) {
            ImplicitLocOpBuilder ib(loc, nb);
            Value m = memref::LoadOp::create(ib, mBuf, ValueRange{row});
            Value lse = arith::MulFOp::create(
                ib,
                arith::AddFOp::create(ib, m, math::Log2Op::create(ib, safeL)),
                f32Const(ib, kLn2));
            lse = arith::SelectOp::create(ib, empty, negInf, lse);
            memref::StoreOp::create(ib, lse, wsL,
                                    ValueRange{req, i, head, split});
            scf::YieldOp::create(ib);
          });
        });
  }

  MergeOp::create(b, wsO, wsL, op.getO(), op.getLse());
  memref::DeallocOp::create(b, wsO);
  memref::DeallocOp::create(b, wsL);
  op.erase();
  return success();
}

//===----------------------------------------------------------------------===//
// mla.merge
//===----------------------------------------------------------------------===//

LogicalResult tileMerge(MergeOp op) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  auto lseType = op.getLse().getType();
  auto oType = op.getO().getType();
  const int64_t lead = lseType.getRank();
  const int64_t parts = op.getLseParts().getType().getDimSize(lead);
  const int64_t dv = oType.getDimSize(lead);
  const int64_t vw = vectorWidthFor(dv);
  Type f32 = b.getF32Type();

  SmallVector<Value, 3> sizes;
  for (int64_t d = 0; d < 3; ++d)
    sizes.push_back(d < lead ? dimValue(b, op.getLse(), d) : indexConst(b, 1));
  auto [grid, ids] = createGrid(b, sizes[0], sizes[1], sizes[2]);
  ImplicitLocOpBuilder g = ImplicitLocOpBuilder::atBlockBegin(
      op.getLoc(), &grid.getBody().front());
  SmallVector<Value> idx(ids.begin(), ids.begin() + lead);
  Value c0 = indexConst(g, 0), c1 = indexConst(g, 1);
  Value cParts = indexConst(g, parts);
  Value negInf = f32Const(g, kNegInf), zeroF = f32Const(g, 0.0);
  auto withPart = [&](Value n) {
    SmallVector<Value> v(idx);
    v.push_back(n);
    return v;
  };

  Value log2e = f32Const(g, kLog2e);
  auto vecType = VectorType::get({vw}, f32);
  Value zeroVec = arith::ConstantOp::create(
      g, vecType, DenseElementsAttr::get(vecType, g.getF32FloatAttr(0.0)));
  // Each iteration owns one vector chunk of the value dim; the few parts'
  // LSEs are re-read by every iteration instead of being shared.
  parallelFor(g, {indexConst(g, dv / vw)}, [&](ImplicitLocOpBuilder &ib,
                                               ValueRange iv) {
    Value d = arith::MulIOp::create(ib, iv[0], indexConst(ib, vw));
    Value maxLse = reduceLoop(
        ib, c0, cParts, c1, negInf,
        [&](ImplicitLocOpBuilder &jb, Value n, Value m) -> Value {
          Value l = memref::LoadOp::create(jb, op.getLseParts(), withPart(n));
          return arith::MaximumFOp::create(jb, m, l);
        });
    Value empty =
        arith::CmpFOp::create(ib, arith::CmpFPredicate::OEQ, maxLse, negInf);
    Value ref = arith::SelectOp::create(ib, empty, zeroF, maxLse);
    // Σ exp(lse_n - ref) and Σ exp(lse_n - ref) o_n, in one pass.
    auto loop = scf::ForOp::create(
        ib, c0, cParts, c1, ValueRange{zeroF, zeroVec},
        [&](OpBuilder &nb, Location loc, Value n, ValueRange args) {
          ImplicitLocOpBuilder jb(loc, nb);
          Value l = memref::LoadOp::create(jb, op.getLseParts(), withPart(n));
          Value w = math::Exp2Op::create(
              jb, arith::MulFOp::create(jb, arith::SubFOp::create(jb, l, ref),
                                        log2e));
          // Empty parts (lse = -inf) are not read at all.
          Value used = arith::CmpFOp::create(jb, arith::CmpFPredicate::OGT, l,
                                             negInf);
          auto partIf = scf::IfOp::create(
              jb, used,
              [&](OpBuilder &nb2, Location loc2) {
                ImplicitLocOpBuilder pb(loc2, nb2);
                SmallVector<Value> at = withPart(n);
                at.push_back(d);
                Value part =
                    vector::LoadOp::create(pb, vecType, op.getOParts(), at);
                Value wv = vector::BroadcastOp::create(pb, vecType, w);
                scf::YieldOp::create(
                    pb, ValueRange{vector::FMAOp::create(pb, part, wv,
                                                         args[1])});
              },
              [&](OpBuilder &nb2, Location loc2) {
                ImplicitLocOpBuilder pb(loc2, nb2);
                scf::YieldOp::create(pb, ValueRange{args[1]});
              });
          scf::YieldOp::create(
              jb, ValueRange{arith::AddFOp::create(jb, args[0], w),
                             partIf.getResult(0)});
        });
    Value total = loop.getResult(0);
    Value safeTotal =
        arith::SelectOp::create(ib, empty, f32Const(ib, 1.0), total);
    Value inv = arith::SelectOp::create(
        ib, empty, zeroF,
        arith::DivFOp::create(ib, f32Const(ib, 1.0), safeTotal));
    Value merged = arith::MulFOp::create(
        ib, loop.getResult(1), vector::BroadcastOp::create(ib, vecType, inv));
    SmallVector<Value> at(idx);
    at.push_back(d);
    vector::StoreOp::create(
        ib, castFloat(ib, merged, oType.getElementType()), op.getO(), at);
    Value first =
        arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, iv[0], c0);
    scf::IfOp::create(ib, first, [&](OpBuilder &nb, Location loc) {
      ImplicitLocOpBuilder jb(loc, nb);
      Value lse = arith::AddFOp::create(
          jb, ref,
          arith::MulFOp::create(jb, math::Log2Op::create(jb, safeTotal),
                                f32Const(jb, kLn2)));
      lse = arith::SelectOp::create(jb, empty, negInf, lse);
      memref::StoreOp::create(jb, lse, op.getLse(), idx);
      scf::YieldOp::create(jb);
    });
  });
  op.erase();
  return success();
}

struct TilePass : public mla::impl::MLATileBase<TilePass> {
  void runOnOperation() override {
    // Decode first: it creates the merges that are tiled next.
    SmallVector<DecodeOp> decodes;
    getOperation().walk([&](DecodeOp op) { decodes.push_back(op); });
    for (DecodeOp op : decodes)
      if (failed(tileDecode(op)))
        return signalPassFailure();
    SmallVector<MergeOp> merges;
    getOperation().walk([&](MergeOp op) { merges.push_back(op); });
    for (MergeOp op : merges)
      if (failed(tileMerge(op)))
        return signalPassFailure();
  }
};
} // namespace
