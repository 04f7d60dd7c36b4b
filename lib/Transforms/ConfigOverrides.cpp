//===- ConfigOverrides.cpp - mla-select-config's fields and checks --------===//
//
// The --perf-config overrides of #mla.config by field name and the checks
// mla-select-config makes of a chosen config and of the functions around
// the kernel ops (ConfigOverrides.h).
//
//===----------------------------------------------------------------------===//
#include "ConfigOverrides.h"
#include "mla/runtime/Manifest.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace mla {

ConfigFields fieldsOf(ConfigAttr a) {
  return {a.getTileKv(),       a.getKvSplits(),      a.getHeadGroup(),
          a.getWarps(),        a.getStages(),        a.getMinWorkgroups(),
          a.getTileQ(),        a.getWgmma(),         a.getKvChunks(),
          a.getWorkgroups(),   a.getChunkBalance(),  a.getMergeGroups(),
          a.getChunkWindows(), a.getBlockedCopies(), a.getOverlap(),
          a.getFusedMerge(),   a.getLeadScores()};
}

ConfigAttr configAttrOf(MLIRContext *ctx, const ConfigFields &c,
                        function_ref<InFlightDiagnostic()> emitError) {
  auto make = [&](auto get) {
    return get(c.tileKv, c.kvSplits, c.headGroup, c.warps, c.stages,
               c.minWorkgroups, c.tileQ, c.wgmma, c.kvChunks, c.workgroups,
               c.chunkBalance, c.mergeGroups, c.chunkWindows, c.blockedCopies,
               c.overlap, c.fusedMerge, c.leadScores);
  };
  if (emitError)
    return make([&](auto... f) {
      return ConfigAttr::getChecked(emitError, ctx, f...);
    });
  return make([&](auto... f) { return ConfigAttr::get(ctx, f...); });
}

/// Whether the perf-config `spec` names `field` (its syntax is checked by
/// applyOverrides).
bool specHasField(StringRef spec, StringRef field) {
  SmallVector<StringRef> items;
  spec.split(items, ',');
  return llvm::any_of(items, [&](StringRef item) {
    return item.split('=').first.trim() == field;
  });
}

/// Whether `op` (a decode or prefill) has a mask variant.
bool hasMaskRegion(Operation *op) {
  if (auto d = dyn_cast<DecodeOp>(op))
    return !d.getMask().empty();
  if (auto p = dyn_cast<PrefillOp>(op))
    return !p.getMask().empty();
  return false;
}

/// The fields of #mla.config by name, as --perf-config spells them.
static constexpr std::pair<const char *, int64_t ConfigFields::*>
    kConfigFieldNames[] = {
        {"tile_kv", &ConfigFields::tileKv},
        {"kv_splits", &ConfigFields::kvSplits},
        {"head_group", &ConfigFields::headGroup},
        {"warps", &ConfigFields::warps},
        {"stages", &ConfigFields::stages},
        {"min_workgroups", &ConfigFields::minWorkgroups},
        {"tile_q", &ConfigFields::tileQ},
        {"wgmma", &ConfigFields::wgmma},
        {"kv_chunks", &ConfigFields::kvChunks},
        {"workgroups", &ConfigFields::workgroups},
        {"chunk_balance", &ConfigFields::chunkBalance},
        {"merge_groups", &ConfigFields::mergeGroups},
        {"chunk_windows", &ConfigFields::chunkWindows},
        {"blocked_copies", &ConfigFields::blockedCopies},
        {"overlap", &ConfigFields::overlap},
        {"fused_merge", &ConfigFields::fusedMerge},
        {"lead_scores", &ConfigFields::leadScores},
};

LogicalResult applyOverrides(Operation *op, StringRef spec, ConfigFields &cfg) {
  if (spec.trim().empty())
    return success();
  SmallVector<StringRef> items;
  spec.split(items, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/true);
  llvm::StringSet<> seen;
  for (StringRef item : items) {
    auto [key, value] = item.split('=');
    key = key.trim();
    if (item.trim().empty())
      return op->emitError() << "perf-config: empty field in '" << spec << "'";
    if (!seen.insert(key).second)
      return op->emitError()
             << "perf-config: field '" << key << "' is given twice";
    int64_t v;
    if (value.trim().getAsInteger(10, v))
      return op->emitError() << "perf-config: '" << item
                             << "' is not of the form field=integer";
    const auto *field = llvm::find_if(
        kConfigFieldNames, [&](const auto &f) { return key == f.first; });
    if (field == std::end(kConfigFieldNames)) {
      InFlightDiagnostic diag = op->emitError()
                                << "perf-config: unknown field '" << key
                                << "' (fields: ";
      llvm::interleave(
          kConfigFieldNames, [&](const auto &f) { diag << f.first; },
          [&] { diag << ", "; });
      return diag << ")";
    }
    int64_t *slot = &(cfg.*(field->second));
    *slot = v;
  }
  return success();
}

/// The config fields whose lowering on `arch` takes fewer values than
/// #mla.config allows: a host workgroup runs on one thread (its tiles are
/// loops, not warps), so warps other than 1 would be ignored silently; a
/// GPU workgroup has at most rt::kMaxBlockThreads threads.
LogicalResult checkConfigForTarget(Operation *op, ConfigAttr cfg,
                                   const ArchInfo &arch) {
  int64_t maxWarps = arch.isGPU() ? rt::kMaxBlockThreads / arch.warpSize : 1;
  if (cfg.getWarps() <= maxWarps)
    return success();
  InFlightDiagnostic diag = op->emitError()
                            << "config warps = " << cfg.getWarps()
                            << " is not supported on target " << arch.name;
  if (!arch.isGPU())
    return diag << ": a host workgroup runs on one thread (allowed: warps = "
                   "1)";
  return diag << ": at most " << rt::kMaxBlockThreads << " threads of "
              << arch.warpSize << " per warp (allowed: warps in [1, "
              << maxWarps << "])";
}

namespace {
/// The ops a function's body states kernels with (the gridwise ops the
/// tiling passes lower; blockwise IR, mla.grid, is not among them).
bool isKernelOp(Operation *op) {
  return isa<DecodeOp, PrefillOp, MergeOp, ChunkPlanOp, ChunkMergeOp,
             AppendKVOp>(op);
}
} // namespace

/// A compiled package runs the kernels of its function's mla ops and
/// nothing else of the function: a kernel op nested in another op's region
/// (which the outliners do not see), or an op with side effects beside the
/// kernel ops (a store, a call), would be dropped without a word. Both are
/// errors located at the op; ops without side effects (constants, the
/// arithmetic feeding an operand) may stay.
LogicalResult checkKernelFunctions(ModuleOp module) {
  WalkResult result = module.walk([&](Operation *op) {
    if (!isKernelOp(op))
      return WalkResult::advance();
    Operation *parent = op->getParentOp();
    if (!isa<func::FuncOp>(parent)) {
      op->emitOpError() << "is inside '" << parent->getName()
                        << "'; a kernel op must be directly in a function's "
                           "body (nothing compiles it elsewhere)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() ||
        llvm::none_of(func.getBody().getOps(),
                      [](Operation &op) { return isKernelOp(&op); }))
      continue;
    for (Operation &op : func.getBody().getOps()) {
      if (isa_and_nonnull<MLADialect>(op.getDialect()) ||
          isa<func::ReturnOp>(op) || isMemoryEffectFree(&op))
        continue;
      op.emitOpError() << "beside the kernel ops of @" << func.getSymName()
                       << " has side effects that a compiled kernel would "
                          "drop: a function with mla kernel ops holds them, "
                          "the side-effect-free ops feeding their operands "
                          "and its return";
      return failure();
    }
  }
  return success();
}

} // namespace mla
