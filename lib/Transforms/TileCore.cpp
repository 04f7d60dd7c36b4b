//===- TileCore.cpp - mla-tile's online-softmax core ----------------------===//
//
// Decode and prefill share one online-softmax core (emitOnlineSoftmax): they
// differ only in how queries, keys and values reach the tiles, which keys a
// query row sees, and where the result goes. The online softmax works in the
// log2 domain: scores are multiplied by scale * log2(e) once, exponentials
// are exp2, and the LSE is converted back to the natural log when written.
//
//===----------------------------------------------------------------------===//
#include "TileCore.h"
#include "AttentionLayout.h"
#include "Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mla;
using namespace mla::tiling;

namespace mla::tiling {

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
  auto grid =
      GridOp::create(b, gx, gy, gz, ConfigAttr(), IntegerAttr(), IntegerAttr());
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
Value queryView(ImplicitLocOpBuilder &b, Value q,
                ArrayRef<OpFoldResult> offsets, ArrayRef<int64_t> sizes,
                int64_t rows, int64_t dim) {
  SmallVector<OpFoldResult> sizeAttrs = llvm::map_to_vector(
      sizes, [&](int64_t s) -> OpFoldResult { return b.getIndexAttr(s); });
  SmallVector<OpFoldResult> strides(sizes.size(), b.getIndexAttr(1));
  SmallVector<int64_t> kept;
  for (int64_t s : sizes)
    if (s != 1)
      kept.push_back(s);
  if (kept.size() < 2)
    kept = {rows, dim};
  auto viewType = memref::SubViewOp::inferRankReducedResultType(
      kept, cast<MemRefType>(q.getType()), offsets, sizeAttrs, strides);
  Value view = memref::SubViewOp::create(b, cast<MemRefType>(viewType), q,
                                         offsets, sizeAttrs, strides);
  if (kept.size() == 2)
    return view;
  ReassociationIndices leading;
  for (int64_t d = 0; d + 1 < int64_t(kept.size()); ++d)
    leading.push_back(d);
  ReassociationIndices last = {int64_t(kept.size()) - 1};
  return memref::CollapseShapeOp::create(
      b, view, ArrayRef<ReassociationIndices>{leading, last});
}

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
                Value inRange = arith::CmpIOp::create(
                    rb, arith::CmpIPredicate::slt, iv[0], limit);
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
                vector::StoreOp::create(rb, ifOp.getResult(0), tile,
                                        ValueRange{iv[0], d});
              });
}

Value AttentionTiles::slotView(ImplicitLocOpBuilder &b, Value buf, Value slot,
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

//===----------------------------------------------------------------------===//
// The online-softmax core shared by decode and prefill
//===----------------------------------------------------------------------===//

AttentionTiles allocateTiles(ImplicitLocOpBuilder &g, int64_t rows,
                             int64_t tile, int64_t dim, int64_t dv, Type elem,
                             bool separateValues, int64_t stages) {
  Type f32 = g.getF32Type();
  AttentionTiles t{rows, tile, dim, dv, stages, elem, separateValues,
                   {},   {},   {},  {}, {},     {},   {}};
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
      map.map(
          e.getResult(),
          math::Exp2Op::create(b, arith::MulFOp::create(b, operand(0), log2e)));
    } else if (auto l = dyn_cast<math::LogOp>(op)) {
      Value ln2 =
          arith::ConstantOp::create(b, b.getFloatAttr(l.getType(), kLn2));
      map.map(l.getResult(), arith::MulFOp::create(
                                 b, math::Log2Op::create(b, operand(0)), ln2));
    } else if (auto t = dyn_cast<math::TanhOp>(op)) {
      // tanh x = 1 - 2 / (exp2(2 x log2 e) + 1): exact limits +-1 for large
      // |x| (exp2 overflows to inf or underflows to 0), no NaN. The
      // division may use the chip's reciprocal (`afn`: div.approx.f32 on
      // NVIDIA, v_rcp_f32 on AMD, within 2 ulp like exp2's instruction)
      // instead of IEEE division, a dozen instructions with a slow path.
      Type ty = t.getType();
      Value one = arith::ConstantOp::create(b, b.getFloatAttr(ty, 1.0));
      Value two = arith::ConstantOp::create(b, b.getFloatAttr(ty, 2.0));
      Value e = math::Exp2Op::create(
          b, arith::MulFOp::create(
                 b, operand(0),
                 arith::ConstantOp::create(b, b.getFloatAttr(ty, 2 * kLog2e))));
      map.map(t.getResult(), arith::SubFOp::create(
                                 b, one,
                                 arith::DivFOp::create(
                                     b, two, arith::AddFOp::create(b, e, one),
                                     arith::FastMathFlags::afn)));
    } else {
      b.clone(op, map);
    }
  }
  return result;
}

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

/// The body of one key tile (emitOnlineSoftmax's): the tile at t0 from
/// the given key and value tiles, with the key loop's pipeline depth.
using TileBodyFn =
    function_ref<void(ImplicitLocOpBuilder &, Value, Value, Value, int64_t)>;
using LoadTilesFn =
    function_ref<void(ImplicitLocOpBuilder &, Value, Value, Value)>;

/// A pipelined key loop (no mask, `t.stages` > 1).
static void emitPipelinedKeyLoop(ImplicitLocOpBuilder &g,
                                 const AttentionTiles &t, Value start,
                                 Value end, Value cTile, LoadTilesFn loadTiles,
                                 TileBodyFn tileBody) {
  // A pipeline of `stages` tiles: the first stages - 1 are copied before
  // the loop; iteration i first starts the copy of tile i + stages - 1
  // into the slot tile i - 1 used (a GPU target may keep stages - 1 such
  // copies in flight while it computes: the step's `stages`), then
  // computes tile i from slot i % stages. Copies past `end` only write
  // zeros. With `t.overlap` the values run one tile behind the keys
  // (`lag` 1): iteration i copies value tile i + stages - 2 into the slot
  // value tile i - 2 used, so tile i - 1's values are still in place for
  // a P·V issued in iteration i; the groups a step waits for are then
  // those of one iteration earlier, as without the lag.
  const int64_t stages = t.stages;
  const int64_t lag = t.overlap && t.separateValues ? 1 : 0;
  auto tileStart = [&](ImplicitLocOpBuilder &b, Value base,
                       int64_t ahead) -> Value {
    if (ahead == 0)
      return base;
    return arith::AddIOp::create(b, base, indexConst(b, ahead * t.tile));
  };
  for (int64_t s = 0; s + 1 < stages; ++s) {
    Value slot = indexConst(g, s);
    Value kTile = t.kTile(g, slot);
    Value vTile = s + 1 + lag < stages ? t.vTile(g, slot) : Value();
    loadTiles(g, tileStart(g, start, s), kTile, vTile);
  }
  Value cStages = indexConst(g, stages);
  forLoop(g, start, end, cTile, [&](ImplicitLocOpBuilder &lb, Value t0) {
    Value i =
        arith::DivUIOp::create(lb, arith::SubIOp::create(lb, t0, start), cTile);
    Value slot = arith::RemUIOp::create(lb, i, cStages);
    auto slotAhead = [&](int64_t ahead) {
      Value tileIdx =
          ahead
              ? arith::AddIOp::create(lb, i, indexConst(lb, ahead)).getResult()
              : i;
      return arith::RemUIOp::create(lb, tileIdx, cStages);
    };
    Value next = slotAhead(stages - 1);
    Value kNext = t.kTile(lb, next);
    Value vNext = lag ? Value() : t.vTile(lb, next);
    loadTiles(lb, tileStart(lb, t0, stages - 1), kNext, vNext);
    if (lag) {
      // Value tile i + stages - 2, into the slot of value tile i - 2.
      Value vBehind = t.vTile(lb, slotAhead(stages - 1 - lag));
      loadTiles(lb, tileStart(lb, t0, stages - 1 - lag), Value(), vBehind);
    }
    Value kTile = t.kTile(lb, slot), vTile = t.vTile(lb, slot);
    tileBody(lb, t0, kTile, vTile, stages);
  });
}

/// A key loop with a mask variant, skipping the tiles no row sees.
static void
emitMaskedKeyLoop(ImplicitLocOpBuilder &g, const AttentionTiles &t, Value start,
                  Value end, Value cTile, const Variants &variants,
                  LoadTilesFn loadTiles,
                  function_ref<Value(ImplicitLocOpBuilder &, Value)> visibleEnd,
                  TileBodyFn tileBody) {
  Value c0 = indexConst(g, 0), c1 = indexConst(g, 1);
  Value cRows = indexConst(g, t.rows);
  Value zeroF = f32Const(g, 0.0);
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
    parallelFor(
        lb, {indexConst(lb, 1)}, [&](ImplicitLocOpBuilder &rb, ValueRange) {
          Value seen = reduceLoop(
              rb, c0, cRows, c1, zeroF,
              [&](ImplicitLocOpBuilder &cb, Value r, Value acc) -> Value {
                return arith::MaximumFOp::create(
                    cb, acc,
                    memref::LoadOp::create(cb, t.rowScratch, ValueRange{r}));
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

/// The online softmax over the key tiles starting at `start`, `start +
/// tile`, ... below `end`. `loadTiles(b, t0)` stages keys (and values)
/// t0, t0 + 1, ... into the key (and value) tile, zeros past `end`;
/// `visibleEnd(b, row)` is the exclusive bound of the keys query row `row`
/// sees (its causal limit; keys at or past `end` are never seen), not
/// decreasing with the row; a step whose tile ends at or before row 0's
/// bound is `all_visible` (without a mask variant). Leaves
/// the unnormalised output in `acc`, the running max (log2 domain) in `mBuf`
/// and the sum of exponentials in `lBuf`.
void emitOnlineSoftmax(
    ImplicitLocOpBuilder &g, const AttentionTiles &t, Value start, Value end,
    Value scale, const Variants &variants,
    function_ref<void(ImplicitLocOpBuilder &, Value, Value, Value)> loadTiles,
    function_ref<Value(ImplicitLocOpBuilder &, Value)> visibleEnd) {
  Value scaleLog2 = arith::MulFOp::create(g, scale, f32Const(g, kLog2e));
  Value c0 = indexConst(g, 0);
  Value cTile = indexConst(g, t.tile);
  // Tile t0 from the given key / value tiles (already staged): one
  // attention step. Its element function maps (row, column, raw score) to
  // the log2-domain logit and its visibility: columns past the row's
  // visible end (causal limit, sequence end) and masked keys are
  // invisible. `stages` is the key loop's pipeline depth.
  auto tileBody = [&](ImplicitLocOpBuilder &tb, Value t0, Value kTile,
                      Value vTile, int64_t stages) {
    // Every element is visible where the tile ends at or before the
    // smallest visible end of its rows (row 0's: visibleEnd does not
    // decrease with the row) and no mask hides keys.
    Value allVisible;
    if (!variants.mask)
      allVisible = arith::CmpIOp::create(tb, arith::CmpIPredicate::sle,
                                         arith::AddIOp::create(tb, t0, cTile),
                                         minIdx(tb, end, visibleEnd(tb, c0)));
    auto step = AttentionStepOp::create(
        tb, t.qTile, kTile, vTile, t.acc, t.mBuf, t.lBuf,
        tb.getI64IntegerAttr(stages), /*query_groups=*/nullptr,
        t.overlap && stages > 1 ? tb.getUnitAttr() : UnitAttr(), allVisible);
    if (!t.queryGroups.empty())
      step.setQueryGroupsAttr(tb.getDenseI64ArrayAttr(t.queryGroups));
    Type idxType = tb.getIndexType();
    Block *body =
        tb.createBlock(&step.getBody(), {}, {idxType, idxType, tb.getF32Type()},
                       {tb.getLoc(), tb.getLoc(), tb.getLoc()});
    ImplicitLocOpBuilder eb =
        ImplicitLocOpBuilder::atBlockEnd(tb.getLoc(), body);
    Value row = body->getArgument(0), c = body->getArgument(1),
          sc = body->getArgument(2);
    Value visEnd = minIdx(eb, end, visibleEnd(eb, row));
    Value visible =
        arith::CmpIOp::create(eb, arith::CmpIPredicate::slt,
                              arith::AddIOp::create(eb, t0, c), visEnd);
    Value x;
    std::array<Value, 3> pos;
    if (variants.score || variants.mask)
      pos = variants.position(eb, row);
    Value key = arith::AddIOp::create(eb, t0, c);
    if (variants.score) {
      Value s = inlineVariant(
          eb, *variants.score,
          {arith::MulFOp::create(eb, sc, scale), pos[0], pos[1], pos[2], key});
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
  if (!variants.mask && t.stages > 1)
    return emitPipelinedKeyLoop(g, t, start, end, cTile, loadTiles, tileBody);
  if (!variants.mask) {
    forLoop(g, start, end, cTile, [&](ImplicitLocOpBuilder &lb, Value t0) {
      Value slot = indexConst(lb, 0);
      Value kTile = t.kTile(lb, slot), vTile = t.vTile(lb, slot);
      loadTiles(lb, t0, kTile, vTile);
      tileBody(lb, t0, kTile, vTile, /*stages=*/1);
    });
    return;
  }
  emitMaskedKeyLoop(g, t, start, end, cTile, variants, loadTiles, visibleEnd,
                    tileBody);
}

/// A sink logit joins each row's softmax denominator: with z the logit in
/// the log2 domain, m' = max(m, z), l' = l · 2^(m - m') + 2^(z - m'), and
/// the accumulator's correction 2^(m - m') (0 for a row that saw no key)
/// goes to `t.rowScratch` for the finish's scale.
void applySink(ImplicitLocOpBuilder &g, const AttentionTiles &t,
               const Variants &variants) {
  Value negInf = f32Const(g, kNegInf), zeroF = f32Const(g, 0.0);
  parallelFor(
      g, {indexConst(g, t.rows)}, [&](ImplicitLocOpBuilder &rb, ValueRange iv) {
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
}

void emitFinish(
    ImplicitLocOpBuilder &g, const AttentionTiles &t, bool sunk,
    function_ref<void(ImplicitLocOpBuilder &, Value, Value, Value)> output,
    function_ref<void(ImplicitLocOpBuilder &, Value, Value)> lse) {
  auto fin = AttentionFinishOp::create(g, t.acc, t.mBuf, t.lBuf,
                                       sunk ? t.rowScratch : Value(),
                                       g.getI64IntegerAttr(finishWidth(t.dv)));
  Type idx = g.getIndexType(), f32 = g.getF32Type();
  Location loc = g.getLoc();
  {
    OpBuilder::InsertionGuard guard(g);
    Block *body = g.createBlock(
        &fin.getOutput(), {},
        {idx, idx, VectorType::get({finishWidth(t.dv)}, f32)}, {loc, loc, loc});
    ImplicitLocOpBuilder eb = ImplicitLocOpBuilder::atBlockEnd(loc, body);
    output(eb, body->getArgument(0), body->getArgument(1),
           body->getArgument(2));
    YieldOp::create(eb, ValueRange{});
  }
  {
    OpBuilder::InsertionGuard guard(g);
    Block *body = g.createBlock(&fin.getLseBody(), {}, {idx, f32}, {loc, loc});
    ImplicitLocOpBuilder eb = ImplicitLocOpBuilder::atBlockEnd(loc, body);
    lse(eb, body->getArgument(0), body->getArgument(1));
    YieldOp::create(eb, ValueRange{});
  }
}

} // namespace mla::tiling
