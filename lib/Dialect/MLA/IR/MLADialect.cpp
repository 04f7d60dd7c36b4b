//===- MLADialect.cpp - mla dialect registration --------------------------===//
#include "mla/Dialect/MLA/IR/MLA.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mla;

#include "mla/Dialect/MLA/IR/MLAOpsDialect.cpp.inc"

namespace mla {
/// `[e, ...]` (possibly empty) for MLA_BracketedList parameters: integers,
/// or attributes in their short form.
template <typename T>
static FailureOr<SmallVector<T>> parseBracketedList(AsmParser &parser) {
  SmallVector<T> out;
  if (failed(parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            FailureOr<T> e = FieldParser<T>::parse(parser);
            if (failed(e))
              return failure();
            out.push_back(*e);
            return success();
          })))
    return failure();
  return out;
}

template <typename T>
static void printBracketedList(AsmPrinter &printer, ArrayRef<T> elems) {
  printer << '[';
  llvm::interleaveComma(elems, printer, [&](const T &e) {
    if constexpr (std::is_base_of_v<Attribute, T>)
      printer.printStrippedAttrOrType(e);
    else
      printer << e;
  });
  printer << ']';
}

/// `[d, ...]` of a plan argument's dims: integers or `?`.
static FailureOr<SmallVector<int64_t>> parseArgDims(AsmParser &parser) {
  SmallVector<int64_t> out;
  if (failed(parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            int64_t d = rt::kDynamicDim;
            if (succeeded(parser.parseOptionalQuestion()) ||
                succeeded(parser.parseInteger(d))) {
              out.push_back(d);
              return success();
            }
            return failure();
          })))
    return failure();
  return out;
}

static void printArgDims(AsmPrinter &printer, ArrayRef<int64_t> dims) {
  printer << '[';
  llvm::interleaveComma(dims, printer, [&](int64_t d) {
    if (d == rt::kDynamicDim)
      printer << '?';
    else
      printer << d;
  });
  printer << ']';
}
} // namespace mla

#define GET_ATTRDEF_CLASSES
#include "mla/Dialect/MLA/IR/MLAAttrs.cpp.inc"

void MLADialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "mla/Dialect/MLA/IR/MLAOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "mla/Dialect/MLA/IR/MLAAttrs.cpp.inc"
      >();
}

LogicalResult ConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t tileKv, int64_t kvSplits,
                                 int64_t headGroup, int64_t warps,
                                 int64_t stages, int64_t minWorkgroups,
                                 int64_t tileQ, int64_t wgmma, int64_t kvChunks,
                                 int64_t workgroups, int64_t chunkBalance,
                                 int64_t mergeGroups, int64_t chunkWindows,
                                 int64_t blockedCopies, int64_t overlap,
                                 int64_t fusedMerge, int64_t leadScores) {
  if (tileKv < 8 || tileKv > 256 || !llvm::isPowerOf2_64(tileKv))
    return emitError() << "tile_kv must be a power of two in [8, 256], got "
                       << tileKv;
  if (kvSplits < 1 || kvSplits > 64)
    return emitError() << "kv_splits must be in [1, 64], got " << kvSplits;
  if (headGroup < 1)
    return emitError() << "head_group must be >= 1, got " << headGroup;
  if (warps < 1 || warps > kMaxConfigWarps)
    return emitError() << "warps must be in [1, " << kMaxConfigWarps
                       << "], got " << warps;
  if (stages < 1 || stages > 4)
    return emitError() << "stages must be in [1, 4], got " << stages;
  if (minWorkgroups < 0)
    return emitError() << "min_workgroups must be >= 0, got " << minWorkgroups;
  if (tileQ != 0 && (tileQ < 16 || tileQ > 256 || !llvm::isPowerOf2_64(tileQ)))
    return emitError() << "tile_q must be 0 or a power of two in [16, 256], "
                          "got "
                       << tileQ;
  if (wgmma != 0 && wgmma != 1)
    return emitError() << "wgmma must be 0 or 1, got " << wgmma;
  if (blockedCopies != 0 && blockedCopies != 1)
    return emitError() << "blocked_copies must be 0 or 1, got "
                       << blockedCopies;
  if (overlap != 0 && overlap != 1)
    return emitError() << "overlap must be 0 or 1, got " << overlap;
  if (kvChunks < 0 || kvChunks > (int64_t{1} << 20))
    return emitError() << "kv_chunks must be in [0, 2^20], got " << kvChunks;
  if (workgroups < 0 || workgroups > (int64_t{1} << 20))
    return emitError() << "workgroups must be in [0, 2^20], got " << workgroups;
  if (kvChunks > 0 && (kvSplits != 1 || minWorkgroups != 0))
    return emitError() << "kv_chunks (the length-aware schedule) needs "
                          "kv_splits = 1 and min_workgroups = 0, got "
                          "kv_splits = "
                       << kvSplits << ", min_workgroups = " << minWorkgroups
                       << " (kv_chunks = 0 selects the fixed split-KV "
                          "schedule)";
  if (chunkBalance < 1 || chunkBalance > (int64_t{1} << 20))
    return emitError() << "chunk_balance must be in [1, 2^20], got "
                       << chunkBalance;
  if (workgroups > 0 && kvChunks == 0)
    return emitError() << "workgroups applies to the length-aware schedule "
                          "only (kv_chunks > 0)";
  if (mergeGroups < 1 || mergeGroups > kMaxMergeGroups)
    return emitError() << "merge_groups must be in [1, " << kMaxMergeGroups
                       << "], got " << mergeGroups;
  if (mergeGroups > 1 && kvChunks == 0)
    return emitError() << "merge_groups applies to the length-aware schedule "
                          "only (kv_chunks > 0)";
  if (chunkWindows < 0 || chunkWindows > 2)
    return emitError() << "chunk_windows must be 0, 1 or 2, got "
                       << chunkWindows;
  if (chunkWindows && kvChunks == 0)
    return emitError() << "chunk_windows applies to the length-aware "
                          "schedule only (kv_chunks > 0)";
  if (fusedMerge != 0 && fusedMerge != 1)
    return emitError() << "fused_merge must be 0 or 1, got " << fusedMerge;
  if (fusedMerge && kvChunks == 0)
    return emitError() << "fused_merge applies to the length-aware schedule "
                          "only (kv_chunks > 0)";
  if (fusedMerge && mergeGroups != 1)
    return emitError() << "merge_groups applies to the merge launch; "
                          "fused_merge = 1 merges in the chunks kernel "
                          "(merge_groups must be 1, got "
                       << mergeGroups << ")";
  if (leadScores < 0 || leadScores > 4)
    return emitError() << "lead_scores must be 0, 1, 2, 3 or 4, got "
                       << leadScores;
  return success();
}

LogicalResult TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef name) {
  if (!lookupArch(name))
    return emitError() << "unknown target '" << name
                       << "' (known: " << archNames() << ")";
  return success();
}

const ArchInfo &TargetAttr::getArch() const { return *lookupArch(getName()); }

LogicalResult MLADialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto expect = [&](bool onRightOp, StringRef where, bool rightType,
                    StringRef what) -> LogicalResult {
    if (!onRightOp)
      return op->emitError() << "'" << name << "' belongs on a " << where;
    if (!rightType)
      return op->emitError()
             << "'" << name << "' must be " << what << ", got " << value;
    return success();
  };
  if (name == kTargetAttrName)
    return expect(isa<ModuleOp>(op), "builtin.module", isa<TargetAttr>(value),
                  "a #mla.target");
  if (name == kLaunchPlansAttrName) {
    auto plans = dyn_cast<ArrayAttr>(value);
    return expect(isa<ModuleOp>(op), "builtin.module",
                  plans && llvm::all_of(plans, llvm::IsaPred<LaunchPlanAttr>),
                  "an array of #mla.launch_plan");
  }
  if (name == kKernelInfoAttrName)
    return expect(op->getName().getStringRef() == "func.func", "func.func",
                  isa<DictionaryAttr>(value), "a dictionary");
  if (name == kSwizzleSrcAttrName || name == kSwizzleDstAttrName)
    return expect(op->getName().getStringRef() == "memref.alloca",
                  "memref.alloca", isa<IntegerAttr>(value),
                  "an integer buffer id");
  if (name == kFreshTilesAttrName)
    return expect(op->getName().getStringRef() == "scf.for", "scf.for",
                  isa<UnitAttr>(value), "a unit attribute");
  if (name == kUnsynchronizedAttrName || name == kNextTileAttrName)
    return expect(op->getName().getStringRef() == "scf.parallel",
                  "scf.parallel", isa<UnitAttr>(value), "a unit attribute");
  return op->emitError() << "unknown mla attribute '" << name << "'";
}

LogicalResult MLADialect::verifyRegionArgAttribute(Operation *op,
                                                   unsigned region,
                                                   unsigned arg,
                                                   NamedAttribute attr) {
  if (attr.getName() != kRoleAttrName)
    return op->emitError() << "unknown mla argument attribute '"
                           << attr.getName().getValue() << "'";
  if (!isa<StringAttr>(attr.getValue()))
    return op->emitError() << "'" << kRoleAttrName << "' of argument " << arg
                           << " must be a string, got " << attr.getValue();
  return success();
}

FailureOr<const ArchInfo *> mla::moduleTarget(Operation *op, StringRef pass) {
  auto module =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  while (module && !module->hasAttr(MLADialect::kTargetAttrName))
    module = module->getParentOfType<ModuleOp>();
  if (!module) {
    op->emitError() << pass << ": the module has no '"
                    << MLADialect::kTargetAttrName
                    << "' (#mla.target, set by mla-select-config)";
    return failure();
  }
  auto target =
      dyn_cast<TargetAttr>(module->getAttr(MLADialect::kTargetAttrName));
  if (!target) {
    module.emitError() << pass << ": '" << MLADialect::kTargetAttrName
                       << "' is not a #mla.target";
    return failure();
  }
  return &target.getArch();
}
