//===- Tile.cpp - mla-tile: split-KV tiling with online softmax ------------===//
//
// mla.decode  -> workspace + mla.grid(request, head group, KV split) + mla.merge
// mla.prefill -> mla.grid(query tile, head, request)
// mla.merge   -> mla.grid over the merge's leading dims
//
// Decode and prefill share one online-softmax core (emitOnlineSoftmax): they
// differ only in how queries, keys and values reach the tiles, which keys a
// query row sees, and where the result goes.
// The grid bodies are blockwise programs: tiles live in memref.alloca buffers
// (LDS/shared memory on GPUs, the stack on the host), key tiles arrive through
// the logical mla.load_kv_tile and products go through mla.matmul. The online
// softmax works in the log2 domain: scores are multiplied by
// scale * log2(e) once, exponentials are exp2, and the LSE is converted back
// to the natural log when written.
//
//===----------------------------------------------------------------------===//
#include "AttentionLayout.h"
#include "mla/Transforms/Passes.h"
#include "mla/Transforms/TileAppendKV.h"
#include "mla/Transforms/Utils.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <cmath>
#include <functional>
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

/// Size of dim `d` of `memref` as an index value (constant when static; for
/// a transposed view, the dim of its source, so that launchers can compute
/// grid sizes from argument shapes).
Value dimValue(ImplicitLocOpBuilder &b, Value memref, int64_t d) {
  auto type = cast<MemRefType>(memref.getType());
  if (!type.isDynamicDim(d))
    return indexConst(b, type.getDimSize(d));
  if (auto transpose = memref.getDefiningOp<memref::TransposeOp>())
    return dimValue(b, transpose.getIn(),
                    transpose.getPermutation().getDimPosition(d));
  return memref::DimOp::create(b, memref, d);
}

/// A parallel copy of `rows x width` elements into `tile` (a 2-D buffer):
/// row r < `limit` reads `src` at `srcIndex(r, col)`, other rows get zeros.
/// Written as `tile[r, c] = r < limit ? load : 0` so that mla-distribute can
/// make it an asynchronous copy on NVIDIA.
void maskedRowCopy(
    ImplicitLocOpBuilder &b, Value tile, int64_t rows, int64_t width,
    Value limit, Value src,
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value, Value)>
        srcIndex) {
  Type elem = cast<MemRefType>(tile.getType()).getElementType();
  const int64_t vw = vectorWidthFor(width);
  auto vecType = VectorType::get({vw}, elem);
  Value zeros = arith::ConstantOp::create(
      b, vecType, DenseElementsAttr::get(vecType, b.getFloatAttr(elem, 0.0)));
  Value cVw = indexConst(b, vw);
  parallelFor(b, {indexConst(b, rows), indexConst(b, width / vw)},
              [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
    Value d = arith::MulIOp::create(rb, iv[1], cVw);
    Value inRange =
        arith::CmpIOp::create(rb, arith::CmpIPredicate::slt, iv[0], limit);
    auto ifOp = scf::IfOp::create(
        rb, inRange,
        [&](OpBuilder &nb, Location loc) {
          ImplicitLocOpBuilder ib(loc, nb);
          Value v = vector::LoadOp::create(ib, vecType, src,
                                           srcIndex(ib, iv[0], d));
          scf::YieldOp::create(ib, v);
        },
        [&](OpBuilder &nb, Location loc) {
          ImplicitLocOpBuilder ib(loc, nb);
          scf::YieldOp::create(ib, zeros);
        });
    vector::StoreOp::create(rb, ifOp.getResult(0), tile, ValueRange{iv[0], d});
  });
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
  if (!cfg.getWgmma())
    config += " wgmma=0";
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
// The online-softmax core shared by decode and prefill
//===----------------------------------------------------------------------===//

/// The fast-memory buffers of one workgroup's attention: `rows` query rows
/// of width `dim`, key tiles of `tile` rows, values of width `dv` (a view of
/// the key tile when values are the keys' first columns, as in the absorbed
/// decode; a tile of their own otherwise). With `stages` > 1 the key (and
/// value) buffers hold `stages` tiles: while one is read, the next ones are
/// being copied.
struct AttentionTiles {
  int64_t rows, tile, dim, dv, stages;
  Type elem;
  bool separateValues;
  Value qTile, kBuf, vBuf, acc;
  Value mBuf, lBuf, rowScratch;

  /// The key / value tile in slot `slot` (an index) of the buffers.
  Value kTile(ImplicitLocOpBuilder &b, Value slot) const {
    return slotView(b, kBuf, slot, dim);
  }
  Value vTile(ImplicitLocOpBuilder &b, Value slot) const {
    if (separateValues)
      return slotView(b, vBuf, slot, dv);
    return slotView(b, kBuf, slot, dv);
  }

private:
  Value slotView(ImplicitLocOpBuilder &b, Value buf, Value slot,
                 int64_t cols) const {
    if (stages == 1 && cols == cast<MemRefType>(buf.getType()).getDimSize(1))
      return buf;
    OpFoldResult row0;
    if (std::optional<int64_t> c = getConstantIntValue(slot))
      row0 = b.getIndexAttr(*c * tile);
    else
      row0 = arith::MulIOp::create(b, slot, indexConst(b, tile)).getResult();
    return memref::SubViewOp::create(
        b, buf, ArrayRef<OpFoldResult>{row0, b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(tile), b.getIndexAttr(cols)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
  }
};

AttentionTiles allocateTiles(ImplicitLocOpBuilder &g, int64_t rows,
                             int64_t tile, int64_t dim, int64_t dv, Type elem,
                             bool separateValues, int64_t stages) {
  Type f32 = g.getF32Type();
  AttentionTiles t{rows, tile, dim, dv, stages, elem, separateValues,
                   {}, {}, {}, {}, {}, {}, {}};
  // Matrix tiles are padded (AttentionLayout.h). The attention step's
  // scores, probabilities and correction are its lowering's scratch
  // (allocateStepScratch).
  t.qTile = paddedTile(g, rows, dim, elem);
  t.kBuf = paddedTile(g, stages * tile, dim, elem);
  if (separateValues)
    t.vBuf = paddedTile(g, stages * tile, dv, elem);
  t.acc = paddedTile(g, rows, dv, f32);
  auto rowBuf = [&]() {
    return memref::AllocaOp::create(g, MemRefType::get({rows}, f32));
  };
  t.mBuf = rowBuf();
  t.lBuf = rowBuf();
  t.rowScratch = rowBuf();
  return t;
}

/// Inlines a variant region (mla.decode / mla.prefill `score`, `mask`,
/// `sink`) at the builder with `args` for its block arguments and returns
/// the yielded value. math.exp, math.log and math.tanh become exp2/log2
/// forms, which every target lowers without a device library.
Value inlineVariant(ImplicitLocOpBuilder &b, Region &region,
                    ArrayRef<Value> args) {
  Block &block = region.front();
  IRMapping map;
  for (auto [arg, v] : llvm::zip(block.getArguments(), args))
    map.map(arg, v);
  Value result;
  for (Operation &op : block) {
    if (auto yield = dyn_cast<YieldOp>(op)) {
      result = map.lookupOrDefault(yield.getValues().front());
      break;
    }
    auto operand = [&](unsigned i) {
      return map.lookupOrDefault(op.getOperand(i));
    };
    if (auto e = dyn_cast<math::ExpOp>(op)) {
      Value log2e =
          arith::ConstantOp::create(b, b.getFloatAttr(e.getType(), kLog2e));
      map.map(e.getResult(),
              math::Exp2Op::create(
                  b, arith::MulFOp::create(b, operand(0), log2e)));
    } else if (auto l = dyn_cast<math::LogOp>(op)) {
      Value ln2 = arith::ConstantOp::create(b, b.getFloatAttr(l.getType(), kLn2));
      map.map(l.getResult(),
              arith::MulFOp::create(b, math::Log2Op::create(b, operand(0)),
                                    ln2));
    } else if (auto t = dyn_cast<math::TanhOp>(op)) {
      // tanh x = 1 - 2 / (exp2(2 x log2 e) + 1): exact limits +-1 for large
      // |x| (exp2 overflows to inf or underflows to 0), no NaN.
      Type ty = t.getType();
      Value one = arith::ConstantOp::create(b, b.getFloatAttr(ty, 1.0));
      Value two = arith::ConstantOp::create(b, b.getFloatAttr(ty, 2.0));
      Value e = math::Exp2Op::create(
          b, arith::MulFOp::create(
                 b, operand(0),
                 arith::ConstantOp::create(b, b.getFloatAttr(ty, 2 * kLog2e))));
      map.map(t.getResult(),
              arith::SubFOp::create(
                  b, one,
                  arith::DivFOp::create(b, two,
                                        arith::AddFOp::create(b, e, one))));
    } else {
      b.clone(op, map);
    }
  }
  return result;
}

/// The variant regions of a decode or prefill, as hooks of the softmax
/// core. `position(b, row)` gives (request, head, query position) of a tile
/// row; key positions are absolute key indices of the request.
struct Variants {
  Region *score = nullptr, *mask = nullptr, *sink = nullptr;
  std::function<std::array<Value, 3>(ImplicitLocOpBuilder &, Value)> position;
};

/// The op's non-empty variant regions.
Variants variantsOf(Region &score, Region &mask, Region &sink) {
  Variants v;
  if (!score.empty())
    v.score = &score;
  if (!mask.empty())
    v.mask = &mask;
  if (!sink.empty())
    v.sink = &sink;
  return v;
}

/// acc = 0, m = -inf, l = 0.
void initSoftmaxState(ImplicitLocOpBuilder &g, const AttentionTiles &t) {
  fillBuffer(g, t.acc, 0.0);
  fillBuffer(g, t.mBuf, kNegInf);
  fillBuffer(g, t.lBuf, 0.0);
}

/// The online softmax over the key tiles starting at `start`, `start +
/// tile`, ... below `end`. `loadTiles(b, t0)` stages keys (and values)
/// t0, t0 + 1, ... into the key (and value) tile, zeros past `end`;
/// `visibleEnd(b, row)` is the exclusive bound of the keys query row `row`
/// sees (its causal limit; keys at or past `end` are never seen). Leaves
/// the unnormalised output in `acc`, the running max (log2 domain) in `mBuf`
/// and the sum of exponentials in `lBuf`.
void emitOnlineSoftmax(
    ImplicitLocOpBuilder &g, const AttentionTiles &t, Value start, Value end,
    Value scale, const Variants &variants,
    function_ref<void(ImplicitLocOpBuilder &, Value, Value, Value)> loadTiles,
    function_ref<Value(ImplicitLocOpBuilder &, Value)> visibleEnd) {
  Value scaleLog2 = arith::MulFOp::create(g, scale, f32Const(g, kLog2e));
  Value c0 = indexConst(g, 0), c1 = indexConst(g, 1);
  Value cTile = indexConst(g, t.tile), cRows = indexConst(g, t.rows);
  Value zeroF = f32Const(g, 0.0);
  // Tile t0 from the given key / value tiles (already staged): one
  // attention step. Its element function maps (row, column, raw score) to
  // the log2-domain logit and its visibility: columns past the row's
  // visible end (causal limit, sequence end) and masked keys are
  // invisible. `stages` is the key loop's pipeline depth.
  auto tileBody = [&](ImplicitLocOpBuilder &tb, Value t0, Value kTile,
                      Value vTile, int64_t stages) {
    auto step = AttentionStepOp::create(tb, t.qTile, kTile, vTile, t.acc,
                                        t.mBuf, t.lBuf,
                                        tb.getI64IntegerAttr(stages));
    Type idxType = tb.getIndexType();
    Block *body = tb.createBlock(&step.getBody(), {},
                                 {idxType, idxType, tb.getF32Type()},
                                 {tb.getLoc(), tb.getLoc(), tb.getLoc()});
    ImplicitLocOpBuilder eb = ImplicitLocOpBuilder::atBlockEnd(tb.getLoc(),
                                                               body);
    Value row = body->getArgument(0), c = body->getArgument(1),
          sc = body->getArgument(2);
    Value visEnd = minIdx(eb, end, visibleEnd(eb, row));
    Value visible = arith::CmpIOp::create(
        eb, arith::CmpIPredicate::slt, arith::AddIOp::create(eb, t0, c),
        visEnd);
    Value x;
    std::array<Value, 3> pos;
    if (variants.score || variants.mask)
      pos = variants.position(eb, row);
    Value key = arith::AddIOp::create(eb, t0, c);
    if (variants.score) {
      Value s = inlineVariant(eb, *variants.score,
                              {arith::MulFOp::create(eb, sc, scale), pos[0],
                               pos[1], pos[2], key});
      x = arith::MulFOp::create(eb, s, f32Const(eb, kLog2e));
    } else {
      x = arith::MulFOp::create(eb, sc, scaleLog2);
    }
    if (variants.mask)
      visible = arith::AndIOp::create(
          eb, visible,
          inlineVariant(eb, *variants.mask, {pos[0], pos[1], pos[2], key}));
    YieldOp::create(eb, ValueRange{x, visible});
    tb.setInsertionPointAfter(step);
  };
  if (!variants.mask && t.stages > 1) {
    // A pipeline of `stages` tiles: the first stages - 1 are copied before
    // the loop; iteration i first starts the copy of tile i + stages - 1
    // into the slot tile i - 1 used (a GPU target may keep stages - 1 such
    // copies in flight while it computes: the step's `stages`), then
    // computes tile i from slot i % stages. Copies past `end` only write
    // zeros.
    const int64_t stages = t.stages;
    for (int64_t s = 0; s + 1 < stages; ++s) {
      Value slot = indexConst(g, s);
      Value kTile = t.kTile(g, slot), vTile = t.vTile(g, slot);
      loadTiles(g,
                arith::AddIOp::create(g, start, indexConst(g, s * t.tile)),
                kTile, vTile);
    }
    Value cStages = indexConst(g, stages);
    forLoop(g, start, end, cTile, [&](ImplicitLocOpBuilder &lb, Value t0) {
      Value i = arith::DivUIOp::create(
          lb, arith::SubIOp::create(lb, t0, start), cTile);
      Value slot = arith::RemUIOp::create(lb, i, cStages);
      Value next = arith::RemUIOp::create(
          lb, arith::AddIOp::create(lb, i, indexConst(lb, stages - 1)),
          cStages);
      Value kNext = t.kTile(lb, next), vNext = t.vTile(lb, next);
      Value tNext = arith::AddIOp::create(
          lb, t0, indexConst(lb, (stages - 1) * t.tile));
      loadTiles(lb, tNext, kNext, vNext);
      Value kTile = t.kTile(lb, slot), vTile = t.vTile(lb, slot);
      tileBody(lb, t0, kTile, vTile, stages);
    });
    return;
  }
  if (!variants.mask) {
    forLoop(g, start, end, cTile, [&](ImplicitLocOpBuilder &lb, Value t0) {
      Value slot = indexConst(lb, 0);
      Value kTile = t.kTile(lb, slot), vTile = t.vTile(lb, slot);
      loadTiles(lb, t0, kTile, vTile);
      tileBody(lb, t0, kTile, vTile, /*stages=*/1);
    });
    return;
  }
  // With a mask, a key tile that no row of the workgroup sees is skipped
  // (not loaded, no products): the mask is evaluated for every (row, key)
  // of the tile first, which costs a fraction of Q·Kᵀ and holds for any
  // mask. Per-row flags, then one workgroup-wide flag, each written by one
  // parallel phase (so that on GPUs a barrier separates them from readers).
  ImplicitLocOpBuilder topBuilder =
      builderAtGridTop(g.getLoc(), g.getInsertionBlock());
  Value anyFlag = memref::AllocaOp::create(
      topBuilder, MemRefType::get({1}, g.getF32Type()));
  forLoop(g, start, end, cTile, [&](ImplicitLocOpBuilder &lb, Value t0) {
    Value one = f32Const(lb, 1.0);
    parallelFor(lb, {cRows}, [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
      Value row = iv[0];
      Value visEnd = minIdx(rb, end, visibleEnd(rb, row));
      Value hi = minIdx(
          rb, maxIdx(rb, arith::SubIOp::create(rb, visEnd, t0), c0), cTile);
      std::array<Value, 3> pos = variants.position(rb, row);
      Value seen = reduceLoop(
          rb, c0, hi, c1, zeroF,
          [&](ImplicitLocOpBuilder &cb, Value c, Value acc) -> Value {
            Value key = arith::AddIOp::create(cb, t0, c);
            Value visible = inlineVariant(cb, *variants.mask,
                                          {pos[0], pos[1], pos[2], key});
            return arith::SelectOp::create(cb, visible, one, acc);
          });
      memref::StoreOp::create(rb, seen, t.rowScratch, ValueRange{row});
    });
    parallelFor(lb, {indexConst(lb, 1)}, [&](ImplicitLocOpBuilder &rb,
                                             ValueRange) {
      Value seen = reduceLoop(
          rb, c0, cRows, c1, zeroF,
          [&](ImplicitLocOpBuilder &cb, Value r, Value acc) -> Value {
            return arith::MaximumFOp::create(
                cb, acc, memref::LoadOp::create(cb, t.rowScratch, ValueRange{r}));
          });
      memref::StoreOp::create(rb, seen, anyFlag, ValueRange{c0});
    });
    Value any = arith::CmpFOp::create(
        lb, arith::CmpFPredicate::OGT,
        memref::LoadOp::create(lb, anyFlag, ValueRange{c0}), zeroF);
    auto ifOp = scf::IfOp::create(lb, any, /*withElseRegion=*/false);
    ImplicitLocOpBuilder ib(lb.getLoc(), ifOp.thenBlock()->getTerminator());
    Value slot = indexConst(ib, 0);
    Value kTile = t.kTile(ib, slot), vTile = t.vTile(ib, slot);
    loadTiles(ib, t0, kTile, vTile);
    tileBody(ib, t0, kTile, vTile, /*stages=*/1);
  });
}

/// A sink logit joins each row's softmax denominator: with z the logit in
/// the log2 domain, m' = max(m, z), l' = l · 2^(m - m') + 2^(z - m'), and the
/// accumulator is rescaled by 2^(m - m') (0 for a row that saw no key).
void applySink(ImplicitLocOpBuilder &g, const AttentionTiles &t,
               const Variants &variants) {
  Value negInf = f32Const(g, kNegInf), zeroF = f32Const(g, 0.0);
  parallelFor(g, {indexConst(g, t.rows)}, [&](ImplicitLocOpBuilder &rb,
                                              ValueRange iv) {
    Value row = iv[0];
    std::array<Value, 3> pos = variants.position(rb, row);
    Value z = arith::MulFOp::create(
        rb, inlineVariant(rb, *variants.sink, {pos[0], pos[1], pos[2]}),
        f32Const(rb, kLog2e));
    Value m = memref::LoadOp::create(rb, t.mBuf, ValueRange{row});
    Value mNew = arith::MaximumFOp::create(rb, m, z);
    // A sink of -inf on a row without keys keeps the row empty.
    Value empty =
        arith::CmpFOp::create(rb, arith::CmpFPredicate::OEQ, mNew, negInf);
    Value ref = arith::SelectOp::create(rb, empty, zeroF, mNew);
    Value corr =
        math::Exp2Op::create(rb, arith::SubFOp::create(rb, m, ref));
    Value l = memref::LoadOp::create(rb, t.lBuf, ValueRange{row});
    Value lNew = arith::AddFOp::create(
        rb, arith::MulFOp::create(rb, l, corr),
        math::Exp2Op::create(rb, arith::SubFOp::create(rb, z, ref)));
    memref::StoreOp::create(rb, mNew, t.mBuf, ValueRange{row});
    memref::StoreOp::create(rb, lNew, t.lBuf, ValueRange{row});
    memref::StoreOp::create(rb, corr, t.rowScratch, ValueRange{row});
  });
  const int64_t vw = vectorWidthFor(t.dv);
  auto vecType = VectorType::get({vw}, g.getF32Type());
  parallelFor(g, {indexConst(g, t.rows), indexConst(g, t.dv / vw)},
              [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
    Value d = arith::MulIOp::create(rb, iv[1], indexConst(rb, vw));
    Value corr = memref::LoadOp::create(rb, t.rowScratch, ValueRange{iv[0]});
    Value a = vector::LoadOp::create(rb, vecType, t.acc, ValueRange{iv[0], d});
    vector::StoreOp::create(
        rb,
        arith::MulFOp::create(rb, a,
                              vector::BroadcastOp::create(rb, vecType, corr)),
        t.acc, ValueRange{iv[0], d});
  });
}

/// The normalised output chunk of `row` (acc[row, d : d + vw] / l, 0 for a
/// row that saw no key) and, through `writeLse`, its natural-log LSE
/// (-inf for such a row).
struct RowResult {
  Value scaled; // vector<vw x f32>
  Value safeL, empty;
};

RowResult normalisedRow(ImplicitLocOpBuilder &rb, const AttentionTiles &t,
                        Value row, Value d, int64_t vw) {
  Value zeroF = f32Const(rb, 0.0);
  Value l = memref::LoadOp::create(rb, t.lBuf, ValueRange{row});
  Value empty = arith::CmpFOp::create(rb, arith::CmpFPredicate::OEQ, l, zeroF);
  Value safeL = arith::SelectOp::create(rb, empty, f32Const(rb, 1.0), l);
  Value inv = arith::SelectOp::create(
      rb, empty, zeroF, arith::DivFOp::create(rb, f32Const(rb, 1.0), safeL));
  auto accVec = VectorType::get({vw}, rb.getF32Type());
  Value a = vector::LoadOp::create(rb, accVec, t.acc, ValueRange{row, d});
  Value scaled = arith::MulFOp::create(
      rb, a, vector::BroadcastOp::create(rb, accVec, inv));
  return {scaled, safeL, empty};
}

/// lse = (m + log2 l) * ln 2, or -inf for a row that saw no key.
Value rowLse(ImplicitLocOpBuilder &ib, const AttentionTiles &t, Value row,
             const RowResult &r) {
  Value m = memref::LoadOp::create(ib, t.mBuf, ValueRange{row});
  Value lse = arith::MulFOp::create(
      ib, arith::AddFOp::create(ib, m, math::Log2Op::create(ib, r.safeL)),
      f32Const(ib, kLn2));
  return arith::SelectOp::create(ib, r.empty, f32Const(ib, kNegInf), lse);
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

    // Values are the first `dv` columns of the staged key rows.
    AttentionTiles t =
        allocateTiles(g, rows, tile, dim, dv, elem, /*separateValues=*/false,
                      op.getMask().empty() ? cfg.getStages() : 1);

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
                  vector::StoreOp::create(ib, v, t.qTile,
                                          ValueRange{rowOf(ib, iv[0], iv[1]),
                                                     d});
                });

    // Row i * group + hh: request req, head headBase + hh, query position
    // len - sq + i.
    Variants variants =
        variantsOf(op.getScore(), op.getMask(), op.getSink());
    variants.position = [&](ImplicitLocOpBuilder &rb,
                            Value row) -> std::array<Value, 3> {
      Value i = group == 1 ? row : arith::DivUIOp::create(rb, row, cGroup);
      Value hh = group == 1 ? indexConst(rb, 0)
                           : arith::RemUIOp::create(rb, row, cGroup);
      return {req, arith::AddIOp::create(rb, headBase, hh),
              arith::AddIOp::create(rb, arith::SubIOp::create(rb, len, cSq),
                                    i)};
    };
    emitOnlineSoftmax(
        g, t, start, end, op.getScale(), variants,
        [&](ImplicitLocOpBuilder &tb, Value t0, Value kTile, Value) {
          LoadKVTileOp::create(tb, op.getKv(), op.getBlockTable(), req, t0,
                               end, kTile);
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
    Value cVw = indexConst(g, vw);
    parallelFor(
        g, {cSq, cGroup, indexConst(g, dv / vw)},
        [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
          Value i = iv[0], row = rowOf(rb, iv[0], iv[1]);
          Value head = arith::AddIOp::create(rb, headBase, iv[1]);
          Value d = arith::MulIOp::create(rb, iv[2], cVw);
          RowResult r = normalisedRow(rb, t, row, d, vw);
          vector::StoreOp::create(rb, r.scaled, wsO,
                                  ValueRange{req, i, head, split, d});
          // One iteration per row writes the LSE.
          Value first =
              arith::CmpIOp::create(rb, arith::CmpIPredicate::eq, iv[2], c0);
          scf::IfOp::create(rb, first, [&](OpBuilder &nb, Location loc) {
            ImplicitLocOpBuilder ib(loc, nb);
            memref::StoreOp::create(ib, rowLse(ib, t, row, r), wsL,
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
// mla.prefill
//===----------------------------------------------------------------------===//

void recordPrefillInfo(PrefillOp op) {
  auto func = op->getParentOfType<func::FuncOp>();
  if (!func)
    return;
  Builder b(op.getContext());
  ConfigAttr cfg = op.getConfigAttr();
  std::string config =
      llvm::formatv("tile_q={0} tile_kv={1} warps={2} stages={3}{4}",
                    cfg.getTileQ(), cfg.getTileKv(), cfg.getWarps(),
                    cfg.getStages(), cfg.getWgmma() ? "" : " wgmma=0")
          .str();
  NamedAttrList info;
  info.append("kernel", b.getStringAttr("prefill"));
  info.append("dtype",
              b.getStringAttr(typeName(op.getQ().getType().getElementType())));
  info.append("heads", b.getI64IntegerAttr(op.getNumHeads()));
  info.append("qk_dim", b.getI64IntegerAttr(op.getQkDim()));
  info.append("v_dim", b.getI64IntegerAttr(op.getVDim()));
  info.append("causal", b.getI64IntegerAttr(op.getCausal() ? 1 : 0));
  info.append("config", b.getStringAttr(config));
  func->setAttr("mla.kernel_info", info.getDictionary(op.getContext()));
  for (auto [v, role] :
       {std::pair<Value, StringRef>{op.getQ(), "q"},
        {op.getK(), "k"},
        {op.getV(), "v"},
        {op.getCuSeqlensQ(), "cu_seqlens_q"},
        {op.getCuSeqlensK(), "cu_seqlens_k"},
        {op.getScale(), "scale"},
        {op.getO(), "o"},
        {op.getLse(), "lse"}})
    tagRole(v, role);
}

/// One workgroup per (query tile, head, request): grid (ceil(T / tile_q), H,
/// B). A request's queries are split into tiles of tile_q rows; workgroups
/// past a request's last tile exit at once. With `causal`, the key loop
/// stops at the tile's last visible key (tiles above the diagonal are never
/// loaded) and tiles are visited last-first, so the heaviest start first.
LogicalResult tilePrefill(PrefillOp op) {
  ConfigAttr cfg = op.getConfigAttr();
  if (!cfg)
    return op.emitOpError()
           << "has no #mla.config; run mla-select-config before mla-tile";
  recordPrefillInfo(op);
  ImplicitLocOpBuilder b(op.getLoc(), op);
  const int64_t heads = op.getNumHeads(), dim = op.getQkDim(),
                dv = op.getVDim();
  const int64_t tileQ = cfg.getTileQ(), tile = cfg.getTileKv();
  const bool causal = op.getCausal();
  Type elem = op.getQ().getType().getElementType();
  Type outElem = op.getO().getType().getElementType();
  const int64_t vw = vectorWidthFor(dv);

  Value c1 = indexConst(b, 1);
  Value numQTiles = arith::CeilDivSIOp::create(b, dimValue(b, op.getQ(), 0),
                                               indexConst(b, tileQ));
  Value batch =
      arith::SubIOp::create(b, dimValue(b, op.getCuSeqlensQ(), 0), c1);
  auto [grid, ids] =
      createGrid(b, numQTiles, indexConst(b, heads), batch);
  grid->setAttr("config", cfg);
  {
    ImplicitLocOpBuilder g = ImplicitLocOpBuilder::atBlockBegin(
        op.getLoc(), &grid.getBody().front());
    Value head = ids[1], req = ids[2];
    Value c0 = indexConst(g, 0), g1 = indexConst(g, 1);
    Value cTileQ = indexConst(g, tileQ);
    // Heaviest tiles first when causal.
    Value qTileIdx = ids[0];
    if (causal) {
      Value n = arith::CeilDivSIOp::create(g, dimValue(g, op.getQ(), 0),
                                           cTileQ);
      qTileIdx = arith::SubIOp::create(
          g, arith::SubIOp::create(g, n, g1), ids[0]);
    }
    auto loadIndex = [&](Value cu, Value i) -> Value {
      Value v = memref::LoadOp::create(g, cu, ValueRange{i});
      return arith::IndexCastOp::create(g, g.getIndexType(), v);
    };
    Value reqNext = arith::AddIOp::create(g, req, g1);
    Value qStart = loadIndex(op.getCuSeqlensQ(), req);
    Value qLen = maxIdx(
        g, arith::SubIOp::create(g, loadIndex(op.getCuSeqlensQ(), reqNext),
                                 qStart),
        c0);
    Value kStart = loadIndex(op.getCuSeqlensK(), req);
    Value kLen = maxIdx(
        g, arith::SubIOp::create(g, loadIndex(op.getCuSeqlensK(), reqNext),
                                 kStart),
        c0);
    Value q0 = arith::MulIOp::create(g, qTileIdx, cTileQ);
    // Query i of the request sees keys j < i + 1 + (kLen - qLen).
    Value shift = arith::SubIOp::create(g, kLen, qLen);

    AttentionTiles t =
        allocateTiles(g, tileQ, tile, dim, dv, elem, /*separateValues=*/true,
                      op.getMask().empty() ? cfg.getStages() : 1);

    auto activeIf = scf::IfOp::create(
        g, arith::CmpIOp::create(g, arith::CmpIPredicate::slt, q0, qLen),
        /*withElseRegion=*/false);
    g.setInsertionPoint(activeIf.thenBlock()->getTerminator());
    Value rowsValid = minIdx(g, cTileQ, arith::SubIOp::create(g, qLen, q0));
    Value firstRow = arith::AddIOp::create(g, qStart, q0);
    // Keys this tile sees at all: up to its last row's causal limit.
    Value end = kLen;
    if (causal)
      end = minIdx(
          g, kLen,
          maxIdx(g,
                 arith::AddIOp::create(
                     g, arith::AddIOp::create(g, q0, cTileQ), shift),
                 c0));
    initSoftmaxState(g, t);
    maskedRowCopy(g, t.qTile, tileQ, dim, rowsValid, op.getQ(),
                  [&](ImplicitLocOpBuilder &ib, Value r, Value d) {
                    return SmallVector<Value>{
                        arith::AddIOp::create(ib, firstRow, r), head, d};
                  });
    // Row r: request req, head `head`, query position q0 + r + Lk - Lq.
    Variants variants =
        variantsOf(op.getScore(), op.getMask(), op.getSink());
    variants.position = [&](ImplicitLocOpBuilder &rb,
                            Value row) -> std::array<Value, 3> {
      return {req, head,
              arith::AddIOp::create(rb, arith::AddIOp::create(rb, q0, row),
                                    shift)};
    };
    emitOnlineSoftmax(
        g, t, c0, end, op.getScale(), variants,
        [&](ImplicitLocOpBuilder &tb, Value t0, Value kTile, Value vTile) {
          Value limit = arith::SubIOp::create(tb, end, t0);
          Value keyRow = arith::AddIOp::create(tb, kStart, t0);
          auto at = [&](ImplicitLocOpBuilder &ib, Value r, Value d) {
            return SmallVector<Value>{arith::AddIOp::create(ib, keyRow, r),
                                      head, d};
          };
          maskedRowCopy(tb, kTile, tile, dim, limit, op.getK(), at);
          maskedRowCopy(tb, vTile, tile, dv, limit, op.getV(), at);
        },
        [&](ImplicitLocOpBuilder &rb, Value row) -> Value {
          if (!causal)
            return kLen;
          return arith::AddIOp::create(
              rb, arith::AddIOp::create(rb, arith::AddIOp::create(rb, q0, row),
                                        shift),
              indexConst(rb, 1));
        });

    if (variants.sink)
      applySink(g, t, variants);

    // Epilogue: rows of this tile that are queries write o and lse.
    Value cVw = indexConst(g, vw);
    parallelFor(g, {cTileQ, indexConst(g, dv / vw)},
                [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
      Value row = iv[0];
      Value isQuery =
          arith::CmpIOp::create(rb, arith::CmpIPredicate::slt, row, rowsValid);
      scf::IfOp::create(rb, isQuery, [&](OpBuilder &nb, Location loc) {
        ImplicitLocOpBuilder ib(loc, nb);
        Value d = arith::MulIOp::create(ib, iv[1], cVw);
        Value token = arith::AddIOp::create(ib, firstRow, row);
        RowResult r = normalisedRow(ib, t, row, d, vw);
        vector::StoreOp::create(ib, castFloat(ib, r.scaled, outElem),
                                op.getO(), ValueRange{token, head, d});
        Value first =
            arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, iv[1], c0);
        scf::IfOp::create(ib, first, [&](OpBuilder &nb2, Location loc2) {
          ImplicitLocOpBuilder jb(loc2, nb2);
          memref::StoreOp::create(jb, rowLse(jb, t, row, r), op.getLse(),
                                  ValueRange{head, token});
          scf::YieldOp::create(jb);
        });
        scf::YieldOp::create(ib);
      });
    });
  }
  op.erase();
  return success();
}

//===----------------------------------------------------------------------===//
// mla.merge
//===----------------------------------------------------------------------===//

/// The function argument `v` is, or views through transposes.
Value viewSource(Value v) {
  while (auto t = v.getDefiningOp<memref::TransposeOp>())
    v = t.getIn();
  return v;
}

/// A merge on the function's own arguments (a standalone merge kernel, e.g.
/// for chunked prefill) describes the kernel; a decode's merge does not.
void recordMergeInfo(MergeOp op) {
  auto func = op->getParentOfType<func::FuncOp>();
  if (!func || func->hasAttr("mla.kernel_info") ||
      !isa<BlockArgument>(viewSource(op.getO())))
    return;
  Builder b(op.getContext());
  auto oType = op.getO().getType();
  const int64_t lead = op.getLse().getType().getRank();
  NamedAttrList info;
  info.append("kernel", b.getStringAttr("merge"));
  info.append("dtype", b.getStringAttr(typeName(oType.getElementType())));
  if (lead == 2 && !oType.isDynamicDim(1))
    info.append("heads", b.getI64IntegerAttr(oType.getDimSize(1)));
  info.append("v_dim", b.getI64IntegerAttr(oType.getDimSize(lead)));
  info.append("parts", b.getI64IntegerAttr(
                           op.getLseParts().getType().getDimSize(lead)));
  func->setAttr("mla.kernel_info", info.getDictionary(op.getContext()));
  for (auto [v, role] :
       {std::pair<Value, StringRef>{op.getOParts(), "o_parts"},
        {op.getLseParts(), "lse_parts"},
        {op.getO(), "o"},
        {op.getLse(), "lse"}})
    tagRole(viewSource(v), role);
}

LogicalResult tileMerge(MergeOp op) {
  recordMergeInfo(op);
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
    SmallVector<PrefillOp> prefills;
    getOperation().walk([&](PrefillOp op) { prefills.push_back(op); });
    for (PrefillOp op : prefills)
      if (failed(tilePrefill(op)))
        return signalPassFailure();
    // Decode before merge: it creates the merges that are tiled next.
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
    // KV append (TileAppendKV.cpp).
    SmallVector<AppendKVOp> appends;
    getOperation().walk([&](AppendKVOp op) { appends.push_back(op); });
    for (AppendKVOp op : appends)
      if (failed(tileAppendKV(op)))
        return signalPassFailure();
  }
};
} // namespace
