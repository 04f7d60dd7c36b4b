//===- SelectConfig.cpp - mla-select-config -------------------------------===//
//
// Attaches a typed #mla.config to every semantic op that has none, from
// per-target heuristics, then applies `perf-config` overrides.
//
//===----------------------------------------------------------------------===//
#include "AttentionLayout.h"
#include "ConfigOverrides.h"
#include "GPU/RegisterStep.h"
#include "NVIDIA/NVIDIA.h"
#include "WorkgroupTiles.h"
#include "mla/Target/Arch.h"
#include "mla/Transforms/Passes.h"
#include "mla/runtime/Manifest.h"

#include "llvm/Support/Debug.h"

#include <limits>

#define DEBUG_TYPE "mla-select-config"

namespace mla {
#define GEN_PASS_DEF_MLASELECTCONFIG
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {

/// Chunks the host's length-aware decode schedule aims at (its workgroups
/// run on a pool of threads, a few per core).
constexpr int64_t kHostDecodeChunks = 32;

int64_t workgroupBytes(Operation *op, const ConfigFields &cfg,
                       const ArchInfo &arch);

/// Decode's length-aware schedule (#mla.config kv_chunks): the batch's key
/// tiles cut into about as many equal shares as workgroups fill the chip,
/// on the device from the lengths (mla.chunk_plan), in place of kv_splits
/// fixed splits per request (docs/Performance.md, "Length-aware split-KV").
/// Where one of `op`'s workgroups under `cfg` takes more than half of the
/// shared memory (one per SM / CU), as many as there are SMs / CUs: one
/// wave, not two (the H=128 decode and H=16 at Sq 2 on an H100, measured
/// with lead_scores = 1: B=64 L=4096 -8.3 %, the ragged batch -6.2 %, H=16
/// Sq 2 -2.4 %, B=128 L=8192 within its spread; docs/Performance.md,
/// seventeenth session).
ConfigFields lengthAwareSchedule(Operation *op, ConfigFields cfg,
                                 const ArchInfo &arch) {
  cfg.kvSplits = 1;
  cfg.minWorkgroups = 0;
  cfg.kvChunks =
      arch.minWorkgroups > 0 ? arch.minWorkgroups : kHostDecodeChunks;
  if (arch.computeUnits > 0 && cfg.kvChunks > arch.computeUnits &&
      workgroupBytes(op, cfg, arch) > arch.sharedBytes / 2) {
    LLVM_DEBUG(llvm::dbgs()
               << "mla-select-config: kv_chunks = " << arch.computeUnits
               << " (one workgroup per SM / CU) at " << op->getLoc() << "\n");
    cfg.kvChunks = arch.computeUnits;
  }
  return cfg;
}

/// The merge's part groups (#mla.config merge_groups) on GPUs where one
/// workgroup takes every head (H <= head_group: one head group, so the
/// chunk plan cuts a small batch's requests into the most chunks). Measured
/// on an H100 (docs/Performance.md, "Plan reuse and merge part groups"):
/// H=16, B=1, L=8192 42.3 -> 33.7 us, the production batch and uniform
/// batches unchanged within their spread (a request of at most 8 chunks
/// then, 16 now, takes the one-group path); H=128 (8 head groups) not
/// shown to gain, so it keeps 1.
constexpr int64_t kOneHeadGroupMergeGroups = 4;

/// The adaptive plan (#mla.config chunk_windows = 2) on GPUs: request-aligned
/// chunks where they fit one wave, windows where they do not, the least
/// chunk bounded by the merge. Measured on an H100 (docs/Performance.md,
/// "Adaptive plan"), with the plan reused: ragged batches 1.8 % (H=16) and
/// 5.9 % (H=128) faster, B=1 and B=8 3-4 %, H=128 Sq=2 8-10 %, no other row
/// slower by more than 0.3 us; with the plan computed in each launch one row
/// (H=128 B=64 L=4096) 2.2 % slower, not explained further (the adaptive
/// plan kernel takes 7.3 us, the refinement's 6.8-7.2). The host (2 cores:
/// both schedules within 1.5 %) keeps 0.
constexpr int64_t kGpuChunkWindows = 2;

/// Largest divisor of `n` that is <= `cap`.
int64_t largestDivisorAtMost(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, cap); d > 1; --d)
    if (n % d == 0)
      return d;
  return 1;
}

/// Host heuristics: one workgroup per thread; a workgroup handles up to 64
/// query rows (Sq x head_group) so the S tile and accumulator stay in L1/L2;
/// 4 KV splits give the thread pool enough workgroups at small batch.
ConfigFields hostDecodeConfig(DecodeOp op) {
  int64_t rowsCap = std::max<int64_t>(1, 64 / op.getQLen());
  return {/*tileKv=*/64, /*kvSplits=*/4,
          /*headGroup=*/largestDivisorAtMost(op.getNumHeads(), rowsCap),
          /*warps=*/1, /*stages=*/1};
}

/// The bytes of `op`'s workgroup under `cfg` on `arch`: the tile model of
/// the lowering mla-distribute will choose (WorkgroupTiles.h).
int64_t workgroupBytes(Operation *op, const ConfigFields &cfg,
                       const ArchInfo &arch) {
  FailureOr<WorkgroupTiles> tiles =
      workgroupTiles(op, configAttrOf(op->getContext(), cfg), arch);
  return succeeded(tiles) ? tiles->bytes()
                          : std::numeric_limits<int64_t>::max();
}

/// The NVIDIA fused strategy for a step of `rows` x `tileKv` on `warps`
/// warps of `op`'s shapes (nvidia::planFusedStep), or failure. A masked
/// key loop's step sits in its tile skip, which the fused step carries its
/// state through (checkStepLoop).
FailureOr<nvidia::StepPlan> fusedPlan(Operation *op, Type elem, int64_t rows,
                                      int64_t dim, int64_t tileKv, int64_t dv,
                                      int64_t warps, bool wgmma) {
  return nvidia::planFusedStep({elem, rows, dim, tileKv, dv, warps}, wgmma,
                               op->getLoc());
}

/// The register step (GPU/RegisterStep.h) of `shape`, when the chip's
/// matrix instructions take it and the workgroup's tiles fit its shared
/// memory / LDS; else failure, with the reason in `whyNot` when given.
FailureOr<RegisterStepPlan> registerPlan(const ArchInfo &arch, StepShape shape,
                                         bool values, bool queryTile,
                                         int64_t *bytes,
                                         std::string *whyNot = nullptr) {
  shape.separateValues = values;
  FailureOr<RegisterStepPlan> p = planRegisterStep(
      shape, arch.matrixInstrs, arch.warpSize, arch.sharedBytes, whyNot);
  if (failed(p))
    return failure();
  // Decode's keys are paged (its V is the first columns of K); the page
  // size is not asked here, so the slots are counted as for a run-time one
  // (an upper bound).
  *bytes = registerStepTiles(*p, queryTile,
                             values ? 0
                                    : keyPageSlots(/*stages=*/1,
                                                   /*pagesPerTile=*/0, arch))
               .bytes();
  if (*bytes > arch.sharedBytes) {
    if (whyNot)
      *whyNot = "its tiles need " + std::to_string(*bytes) +
                " bytes of LDS, more than the chip's " +
                std::to_string(arch.sharedBytes);
    return failure();
  }
  return p;
}

/// A decode config given by the user (perf-config or the IR) that the AMD
/// register step cannot run falls back to the attention step through LDS,
/// whose tiles are larger: a warning says why, so that a later "needs N
/// bytes of shared memory" names its cause (e.g. `warps=3`).
void warnIfNoRegisterStep(DecodeOp op, ConfigAttr attr, const ArchInfo &arch) {
  if (arch.kind != TargetKind::AMD)
    return;
  StepShape shape{op.getQ().getType().getElementType(),
                  attr.getHeadGroup() * op.getQLen(),
                  op.getHeadDim(),
                  attr.getTileKv(),
                  op.getLatentDim(),
                  attr.getWarps()};
  std::string why;
  int64_t bytes;
  if (succeeded(registerPlan(arch, shape, /*values=*/false,
                             !decodeQueriesInPlace(&arch, op.getQLen()), &bytes,
                             &why)))
    return;
  op.emitWarning() << "config " << attr
                   << ": the register attention step cannot run it (" << why
                   << "); the step through LDS is used instead (more LDS, "
                      "slower)";
}

/// Decode on the register step (AMD): all H x Sq query rows of a request in
/// one workgroup where the tiles fit (up to 64 rows, so that the KV range
/// is read ceil(H·Sq / rows) times), then the largest key tile, then the
/// waves whose plan keeps the busiest SIMD least busy
/// (RegisterStepPlan::simdCost; more waves first on a tie). The tiles are
/// the register step's (registerStepTiles): no query tile where the
/// queries are read in place (decodeQueriesInPlace), no accumulator tile
/// where the plan's finish is in registers (one key wave). On gfx942 (64
/// KiB LDS) H=16 takes 32-key tiles on four waves (two key x two value
/// waves, one per SIMD), H=128 64 rows on four (Sq=2 too: its queries in
/// place in groups); gfx950 (160 KiB) 64-key tiles.
std::optional<ConfigFields> registerStepDecodeConfig(DecodeOp op,
                                                     const ArchInfo &arch) {
  Type elem = op.getQ().getType().getElementType();
  const int64_t sq = op.getQLen();
  for (int64_t group = op.getNumHeads(); group >= 1; --group) {
    if (op.getNumHeads() % group != 0 || group * sq > 64)
      continue;
    for (int64_t tileKv : {64, 32, 16}) {
      FailureOr<RegisterStepPlan> best = failure();
      for (int64_t waves : {8, 4, 2, 1}) {
        int64_t bytes;
        FailureOr<RegisterStepPlan> p = registerPlan(
            arch,
            {elem, group * sq, op.getHeadDim(), tileKv, op.getLatentDim(),
             waves},
            /*values=*/false, !decodeQueriesInPlace(&arch, sq), &bytes);
        if (succeeded(p) && (failed(best) || p->simdCost() < best->simdCost()))
          best = p;
      }
      if (succeeded(best))
        return ConfigFields{tileKv,       /*kvSplits=*/8,
                            group,        best->waves(),
                            /*stages=*/1, arch.minWorkgroups};
    }
  }
  return std::nullopt;
}

/// GPU heuristics. NVIDIA, 16-bit floats: up to 64 query rows (Sq x
/// head_group) per workgroup, two warps per 16-row block (each owns half
/// of the value columns: mla-distribute's register-fused step), 32-key
/// tiles, two pipeline stages. Measured on the H200 (docs/Performance.md):
/// H=16 398 µs against 430 µs for the shared-memory phases (4 warps, one
/// stage), H=128 156 TFLOP/s against 92. Otherwise (AMD, f32, masks):
/// 4 warps/waves, up to 16 (NVIDIA) or 32 (AMD) query rows, 32 (NVIDIA) or
/// 64 (AMD) key tiles, one stage. Tiles are halved (then the head group
/// shrunk) until they fit the chip's shared memory or LDS; up to 8 KV
/// splits, balanced at run time against the batch size so that every
/// launch has about `minWorkgroups` workgroups (the arch table).
ConfigFields gpuDecodeConfig(DecodeOp op, const ArchInfo &arch, bool wgmmaOk) {
  if (arch.hasRegisterFusedStep()) {
    int64_t group = largestDivisorAtMost(
        op.getNumHeads(), std::max<int64_t>(1, 64 / op.getQLen()));
    int64_t rows = group * op.getQLen();
    Type elem = op.getQ().getType().getElementType();
    auto plan = [&](int64_t tileKv, bool wgmma) {
      return fusedPlan(op, elem, rows, op.getHeadDim(), tileKv,
                       op.getLatentDim(), 2 * rows / 16, wgmma);
    };
    // sm_90a, at most 16 rows (decode's head group at Sq = 1): the
    // transposed step (keys as warpgroup MMA's M), one warpgroup, 64-key
    // tiles, one stage: two workgroups per SM. On an H100 beside the
    // mma.sync step below and FlashMLA (docs/Performance.md, "The
    // transposed step"): H=16 B=128 L=8192 4 % faster, page 1 6 %, the
    // ragged batch 8 %, B=1 7-9 %, B=8 and the production batch within
    // 1-2 %; two stages (one workgroup per SM) were slower on the large
    // batches. 8 rows ran the CUDA tests but were not timed. 17-32 rows
    // (Sq = 2 at 16 heads): two warpgroups, each with half of the value
    // columns (one warpgroup's 32 rows measured slower than mma.sync),
    // two stages: one workgroup per SM.
    if (wgmmaOk && rows <= 32) {
      ConfigFields cfg{/*tileKv=*/64,
                       /*kvSplits=*/8,
                       group,
                       /*warps=*/rows <= 16 ? 4 : 8,
                       /*stages=*/rows <= 16 ? 1 : 2,
                       arch.minWorkgroups};
      FailureOr<nvidia::StepPlan> one =
          fusedPlan(op, elem, rows, op.getHeadDim(), 64, op.getLatentDim(),
                    cfg.warps, true);
      if (succeeded(one) && one->transposed &&
          workgroupBytes(op, cfg, arch) <= arch.sharedBytes)
        return cfg;
    }
    // Warpgroup MMA (sm_90a) where the fused step takes it (whole
    // warpgroups of 64 rows, value halves of 64-column blocks): 64-key
    // tiles, two stages. H=128 on the H200: 313 TFLOP/s against 233 with
    // 32-key tiles and 180 for mma.sync (docs/Performance.md).
    FailureOr<nvidia::StepPlan> wg = plan(64, wgmmaOk);
    // The first warpgroup computes each tile's scores for both
    // (lead_scores; m64n64k16 in place of two m64n32k16): on an H100 beside
    // the split scores and FlashMLA (docs/Performance.md, "Lead scores"),
    // H=128 B=128 L=8192 756.8 -> 695.0 us, Sq = 2 1508.6 -> 1366.4, the
    // ragged batch 809.5 -> 739.2, B=64 L=4096 231.0 -> 213.2. With the
    // next key tile's copy handed to the second warpgroup (lead_scores =
    // 2, two stages; "The next key tile's copy issued by the second
    // warpgroup"): 673.6 -> 594.4 us, Sq = 2 1323.3 -> 1143.4, the ragged
    // batch 723.9 -> 630.0, B=64 L=4096 208.1 -> 188.6.
    if (wgmmaOk && succeeded(wg) && wg->wgmma && wg->splitScores) {
      ConfigFields cfg{/*tileKv=*/64,
                       /*kvSplits=*/8,
                       group,
                       /*warps=*/2 * rows / 16,
                       /*stages=*/2,
                       arch.minWorkgroups};
      cfg.leadScores = 2;
      if (workgroupBytes(op, cfg, arch) <= arch.sharedBytes)
        return cfg;
    }
    FailureOr<nvidia::StepPlan> sync = plan(32, false);
    if (succeeded(sync) && sync->splitScores) {
      ConfigFields cfg{/*tileKv=*/32,
                       /*kvSplits=*/8,
                       group,
                       /*warps=*/2 * rows / 16,
                       /*stages=*/2,
                       arch.minWorkgroups};
      if (workgroupBytes(op, cfg, arch) <= arch.sharedBytes)
        return cfg;
    }
  }
  if (std::optional<ConfigFields> reg = registerStepDecodeConfig(op, arch))
    return *reg;
  // NVIDIA: 16 query rows (one mma.sync M tile) measured faster than 32 at
  // 128 heads on the H200 without fusion; AMD: up to 32.
  int64_t rowsCap = std::max<int64_t>(
      1, (arch.kind == TargetKind::NVIDIA ? 16 : 32) / op.getQLen());
  ConfigFields cfg{arch.kind == TargetKind::NVIDIA ? 32 : 64,
                   8,
                   largestDivisorAtMost(op.getNumHeads(), rowsCap),
                   4,
                   1,
                   arch.minWorkgroups};
  while (workgroupBytes(op, cfg, arch) > arch.sharedBytes) {
    if (cfg.tileKv > 16)
      cfg.tileKv /= 2;
    else if (cfg.headGroup > 1)
      cfg.headGroup = largestDivisorAtMost(op.getNumHeads(), cfg.headGroup - 1);
    else
      break;
  }
  return cfg;
}

/// Prefill: one head per workgroup, no split (queries tiles x heads give
/// the parallelism). Host: 32 x 64 tiles (they stay in L1/L2). sm_90a,
/// 16-bit floats, head dims multiples of 64: warpgroup MMA with 128 x 128
/// tiles, 8 warps (two warpgroups of 64 query rows, ping-pong), two
/// stages (208 KB for 192/128: one workgroup per SM), or 128 x 64 when
/// that does not fit. On the H200 (H=16, T=16384, causal bf16) 128 x 128
/// with two stages measured 359 TFLOP/s against 332 for 128 x 64, 324 for
/// 128 x 64 with three stages, 298 for 64 x 64 with two and 222 for the
/// mma.sync step (docs/Performance.md). Other NVIDIA chips,
/// 16-bit floats: 64 x 64 tiles, 4 warps of 16 query rows each, one stage
/// (mla-distribute fuses the step into registers; the accumulator reuses
/// the query/key bytes: 68 KB, three workgroups per SM). On the H200 (H=16,
/// T=4096, causal bf16) 64 x 64 measured 171 TFLOP/s against 139-160 for
/// 64 x 32, 128 x 64 and 128 x 32 (8 warps), 64 x 128 and two stages
/// (docs/Performance.md). Otherwise: 32 x 32 tiles with 4 warps/waves,
/// halved until they fit the chip.
ConfigFields prefillConfig(PrefillOp op, const ArchInfo &arch, bool wgmmaOk) {
  if (arch.kind == TargetKind::Host)
    return {/*tileKv=*/64, /*kvSplits=*/1,      /*headGroup=*/1,
            /*warps=*/1,
            /*stages=*/1,  /*minWorkgroups=*/0, /*tileQ=*/32};
  Type elem = op.getQ().getType().getElementType();
  auto plan = [&](int64_t tileQ, int64_t tileKv, int64_t warps, bool wgmma) {
    return fusedPlan(op, elem, tileQ, op.getQkDim(), tileKv, op.getVDim(),
                     warps, wgmma);
  };
  if (wgmmaOk)
    for (int64_t tileKv : {128, 64}) {
      FailureOr<nvidia::StepPlan> p = plan(128, tileKv, 8, true);
      ConfigFields cfg{tileKv,       1, 1, /*warps=*/8, /*stages=*/2, 0,
                       /*tileQ=*/128};
      if (succeeded(p) && p->wgmma &&
          workgroupBytes(op, cfg, arch) <= arch.sharedBytes)
        return cfg;
    }
  ConfigFields fused{/*tileKv=*/64, 1, 1,           /*warps=*/4,
                     /*stages=*/1,  0, /*tileQ=*/64};
  if (arch.hasRegisterFusedStep() && succeeded(plan(64, 64, 4, false)) &&
      workgroupBytes(op, fused, arch) <= arch.sharedBytes)
    return fused;
  // The register step (AMD). With the queries read in place
  // (AttentionLayout.h): 128 query rows on four waves (32 each, 32x32x8)
  // over 32-key tiles, whose K and V tiles alone take LDS (21.5 KB for
  // 192/128: two workgroups, 2 waves per SIMD, on gfx942's 64 KiB), each
  // K/V row read once per 128 queries. Otherwise 64 query rows (32 per
  // wave) over 64-key tiles where they fit, else smaller.
  // A mask's tile-skipping test wraps the step, which carries its state
  // through it (checkStepLoop); its queries are staged.
  const bool inPlace = prefillQueriesInPlace(&arch, !op.getMask().empty());
  SmallVector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {64, 64, 4}, {64, 32, 4}, {32, 32, 4}, {32, 32, 2}};
  if (inPlace)
    shapes.insert(shapes.begin(), {128, 32, 4});
  for (auto [tileQ, tileKv, warps] : shapes) {
    int64_t bytes;
    if (succeeded(registerPlan(
            arch, {elem, tileQ, op.getQkDim(), tileKv, op.getVDim(), warps},
            /*values=*/true, /*queryTile=*/!inPlace, &bytes)))
      return {tileKv, 1, 1, warps, /*stages=*/1, 0, tileQ};
  }
  ConfigFields cfg{/*tileKv=*/32, 1, 1, /*warps=*/4, 1, 0,
                   /*tileQ=*/32};
  while (workgroupBytes(op, cfg, arch) > arch.sharedBytes) {
    if (cfg.tileKv > 16)
      cfg.tileKv /= 2;
    else if (cfg.tileQ > 16)
      cfg.tileQ /= 2;
    else
      break;
  }
  return cfg;
}

/// Refuses `op` on a GPU when even its smallest tiles (`queryRows` query
/// rows and kMinTileRows keys of `dim` elements) exceed the chip's shared
/// memory. Checked before any tile is built: lowering such tiles (NVIDIA's
/// fused step unrolls them) would run for minutes and out of memory long
/// before mla-outline-gpu-kernels counts their bytes.
LogicalResult checkSmallestTiles(Operation *op, const ArchInfo &arch,
                                 int64_t queryRows, int64_t dim, Type elem,
                                 StringRef dimName) {
  if (!arch.isGPU())
    return success();
  int64_t bytes = stepOperandBytes(queryRows, kMinTileRows, dim,
                                   elem.getIntOrFloatBitWidth() / 8);
  if (bytes <= arch.sharedBytes)
    return success();
  return op->emitError() << "the smallest tiles of this " << op->getName()
                         << " (" << queryRows << " query rows and "
                         << kMinTileRows << " keys, " << dimName << " " << dim
                         << ") need at least " << bytes
                         << " bytes of shared memory, more than " << arch.name
                         << "'s " << arch.sharedBytes;
}

struct SelectConfigPass
    : public mla::impl::MLASelectConfigBase<SelectConfigPass> {
  using MLASelectConfigBase::MLASelectConfigBase;

  /// The module's target: the `target` option, set as `mla.target` (the
  /// module's own when the option is empty; host when neither names one).
  FailureOr<const ArchInfo *> setModuleTarget() {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    // One module compiles for one target, and the later passes (outlining,
    // the launch plans) see the functions directly inside it: an mla op in
    // a nested module would pass through them uncompiled.
    WalkResult nested = module.walk([&](Operation *op) {
      if (!isa_and_nonnull<MLADialect>(op->getDialect()) ||
          op->getParentOfType<ModuleOp>() == module)
        return WalkResult::advance();
      op->emitOpError() << "is inside a nested module; mla ops compile only "
                           "in functions directly inside the top-level module";
      return WalkResult::interrupt();
    });
    if (nested.wasInterrupted() || failed(checkKernelFunctions(module)))
      return failure();
    auto existing =
        module->getAttrOfType<TargetAttr>(MLADialect::kTargetAttrName);
    if (!target.empty() && !lookupArch(target)) {
      module.emitError() << "mla-select-config: unknown target '" << target
                         << "' (known: " << archNames() << ")";
      return failure();
    }
    if (existing && !target.empty() && existing.getName() != target) {
      module.emitError() << "mla-select-config: target=" << target
                         << " differs from the module's " << existing
                         << "; one module compiles for one target";
      return failure();
    }
    if (!existing) {
      existing = TargetAttr::get(ctx, target.empty() ? std::string("host")
                                                     : std::string(target));
      module->setAttr(MLADialect::kTargetAttrName, existing);
    }
    return &existing.getArch();
  }

  /// The `wgmma` field of the perf-config overrides, if given.
  std::optional<int64_t> wgmmaOverride() {
    SmallVector<StringRef> items;
    StringRef(perfConfig).split(items, ',', -1, false);
    std::optional<int64_t> wgmma;
    for (StringRef item : items) {
      auto [key, value] = item.split('=');
      int64_t v;
      if (key.trim() == "wgmma" && !value.trim().getAsInteger(10, v))
        wgmma = v;
    }
    return wgmma;
  }

  /// The config of one op: the heuristics' `cfg` unless it has one
  /// (`existing`), then the perf-config overrides, checked for `arch`; null
  /// after an error located at the op.
  ConfigAttr selectConfig(Operation *op, ConfigFields cfg, ConfigAttr existing,
                          const ArchInfo &arch) {
    if (existing)
      cfg = fieldsOf(existing);
    const bool stagesAsked = existing || specHasField(perfConfig, "stages");
    if (failed(applyOverrides(op, perfConfig, cfg)))
      return {};
    // The part groups are the length-aware schedule's: a default of more
    // than one goes with it when the overrides select fixed splits.
    if (!existing && cfg.kvChunks == 0 &&
        !specHasField(perfConfig, "merge_groups"))
      cfg.mergeGroups = 1;
    // A fused merge has no merge launch: the part groups' default goes.
    if (!existing && cfg.fusedMerge &&
        !specHasField(perfConfig, "merge_groups"))
      cfg.mergeGroups = 1;
    // So are the windows.
    if (!existing && cfg.kvChunks == 0 &&
        !specHasField(perfConfig, "chunk_windows"))
      cfg.chunkWindows = 0;
    // The adaptive plan bounds q by the merge, not by chunk_balance: asked
    // for together, it is an error rather than a value silently unread.
    if (!existing && cfg.chunkWindows == 2 &&
        specHasField(perfConfig, "chunk_balance")) {
      op->emitError() << "perf-config: chunk_balance applies to chunk_windows "
                         "0 and 1 (the adaptive plan, chunk_windows=2, bounds "
                         "its chunks by the merge instead); add "
                         "chunk_windows=0 or 1";
      return {};
    }
    // chunk_balance has a default on every config (the verifier cannot
    // tell it was asked for): asked together with fixed split-KV
    // (kv_chunks=0), it is an error as workgroups and merge_groups are,
    // not silently dropped. (An op's own config keeps its schedule.)
    if (!existing && cfg.kvChunks == 0 &&
        specHasField(perfConfig, "chunk_balance")) {
      op->emitError() << "perf-config: chunk_balance applies to the "
                         "length-aware schedule only (kv_chunks > 0)";
      return {};
    }
    // A masked key loop skips the tiles no row sees and is not pipelined
    // (TileCore's emitKeyLoop): the config says so, and asking for more
    // stages is an error.
    if (hasMaskRegion(op) && cfg.stages > 1) {
      if (stagesAsked) {
        op->emitError()
            << (existing ? "config" : "perf-config")
            << ": stages = " << cfg.stages
            << " needs a key loop without a mask variant (a masked loop "
               "skips the key tiles no query row sees and is not "
               "pipelined); use stages = 1";
        return {};
      }
      cfg.stages = 1;
    }
    auto emitErr = [&]() { return op->emitError() << "perf-config: "; };
    ConfigAttr attr = configAttrOf(op->getContext(), cfg, emitErr);
    if (!attr || failed(checkConfigForTarget(op, attr, arch)))
      return ConfigAttr();
    // Lead scores, the default of NVIDIA's split step (gpuDecodeConfig),
    // go where the overrides' step does not split its scores; asked for,
    // checkLeadScoresRequest says why they cannot be had.
    if (!existing && attr.getLeadScores() &&
        !specHasField(perfConfig, "lead_scores")) {
      FailureOr<WorkgroupTiles> t = workgroupTiles(op, attr, arch);
      if (failed(t) || !t->leadScores) {
        cfg.leadScores = 0;
        attr = configAttrOf(op->getContext(), cfg);
      }
    }
    return attr;
  }

  /// Sets `op`'s config for `arch` (`wgmma`: the perf-config's field;
  /// `wgmmaOk`: whether the heuristics may pick warpgroup MMA).
  LogicalResult configurePrefill(PrefillOp op, const ArchInfo &arch,
                                 std::optional<int64_t> wgmma, bool wgmmaOk) {
    if (failed(checkSmallestTiles(op, arch, kMinTileRows, op.getQkDim(),
                                  op.getQ().getType().getElementType(),
                                  "qk head dim")))
      return failure();
    ConfigAttr attr = selectConfig(op, prefillConfig(op, arch, wgmmaOk),
                                   op.getConfigAttr(), arch);
    if (!attr)
      return failure();
    if (attr.getKvSplits() != 1 || attr.getHeadGroup() != 1 ||
        attr.getTileQ() == 0 || attr.getKvChunks() != 0) {
      op.emitError() << "config for prefill needs kv_splits = 1, "
                        "head_group = 1, kv_chunks = 0 and tile_q > 0, "
                        "got "
                     << attr;
      return failure();
    }
    if (wgmma == 1 &&
        failed(checkWgmmaRequest(
            op, op.getQ().getType().getElementType(), attr.getTileQ(),
            op.getQkDim(), attr.getTileKv(), op.getVDim(), attr.getWarps())))
      return failure();
    if (failed(checkOverlapRequest(op, attr, arch)) ||
        failed(checkLeadScoresRequest(op, attr, arch)) ||
        failed(checkHostStack(op, attr, arch)))
      return failure();
    LLVM_DEBUG(llvm::dbgs() << "config for " << op << ": " << attr << "\n");
    op.setConfigAttr(attr);
    return success();
  }

  /// Sets `op`'s config for `arch`, as configurePrefill.
  LogicalResult configureDecode(DecodeOp op, const ArchInfo &arch,
                                std::optional<int64_t> wgmma, bool wgmmaOk) {
    if (failed(checkSmallestTiles(op, arch, op.getQLen(), op.getHeadDim(),
                                  op.getQ().getType().getElementType(),
                                  "head dim")))
      return failure();
    ConfigFields cfg = lengthAwareSchedule(
        op,
        arch.kind == TargetKind::Host ? hostDecodeConfig(op)
                                      : gpuDecodeConfig(op, arch, wgmmaOk),
        arch);
    if (arch.kind != TargetKind::Host && cfg.headGroup >= op.getNumHeads())
      cfg.mergeGroups = kOneHeadGroupMergeGroups;
    if (arch.kind != TargetKind::Host)
      cfg.chunkWindows = kGpuChunkWindows;
    ConfigAttr attr = selectConfig(op, cfg, op.getConfigAttr(), arch);
    if (!attr)
      return failure();
    if (op.getConfigAttr() || !perfConfig.empty())
      warnIfNoRegisterStep(op, attr, arch);
    if (attr.getTileQ() != 0) {
      op.emitError() << "config tile_q applies to prefill only";
      return failure();
    }
    if (op.getNumHeads() % attr.getHeadGroup() != 0) {
      op.emitError() << "config head_group " << attr.getHeadGroup()
                     << " does not divide the head count " << op.getNumHeads();
      return failure();
    }
    if (failed(checkOverlapRequest(op, attr, arch)) ||
        failed(checkLeadScoresRequest(op, attr, arch)) ||
        failed(checkHostStack(op, attr, arch)))
      return failure();
    if (wgmma == 1 &&
        failed(checkWgmmaRequest(op, op.getQ().getType().getElementType(),
                                 attr.getHeadGroup() * op.getQLen(),
                                 op.getHeadDim(), attr.getTileKv(),
                                 op.getLatentDim(), attr.getWarps())))
      return failure();
    LLVM_DEBUG(llvm::dbgs() << "config for " << op << ": " << attr << "\n");
    op.setConfigAttr(attr);
    return success();
  }

  void runOnOperation() override {
    FailureOr<const ArchInfo *> selected = setModuleTarget();
    if (failed(selected))
      return signalPassFailure();
    const ArchInfo *arch = *selected;
    // Overrides the target cannot run: warpgroup MMA asked of a chip
    // without it. With `wgmma=0` the heuristics must not pick shapes that
    // only fit the warpgroup-MMA layout.
    std::optional<int64_t> wgmma = wgmmaOverride();
    if (wgmma == 1 && !arch->hasWarpgroupMma()) {
      getOperation().emitError()
          << "perf-config: wgmma=1 needs warpgroup MMA, which target "
          << arch->name << " does not have";
      return signalPassFailure();
    }
    const bool wgmmaOk = arch->hasWarpgroupMma() && wgmma != 0;
    WalkResult result = getOperation().walk([&](Operation *o) {
      LogicalResult done = success();
      if (auto op = dyn_cast<PrefillOp>(o))
        done = configurePrefill(op, *arch, wgmma, wgmmaOk);
      else if (auto op = dyn_cast<DecodeOp>(o))
        done = configureDecode(op, *arch, wgmma, wgmmaOk);
      return failed(done) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    // Overrides that no op takes (a module of append_kv or merge kernels
    // only) are an error, not silently ignored.
    bool configured = false;
    getOperation().walk(
        [&](Operation *o) { configured |= isa<DecodeOp, PrefillOp>(o); });
    if (!StringRef(perfConfig).trim().empty() && !configured) {
      getOperation().emitError()
          << "perf-config: '" << perfConfig
          << "' applies to mla.decode and mla.prefill, and this module has "
             "neither";
      signalPassFailure();
    }
  }
};
} // namespace
