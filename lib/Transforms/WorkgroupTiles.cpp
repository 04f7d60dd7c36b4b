//===- WorkgroupTiles.cpp - the tiles of a configured attention op --------===//
#include "WorkgroupTiles.h"
#include "NVIDIA/NVIDIA.h"

using namespace mlir;
using namespace mla;

int64_t mla::keyPageSlots(int64_t stages, int64_t pagesPerTile,
                          const ArchInfo &arch) {
  return stages * (arch.stagesPagesAhead(stages, pagesPerTile) ? 2 : 1);
}

int64_t mla::pagesPerKeyTile(MemRefType kvType, int64_t tileRows) {
  if (kvType.isDynamicDim(1))
    return 0;
  return llvm::divideCeil(tileRows, kvType.getDimSize(1));
}

WorkgroupTiles mla::registerStepTiles(const RegisterStepPlan &plan,
                                      bool queryTile, int64_t pageSlots) {
  const StepShape &s = plan.shape;
  WorkgroupTiles t;
  t.lowering = StepLowering::Register;
  t.rows = s.rows;
  t.keys = s.tile;
  t.dim = s.dim;
  t.dv = s.dv;
  t.elemBytes = s.elem.getIntOrFloatBitWidth() / 8;
  t.separateValues = s.separateValues;
  t.queryTile = queryTile;
  t.accTile = !plan.finishInRegisters;
  t.extraBytes = plan.combineBytes() + plan.exchangeBytes();
  t.pageSlots = pageSlots;
  return t;
}

namespace {

/// The shapes of `op`'s attention step under `config`, and what they imply
/// for its tiles whatever the lowering.
struct StepOf {
  StepShape shape;
  WorkgroupTiles tiles;
  bool masked = false;
  /// Whether the register step would read the queries in place.
  bool queriesInPlace = false;
};

FailureOr<StepOf> stepOf(Operation *op, ConfigAttr config,
                         const ArchInfo &arch) {
  StepOf s;
  WorkgroupTiles &t = s.tiles;
  Type elem;
  if (auto decode = dyn_cast<DecodeOp>(op)) {
    elem = decode.getQ().getType().getElementType();
    t.rows = config.getHeadGroup() * decode.getQLen();
    t.dim = decode.getHeadDim();
    t.dv = decode.getLatentDim();
    s.masked = !decode.getMask().empty();
    s.queriesInPlace = decodeQueriesInPlace(&arch, decode.getQLen());
  } else if (auto prefill = dyn_cast<PrefillOp>(op)) {
    elem = prefill.getQ().getType().getElementType();
    t.rows = config.getTileQ();
    t.dim = prefill.getQkDim();
    t.dv = prefill.getVDim();
    t.separateValues = true;
    s.masked = !prefill.getMask().empty();
    s.queriesInPlace = prefillQueriesInPlace(&arch, s.masked);
  } else {
    return failure();
  }
  t.tileSkip = s.masked;
  t.keys = config.getTileKv();
  t.stages = config.getStages();
  t.warps = config.getWarps();
  if (auto decode = dyn_cast<DecodeOp>(op))
    t.pageSlots = keyPageSlots(
        t.stages, pagesPerKeyTile(decode.getKv().getType(), t.keys), arch);
  t.elemBytes = elem.getIntOrFloatBitWidth() / 8;
  s.shape = {
      elem, t.rows, t.dim, t.keys, t.dv, config.getWarps(), t.separateValues};
  s.shape.leadScores = config.getLeadScores() != 0;
  return s;
}

} // namespace

FailureOr<WorkgroupTiles> mla::workgroupTiles(Operation *op, ConfigAttr config,
                                              const ArchInfo &arch) {
  FailureOr<StepOf> s = stepOf(op, config, arch);
  if (failed(s))
    return failure();
  WorkgroupTiles t = s->tiles;
  // mla-distribute's order (GPU/Distribute.cpp): NVIDIA's fused step, the
  // register step, the phases (both steps carry their state through a
  // mask's tile skip).
  if (arch.hasRegisterFusedStep()) {
    FailureOr<nvidia::StepPlan> plan = nvidia::planFusedStep(
        s->shape, arch.hasWarpgroupMma() && config.getWgmma() != 0,
        op->getLoc());
    if (succeeded(plan)) {
      t.lowering = plan->transposed ? StepLowering::WgmmaTransposed
                   : plan->wgmma    ? StepLowering::Wgmma
                                    : StepLowering::MmaSync;
      t.splitScores = plan->splitScores;
      t.leadScores = plan->leadScores;
      return t;
    }
  }
  if (arch.kind == TargetKind::AMD) {
    FailureOr<RegisterStepPlan> plan = planRegisterStep(
        s->shape, arch.matrixInstrs, arch.warpSize, arch.sharedBytes);
    if (succeeded(plan)) {
      WorkgroupTiles r =
          registerStepTiles(*plan, !s->queriesInPlace, t.pageSlots);
      r.stages = t.stages;
      r.tileSkip = t.tileSkip;
      return r;
    }
  }
  t.lowering = StepLowering::Phases;
  return t;
}
