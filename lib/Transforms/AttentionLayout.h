//===- AttentionLayout.h - the tiles of one attention workgroup -*- C++ -*-===//
//
// Library-private: how mla-tile lays out the fast-memory tiles of an
// attention workgroup (row padding) and where the scratch tiles of one
// mla.attention_step go when a lowering needs them. Every pass that
// allocates such a tile or counts its bytes asks here.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_ATTENTIONLAYOUT_H
#define MLA_LIB_TRANSFORMS_ATTENTIONLAYOUT_H

#include "mla/Dialect/MLA/IR/MLA.h"
#include "mla/Target/Arch.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mla {

/// Bytes of padding per row of a matrix tile: natural row strides are
/// multiples of 128 bytes, which would put the same column of consecutive
/// rows in one shared-memory bank.
constexpr int64_t kTileRowPadBytes = 16;

/// A `rows x cols` tile whose rows are padded by kTileRowPadBytes: a
/// memref.alloca of `rows x (cols + pad)` and its `rows x cols` subview.
mlir::Value paddedTile(mlir::ImplicitLocOpBuilder &b, int64_t rows,
                       int64_t cols, mlir::Type elem);

/// Bytes of a padded tile (paddedTile), rounded up to the 16-byte placement
/// granule of workgroup memory.
int64_t paddedTileBytes(int64_t rows, int64_t cols, int64_t elemBytes);

/// Bytes of an unpadded buffer of `bytes`, rounded up to the 16-byte
/// placement granule.
int64_t alignedBytes(int64_t bytes);

/// The fewest rows of a query or key tile that mla-select-config picks (one
/// mma.sync M tile; tiles are halved down to it).
constexpr int64_t kMinTileRows = 16;

/// A lower bound on the fast-memory bytes of any lowering of an attention
/// step over `queryRows` queries and `keyRows` keys of `dim` elements of
/// `elemBytes`: its query tile and one key tile, unpadded (every lowering
/// keeps both in shared memory / LDS). Saturates at INT64_MAX instead of
/// overflowing.
int64_t stepOperandBytes(int64_t queryRows, int64_t keyRows, int64_t dim,
                         int64_t elemBytes);

/// How mla-distribute lowers a workgroup's attention step, as far as its
/// tiles in shared memory / LDS go.
enum class StepLowering {
  /// Decomposed (Q·Kᵀ, mla.online_softmax in parallel phases, P·V): score
  /// and probability tiles, the softmax's chunk partials; the host's only
  /// lowering.
  Phases,
  /// NVIDIA's fused step on mma.sync (NVIDIA/FusedStep.cpp).
  MmaSync,
  /// NVIDIA's fused step on warpgroup MMA: operands in the swizzled layout.
  Wgmma,
  /// NVIDIA's transposed step (keys as warpgroup MMA's M): operands in the
  /// swizzled layout, a swizzled probability tile, the warps' exchange.
  WgmmaTransposed,
  /// The register step (GPU/RegisterStep.cpp; AMD).
  Register,
};

/// The tile model of one attention workgroup: the tiles mla-tile allocates
/// (allocateTiles: the query tile, `stages` key tiles and, when
/// `separateValues`, value tiles, the f32 accumulator, the row state),
/// the page numbers of `pageSlots` key tiles (mla-expand-paging) and the
/// scratch of the step's lowering. Every count of a workgroup's bytes asks
/// bytes(); mla-outline-gpu-kernels then places the real buffers, reusing
/// the memory of tiles separated by a barrier, in at most bytes()
/// (test/Kernels/WorkgroupTilesTest.cpp checks the shipped configurations).
struct WorkgroupTiles {
  StepLowering lowering = StepLowering::Phases;
  int64_t rows = 0, keys = 0, dim = 0, dv = 0, elemBytes = 2, stages = 1;
  /// The workgroup's warps (WgmmaTransposed: a probability tile for each
  /// warpgroup of 4).
  int64_t warps = 4;
  bool separateValues = false;
  /// Key tiles whose page numbers the workgroup keeps (0: unpaged keys):
  /// one per stage, two per stage where the chip stages the next tile's
  /// (ArchInfo::stagesPagesAhead).
  int64_t pageSlots = 0;
  /// False where the step reads its queries in place (no query tile).
  bool queryTile = true;
  /// MmaSync/Wgmma: two warps per row block split the keys (a probability
  /// tile and the halves' row maxima).
  bool splitScores = false;
  /// Wgmma with split scores: the first warpgroup computes them all
  /// (#mla.config lead_scores; the same tiles).
  bool leadScores = false;
  /// Register: false where mla.attention_finish is lowered from the
  /// registers (one key wave: no accumulator tile).
  bool accTile = true;
  /// Register: the key waves' combine buffer and the value waves' score
  /// exchange (RegisterStepPlan).
  int64_t extraBytes = 0;
  /// A mask's key loop: the flag of its per-tile visibility test (mla-tile
  /// skips the key tiles no row sees).
  bool tileSkip = false;

  /// An upper bound on the bytes of these tiles once placed: with one stage
  /// (Register) or on the fused steps the accumulator, written after the
  /// key loop, reuses the operand tiles' memory.
  int64_t bytes() const;
};

/// Whether a decode's attention step reads its queries in place: with one
/// query position (`qLen` 1) a head group's rows are the 2-D strided view
/// q[b, 0, heads of the group, :], which mla-tile hands to the step
/// instead of a staged tile; with several (MTP) where the chip reads
/// queries in place (ArchInfo::readsQueriesInPlace), the view of q[b]
/// collapsed to Sq·H x D rows: all of them where the group holds every
/// head, else from the group's first head on, with the step's
/// `query_groups = [group, H]` (row i * group + h is view row i * H + h).
/// Lowerings that need the queries in fast memory copy them into a tile
/// themselves (stageStepQueries); AMD's register step reads them into
/// registers from global memory, so that no query tile takes LDS
/// (`queryTile` false in WorkgroupTiles). `arch` null (IR without a
/// target): Sq = 1 only.
bool decodeQueriesInPlace(const ArchInfo *arch, int64_t qLen);

/// Whether a prefill's attention step reads its query tile in place: the
/// 2-D strided view q[first row .. + tile_q, head, :] (rows past the
/// request's last included), where the chip's register step takes it
/// (ArchInfo::readsQueriesInPlace) and the op has no mask variant; then no
/// query tile takes LDS. A masked step runs in registers too (inside its
/// tile skip), but its per-tile visibility scan grows with the rows: on
/// gfx942 128 x 32 tiles in place took 21.8 instructions per key and 16
/// rows for the workgroup against 17.5 for 64 x 64 with a staged query tile
/// (mla-compile --report, sliding_window.mlir, 2026-12-03), so masked
/// prefill stays staged. `arch` null (IR without a target): false.
bool prefillQueriesInPlace(const ArchInfo *arch, bool masked);

/// Gives `op` a query tile in fast memory when its queries are not one: a
/// padded tile at the top of the grid, filled by a parallel copy right
/// after the view is made (where mla-tile's staging would be), in the
/// step's row order (its `query_groups`, then dropped).
/// Returns the copy (null when the queries are a tile already).
mlir::scf::ParallelOp stageStepQueries(AttentionStepOp op);

/// The row of `op`'s Q that step row `row` reads: `row`, or with
/// `query_groups = [G, stride]` (row / G) * stride + row % G.
mlir::Value stepQueryRow(mlir::ImplicitLocOpBuilder &b, AttentionStepOp op,
                         mlir::Value row);

/// The value columns of one block of mla.attention_finish (`width`): 4,
/// the run of consecutive value columns a lane of the register step holds
/// in each output accumulator (or fewer where `dv` needs).
int64_t finishWidth(int64_t dv);

/// Alignment of a tile in the 128-byte swizzled layout of warpgroup MMA
/// (the swizzle repeats every 8 rows of 128 bytes; NVIDIA/Wgmma.h).
constexpr int64_t kSwizzledTileAlign = 1024;

/// Bytes of a tile in the swizzled layout (unpadded, 1024-byte aligned).
int64_t swizzledTileBytes(int64_t bytes);

/// The scratch tiles of one mla.attention_step that its lowering asked for
/// (null where not): the f32 scores S, the probabilities P (the queries'
/// element type), both padded `rows x keys`, and the per-row correction.
struct StepScratch {
  mlir::Value scores, probs, corr;
};

/// Allocates the requested scratch tiles of `op` beside its state: scores
/// and probabilities in front of the accumulator's buffer, the correction
/// after the running sum's (at the top of the enclosing mla.grid or
/// function when the state is not a grid tile).
StepScratch allocateStepScratch(AttentionStepOp op, bool scores, bool probs,
                                bool corr);

/// The step's element function at (row, column, raw score): {x, visible}.
/// `all_visible`, where the step has one, is folded in (`all_visible or
/// vis`); with `assumeVisible` (a lowering that branched on `all_visible`
/// and is in its true branch) visible is the constant true and the
/// region's visibility is not evaluated.
llvm::SmallVector<mlir::Value> inlineStepElement(mlir::ImplicitLocOpBuilder &b,
                                                 AttentionStepOp op,
                                                 mlir::ValueRange args,
                                                 bool assumeVisible = false);

/// 2^(x - ref): a step's probability of the logit x against the row's
/// reference maximum. Not contracted with the element function's scale
/// multiply into one fma: on sm_90a that made the causal prefill 2 %
/// slower (docs/Performance.md, 2026-12-06).
mlir::Value stepExp2(mlir::ImplicitLocOpBuilder &b, mlir::Value x,
                     mlir::Value ref);

/// Folds `all_visible` into the step's region (it yields `all_visible or
/// vis`) and drops the operand: for lowerings that move the region
/// elsewhere (the decomposition into `mla.online_softmax`).
void foldAllVisible(AttentionStepOp op);

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_ATTENTIONLAYOUT_H
