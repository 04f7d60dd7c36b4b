//===- Tile.cpp - mla-tile: split-KV tiling with online softmax -----------===//
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
#include "TileAppendKV.h"
#include "TileCore.h"
#include "Utils.h"
#include "mla/Transforms/Passes.h"

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

using namespace mla::tiling;

namespace {
struct TilePass : public mla::impl::MLATileBase<TilePass> {
  void runOnOperation() override {
    // The target, where the IR names one (AttentionLayout's in-place
    // queries ask it).
    const ArchInfo *arch = nullptr;
    if (getOperation()->hasAttr(MLADialect::kTargetAttrName)) {
      FailureOr<const ArchInfo *> target =
          moduleTarget(getOperation(), "mla-tile");
      if (failed(target))
        return signalPassFailure();
      arch = *target;
    }
    SmallVector<PrefillOp> prefills;
    getOperation().walk([&](PrefillOp op) { prefills.push_back(op); });
    for (PrefillOp op : prefills)
      if (failed(tilePrefill(op, arch)))
        return signalPassFailure();
    // Decode before merge: it creates the merges that are tiled next.
    SmallVector<DecodeOp> decodes;
    getOperation().walk([&](DecodeOp op) { decodes.push_back(op); });
    for (DecodeOp op : decodes)
      if (failed(tileDecode(op, arch)))
        return signalPassFailure();
    SmallVector<MergeOp> merges;
    getOperation().walk([&](MergeOp op) { merges.push_back(op); });
    for (MergeOp op : merges)
      if (failed(tileMerge(op)))
        return signalPassFailure();
    // The plan and merge of length-aware decodes.
    SmallVector<ChunkPlanOp> plans;
    getOperation().walk([&](ChunkPlanOp op) { plans.push_back(op); });
    for (ChunkPlanOp op : plans)
      if (failed(tileChunkPlan(op)))
        return signalPassFailure();
    SmallVector<ChunkMergeOp> chunkMerges;
    getOperation().walk([&](ChunkMergeOp op) { chunkMerges.push_back(op); });
    for (ChunkMergeOp op : chunkMerges)
      if (failed(tileChunkMerge(op, arch)))
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
