//===- ConfigRequests.cpp - what a chosen config asks of its lowering ----===//
//
// mla-select-config's checks that a chosen #mla.config gets what it asks
// for on its target, each an error located at the op saying why where it
// does not (no silent fallback): the lagged P·V (overlap), lead scores,
// warpgroup MMA asked for, and the host's stack for a workgroup's tiles
// (ConfigOverrides.h).
//
//===----------------------------------------------------------------------===//
#include "AttentionLayout.h"
#include "ConfigOverrides.h"
#include "NVIDIA/NVIDIA.h"
#include "WorkgroupTiles.h"

using namespace mlir;

namespace mla {

/// A config with `overlap = 1` (each tile's P·V lagged by one step) where
/// its lowering exists: a prefill with a pipelined key loop, on the host
/// (whose steps run in order) or on warpgroup MMA's fused step with whole
/// scores; else an error located at `op` saying why (no silent fallback: a
/// step in sequence would read values still in flight).
LogicalResult checkOverlapRequest(Operation *op, ConfigAttr attr,
                                  const ArchInfo &arch) {
  if (!attr.getOverlap())
    return success();
  auto prefill = dyn_cast<PrefillOp>(op);
  if (!prefill)
    return op->emitError()
           << "config overlap = 1 applies to prefill only (a decode's "
              "values are its keys' first columns: there is no value tile "
              "to copy behind the keys)";
  const bool host = arch.kind == TargetKind::Host;
  if (!host && (!arch.hasWarpgroupMma() || !attr.getWgmma()))
    return op->emitError()
           << "config overlap = 1 needs the fused warpgroup-MMA step "
              "(sm_90a with wgmma = 1) or the host; target "
           << arch.name << (attr.getWgmma() ? "" : " with wgmma = 0")
           << " has no lowering that lags P·V";
  if (attr.getStages() < 2)
    return op->emitError() << "config overlap = 1 needs a pipelined key loop "
                              "(stages >= 2, no mask variant), got stages = "
                           << attr.getStages();
  if (host)
    return success();
  std::string why;
  FailureOr<nvidia::StepPlan> p = nvidia::planFusedStep(
      {prefill.getQ().getType().getElementType(), attr.getTileQ(),
       prefill.getQkDim(), attr.getTileKv(), prefill.getVDim(),
       attr.getWarps()},
      true, op->getLoc(), &why);
  if (succeeded(p) && p->wgmma && !p->transposed && !p->splitScores)
    return success();
  return op->emitError() << "config overlap = 1 needs the fused "
                            "warpgroup-MMA step with one warp per 16-row "
                            "block, which this config ("
                         << attr.getTileQ() << " rows, " << attr.getTileKv()
                         << "-key tiles, " << attr.getWarps()
                         << " warps) does not take"
                         << (why.empty() ? "" : ": " + why);
}

/// A config with `lead_scores` 1 to 4 where its lowering exists:
/// NVIDIA's fused warpgroup-MMA step with two warpgroups sharing their
/// query rows (split scores), whose first then computes all of them; 3
/// and 4 also need a two-stage key loop (the second warpgroup's P·V reads
/// the previous tile's slot while the next tile's copy waits for it); the
/// host, whose steps are decomposed, ignores the field. Elsewhere an error
/// located at `op` saying why (no silent fallback to the split scores).
LogicalResult checkLeadScoresRequest(Operation *op, ConfigAttr attr,
                                     const ArchInfo &arch) {
  if (!attr.getLeadScores() || arch.kind == TargetKind::Host)
    return success();
  FailureOr<WorkgroupTiles> t = workgroupTiles(op, attr, arch);
  if (succeeded(t) && t->leadScores) {
    if (attr.getLeadScores() >= 3 && attr.getStages() != 2)
      return op->emitError()
             << "config lead_scores = " << attr.getLeadScores()
             << " lags the second warpgroup's P·V one "
                "key tile behind the first's, which needs a two-stage key "
                "loop (stages = 2), not stages = "
             << attr.getStages();
    return success();
  }
  InFlightDiagnostic d =
      op->emitError()
      << "config lead_scores = " << attr.getLeadScores()
      << " needs NVIDIA's fused warpgroup-MMA step with two warpgroups sharing "
         "64 query rows (sm_90a with wgmma = 1, "
         "8 warps: decode's 64-row head groups), which this config (";
  if (succeeded(t))
    d << t->rows << " rows, ";
  d << attr.getTileKv() << "-key tiles, " << attr.getWarps()
    << " warps) on target " << arch.name << " does not take";
  return failure();
}

/// On the host, where a workgroup's tiles are stack arrays of the thread
/// running it, an error located at `op` when they exceed the host's budget
/// (ArchInfo::sharedBytes): such a kernel would compile and then overflow
/// the stack. The message names every size the tiles grow with.
LogicalResult checkHostStack(Operation *op, ConfigAttr attr,
                             const ArchInfo &arch) {
  if (arch.kind != TargetKind::Host)
    return success();
  FailureOr<WorkgroupTiles> tiles = workgroupTiles(op, attr, arch);
  if (failed(tiles) || tiles->bytes() <= arch.sharedBytes)
    return success();
  const WorkgroupTiles &t = *tiles;
  InFlightDiagnostic d = op->emitError()
                         << "the tiles of one host workgroup of this "
                         << op->getName().stripDialect() << " (" << t.rows
                         << " query rows";
  bool decode = isa<DecodeOp>(op);
  if (auto dec = dyn_cast<DecodeOp>(op))
    d << ": q_len " << dec.getQLen() << " x head_group " << attr.getHeadGroup();
  else
    d << ": tile_q " << attr.getTileQ();
  d << "; tile_kv " << t.keys << "; q.k dim " << t.dim << ", value dim " << t.dv
    << ") need " << t.bytes() << " bytes, more than the host's "
    << arch.sharedBytes
    << " (they live on the stack of the thread running the workgroup); "
       "fewer query rows ("
    << (decode ? "q_len, or head_group" : "tile_q")
    << " with --perf-config), a smaller tile_kv (--perf-config) or "
       "narrower heads would fit";
  return failure();
}

/// A config whose perf-config asks for warpgroup MMA (`wgmma=1`) gets it
/// or is an error located at `op` saying why the fused step of its shapes
/// cannot use it (no silent fallback to mma.sync).
LogicalResult checkWgmmaRequest(Operation *op, Type elem, int64_t rows,
                                int64_t dim, int64_t tileKv, int64_t dv,
                                int64_t warps) {
  std::string why;
  FailureOr<nvidia::StepPlan> p = nvidia::planFusedStep(
      {elem, rows, dim, tileKv, dv, warps}, true, op->getLoc(), &why);
  if (succeeded(p) && p->wgmma)
    return success();
  return op->emitError() << "perf-config: wgmma=1 asks for warpgroup MMA, "
                            "which the attention step of this config ("
                         << rows << " rows, " << tileKv << "-key tiles, "
                         << warps << " warps) cannot use: " << why;
}

} // namespace mla
