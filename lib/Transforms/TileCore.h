//===- TileCore.h - mla-tile's online-softmax core -------------*- C++ -*-===//
//
// Library-private: what the decode and prefill tilings (TileDecode.cpp,
// TilePrefill.cpp) share: the workgroup's tiles, the key loop of the online
// softmax with its mla.attention_step, the variant regions, the epilogue
// rows; and the grid helpers of every mla-tile rewrite.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_TILECORE_H
#define MLA_LIB_TRANSFORMS_TILECORE_H

#include "mla/Dialect/MLA/IR/MLA.h"
#include "mla/Target/Arch.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <array>
#include <functional>
#include <limits>

namespace mla::tiling {
using mlir::ArrayRef;
using mlir::ImplicitLocOpBuilder;
using mlir::LogicalResult;
using mlir::Region;
using mlir::SmallVector;
using mlir::Type;
using mlir::Value;

inline constexpr double kLog2e = 1.4426950408889634;
inline constexpr double kLn2 = 0.6931471805599453;
inline const double kNegInf = -std::numeric_limits<double>::infinity();

Value minIdx(ImplicitLocOpBuilder &b, Value x, Value y);
Value maxIdx(ImplicitLocOpBuilder &b, Value x, Value y);

/// Creates an `mla.grid` with the given sizes and returns a builder at the
/// start of its body together with the three workgroup coordinates.
std::pair<GridOp, SmallVector<Value, 3>>
createGrid(ImplicitLocOpBuilder &b, Value gx, Value gy, Value gz);

/// Size of dim `d` of `memref` as an index value (constant when static; for
/// a transposed view, the dim of its source).
Value dimValue(ImplicitLocOpBuilder &b, Value memref, int64_t d);

/// A parallel copy of `rows x width` elements into `tile`: row r < `limit`
/// reads `src` at `srcIndex(r, col)`, other rows get zeros.
void maskedRowCopy(
    ImplicitLocOpBuilder &b, Value tile, int64_t rows, int64_t width,
    Value limit, Value src,
    llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value, Value)>
        srcIndex);

/// The 2-D view `rows x dim` of `q` at `offsets` with unit `sizes` in the
/// dims dropped and the other dims but the last collapsed into one, which
/// must be contiguous (the query tile an attention step reads in place:
/// AttentionLayout's decodeQueriesInPlace / prefillQueriesInPlace).
Value queryView(ImplicitLocOpBuilder &b, Value q,
                ArrayRef<mlir::OpFoldResult> offsets, ArrayRef<int64_t> sizes,
                int64_t rows, int64_t dim);

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
  /// The step's `query_groups` ([G, stride]) where qTile is a view whose
  /// rows come in groups (decode MTP in place); empty: qTile's rows are
  /// the step's.
  SmallVector<int64_t, 2> queryGroups = {};
  /// With separate value tiles and `stages` > 1: the key loop copies the
  /// values one tile behind the keys and marks its steps `overlap` (the
  /// config's `overlap`), so that a lowering may lag each tile's P·V by one
  /// step.
  bool overlap = false;

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
                 int64_t cols) const;
};

AttentionTiles allocateTiles(ImplicitLocOpBuilder &g, int64_t rows,
                             int64_t tile, int64_t dim, int64_t dv, Type elem,
                             bool separateValues, int64_t stages);

/// Inlines a variant region at the builder with `args` for its block
/// arguments and returns the yielded value (exp, log, tanh as exp2/log2).
Value inlineVariant(ImplicitLocOpBuilder &b, Region &region,
                    ArrayRef<Value> args);

/// The variant regions of a decode or prefill, as hooks of the softmax
/// core. `position(b, row)` gives (request, head, query position) of a tile
/// row; key positions are absolute key indices of the request.
struct Variants {
  Region *score = nullptr, *mask = nullptr, *sink = nullptr;
  std::function<std::array<Value, 3>(ImplicitLocOpBuilder &, Value)> position;
};

/// The op's non-empty variant regions.
Variants variantsOf(Region &score, Region &mask, Region &sink);

/// acc = 0, m = -inf, l = 0.
void initSoftmaxState(ImplicitLocOpBuilder &g, const AttentionTiles &t);

/// The online softmax over the key tiles from `start` below `end`, one
/// mla.attention_step per tile (TileCore.cpp says more). `loadTiles(b, t0,
/// kTile, vTile)` copies tile t0's keys into `kTile` and its values into
/// `vTile`; either may be null (with `t.overlap` the two go in different
/// iterations), and then that side is not copied. `visibleEnd(b,
/// row)` must not decrease with the row: row 0's bounds every row's, which
/// sets the steps' `all_visible`.
void emitOnlineSoftmax(
    ImplicitLocOpBuilder &g, const AttentionTiles &t, Value start, Value end,
    Value scale, const Variants &variants,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value, Value)>
        loadTiles,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> visibleEnd);

/// A sink logit joins each row's softmax denominator: m and l are updated
/// and the accumulator's correction is left in `t.rowScratch`, the scale
/// of the mla.attention_finish that follows.
void applySink(ImplicitLocOpBuilder &g, const AttentionTiles &t,
               const Variants &variants);

/// The mla.attention_finish of the tiles' state after the key loop (with
/// the sink's correction as its scale when `sunk`): `output(b, row, col,
/// o)` stores a block of `finishWidth(t.dv)` (AttentionLayout.h)
/// normalised values, `lse(b, row, lse)` a row's natural-log LSE; each
/// builds its region's body.
void emitFinish(
    ImplicitLocOpBuilder &g, const AttentionTiles &t, bool sunk,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value, Value)>
        output,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> lse);

/// The mla-tile rewrites of each semantic op (TileDecode.cpp,
/// TilePrefill.cpp, TileMerge.cpp, TileChunkPlan.cpp).
LogicalResult tileDecode(DecodeOp op, const ArchInfo *arch);
LogicalResult tilePrefill(PrefillOp op, const ArchInfo *arch);
LogicalResult tileMerge(MergeOp op);
LogicalResult tileChunkPlan(ChunkPlanOp op);
LogicalResult tileChunkMerge(ChunkMergeOp op, const ArchInfo *arch);

/// The merge of request `req`'s chunk parts [lo, hi) (`oParts` [slots,
/// q_len, heads, dv] f32, `lseParts` [slots, q_len, heads]) into its rows
/// of `o` and `lse`, for every query and head, by the current workgroup
/// (TileMerge.cpp; the fused merge of TileDecode.cpp).
void emitRequestMerge(ImplicitLocOpBuilder &b, Value oParts, Value lseParts,
                      Value o, Value lse, Value req, Value lo, Value hi,
                      const ArchInfo *arch);

} // namespace mla::tiling

#endif // MLA_LIB_TRANSFORMS_TILECORE_H
