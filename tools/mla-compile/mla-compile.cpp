//===- mla-compile.cpp - mla kernels -> code-object packages --------------===//
//
//   mla-compile kernel.mlir --target=host -o kernel.mlapkg
//   mla-compile --kernel=decode --heads=16 --latent-dim=512 --rope-dim=64 \
//               --page-size=64 --q-len=1 --dtype=bf16 --target=host -o k.mlapkg
//   mla-compile --kernel=prefill --heads=16 --qk-dim=192 --v-dim=128 \
//               --causal --dtype=bf16 --target=sm_90a -o p.mlapkg
//   mla-compile --kernel=merge --heads=16 --v-dim=128 --parts=2 -o m.mlapkg
//   mla-compile --kernel=append_kv --latent-dim=512 --rope-dim=64 \
//               --page-size=64 --dtype=bf16 --target=host -o a.mlapkg
//   mla-compile --kernel=decode --target=gfx942,sm_90a --report[=json]
//
//===----------------------------------------------------------------------===//
#include "Report.h"

#include "mla/Dialect/MLA/IR/MLA.h"
#include "mla/Kernels/Builders.h"
#include "mla/Pipelines/Pipelines.h"
#include "mla/Target/Arch.h"
#include "mla/Target/GPUTarget.h"
#include "mla/Target/HostTarget.h"
#include "mla/Transforms/Passes.h"
#include "mla/runtime/Manifest.h"
#include "mla/runtime/Package.h"
#include "mla/runtime/mla_runtime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include <algorithm>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory cat("mla-compile options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("[input.mlir]"),
                                      cl::init(""), cl::cat(cat));
static cl::opt<std::string>
    outputFile("o",
               cl::desc("Output file, '-' for standard output (default: "
                        "standard output for text; required for obj and "
                        "package)"),
               cl::value_desc("file"), cl::init(""), cl::cat(cat));
static cl::opt<std::string> kernel(
    "kernel",
    cl::desc("Describe the kernel by flags instead of an .mlir file: decode "
             "(--heads --latent-dim --rope-dim --page-size --q-len), prefill "
             "(--heads --qk-dim --v-dim --causal), merge (--heads --v-dim "
             "--parts), append_kv (KV append: writes new tokens' rows into "
             "their pages from a slot mapping; --latent-dim --rope-dim "
             "--page-size); all take --dtype"),
    cl::init(""), cl::cat(cat));
static cl::opt<int64_t> heads("heads", cl::desc("Query heads (>= 1)"),
                              cl::init(mla::DecodeSpec().heads), cl::cat(cat));
static cl::opt<int64_t>
    latentDim("latent-dim",
              cl::desc("Latent (value) dim, a multiple of 16; DeepSeek 512"),
              cl::init(mla::DecodeSpec().latentDim), cl::cat(cat));
static cl::opt<int64_t>
    ropeDim("rope-dim", cl::desc("Rope dim, a multiple of 16; DeepSeek 64"),
            cl::init(mla::DecodeSpec().ropeDim), cl::cat(cat));
static cl::opt<int64_t> pageSize(
    "page-size",
    cl::desc("Tokens per KV page (>= 1), or 0 for a page size chosen at run "
             "time"),
    cl::init(mla::DecodeSpec().pageSize), cl::cat(cat));
static cl::opt<int64_t>
    qLen("q-len", cl::desc("Query tokens per request (>= 1; > 1 is MTP)"),
         cl::init(mla::DecodeSpec().qLen), cl::cat(cat));
static cl::opt<int64_t>
    qkDim("qk-dim",
          cl::desc("prefill: q/k head dim, a multiple of 16; DeepSeek 192"),
          cl::init(mla::PrefillSpec().qkDim), cl::cat(cat));
static cl::opt<int64_t>
    vDim("v-dim",
         cl::desc("prefill, merge: value head dim, a multiple of 16 and at "
                  "most --qk-dim; DeepSeek 128"),
         cl::init(mla::PrefillSpec().vDim), cl::cat(cat));
static cl::opt<bool>
    causal("causal",
           cl::desc("prefill: causal mask, aligned bottom-right when a "
                    "request has more keys than queries"),
           cl::init(mla::PrefillSpec().causal), cl::cat(cat));
static cl::opt<int64_t>
    parts("parts", cl::desc("merge: partial results (chunks) merged, >= 1"),
          cl::init(mla::MergeSpec().parts), cl::cat(cat));
static cl::opt<std::string> dtype("dtype",
                                  cl::desc("q/kv/o element type: bf16, f16, "
                                           "f32"),
                                  cl::init(mla::DecodeSpec().dtype),
                                  cl::cat(cat));
static cl::opt<std::string> oDtype(
    "o-dtype",
    cl::desc("prefill: element type of o, the --dtype (default) or f32 (e.g. "
             "for chunk results merged later)"),
    cl::init(""), cl::cat(cat));
static cl::opt<std::string>
    targets("target",
            cl::desc("Comma-separated targets, one code object each in the "
                     "package: host, sm_80, sm_90a, gfx90a, gfx942, gfx950, "
                     "or an AMD emulation target gfx90a-emu, gfx942-emu, "
                     "gfx950-emu (the chip's kernels as host code for "
                     "mla-run --device=emu)"),
            cl::init("host"), cl::cat(cat));
static cl::opt<std::string>
    emit("emit",
         cl::desc("What to write: package (default), tiled (the tiled "
                  "program: after mla-select-config and mla-tile, before "
                  "the target's lowering), mlir (after all mla passes: "
                  "outlined kernels and launch plan, before LLVM "
                  "conversion; for gfx942-emu the same module as gfx942), "
                  "llvm (optimised LLVM IR), asm, obj (the code object)"),
         cl::init("package"), cl::cat(cat));
static cl::opt<std::string> report(
    "report", cl::ValueOptional,
    cl::desc("Also report, per kernel of the package, what its code object "
             "says (registers, LDS, scratch, occupancy, KV reads, the AMD key "
             "loop's instruction counts) and a roofline floor, on standard "
             "output: --report (text) or --report=json. The package goes to "
             "-o as without it (no -o: the report alone)"),
    cl::value_desc("text|json"), cl::init(""), cl::cat(cat));
static cl::opt<int> emuDropBarrier(
    "emu-drop-barrier",
    cl::desc("AMD emulation targets: remove the N-th gpu.barrier (0-based) "
             "to test the emulator's race checker"),
    cl::init(-1), cl::cat(cat));
static cl::opt<std::string>
    perfConfig("perf-config",
               cl::desc("Override config fields: tile_kv=N,kv_splits=N,"
                        "head_group=N,warps=N (GPU: 1-16; the host: 1),"
                        "stages=N,min_workgroups=N,"
                        "tile_q=N (prefill),wgmma=0|1 (sm_90a: warpgroup "
                        "MMA in the fused attention step, default 1),"
                        "kv_chunks=N (decode's length-aware schedule, the "
                        "default; kv_chunks=0 with kv_splits=N selects fixed "
                        "split-KV),workgroups=N (with kv_chunks: workgroups "
                        "that take the chunks in turn),chunk_balance=N "
                        "(with kv_chunks and chunk_windows 0 or 1: chunks of "
                        "at least sqrt(tiles / N) tiles, default 16),"
                        "merge_groups=N "
                        "(with kv_chunks: groups of threads that split each "
                        "request's chunks in the merge, 1-16, default 4 on "
                        "GPUs where one workgroup takes every head, else 1),"
                        "chunk_windows=0|1|2 (with kv_chunks: 1 cuts the "
                        "batch's key tiles into equal windows, one "
                        "workgroup per window; 2, the default on GPU "
                        "targets (0 on the host), lets the plan choose "
                        "request-aligned chunks when they fit one wave, "
                        "else windows, the chunks bounded by the merge),"
                        "blocked_copies=0|1 (NVIDIA: cp.async copies "
                        "spread row by row with fixed 16-byte pieces, "
                        "default 1; 0 the linear mapping),"
                        "fused_merge=0|1 (with kv_chunks: 1 merges each "
                        "request in the chunks kernel, by the workgroup "
                        "whose chunk finishes it, instead of a merge "
                        "launch; default 0),"
                        "overlap=0|1 (prefill, sm_90a or the host: each "
                        "tile's P.V issued in the next step, beside its "
                        "softmax; values copied one tile behind the keys; "
                        "default 0),"
                        "lead_scores=0|1|2|3|4 (sm_90a, decode's 64-row head "
                        "groups: 1 has one warpgroup compute each key "
                        "tile's whole scores and hand P to the other; 0 "
                        "has each compute half; 2, the default there, is "
                        "1 with the next key tile's copy issued by the "
                        "other warpgroup, in two-stage loops; 3 is 2 with "
                        "the other's P.V one key tile behind, two stages "
                        "only; 4 is 3 with the next tile's columns before "
                        "the other's value half copied at the top of each "
                        "iteration; 3 and 4 not yet run on a GPU)"),
               cl::init(""), cl::cat(cat));

static int fail(const Twine &msg) {
  llvm::errs() << "mla-compile: error: " << msg << "\n";
  return 1;
}

static LogicalResult error(const Twine &msg) {
  fail(msg);
  return failure();
}

/// A spec field's flag: `latent_dim` is --latent-dim.
static std::string flagName(StringRef field) {
  std::string flag = "--" + field.str();
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

/// The module the --kernel flags describe, built by the library's kernel
/// builders; a spec error is reported as `mla-compile: error: --flag ...`.
static OwningOpRef<ModuleOp> buildKernel(MLIRContext &context) {
  mla::BuildOptions options;
  options.sourceName = "<--kernel=" + kernel + ">";
  options.fieldName = flagName;
  ScopedDiagnosticHandler specErrors(&context, [](Diagnostic &diag) {
    fail(diag.str());
    return success();
  });
  FailureOr<OwningOpRef<ModuleOp>> module = failure();
  if (kernel == "prefill") {
    mla::PrefillSpec spec;
    spec.heads = heads;
    spec.qkDim = qkDim;
    spec.vDim = vDim;
    spec.causal = causal;
    spec.dtype = dtype;
    spec.oDtype = oDtype;
    module = mla::buildPrefillModule(context, spec, options);
  } else if (kernel == "merge") {
    mla::MergeSpec spec;
    spec.heads = heads;
    spec.vDim = vDim;
    spec.parts = parts;
    spec.dtype = dtype;
    module = mla::buildMergeModule(context, spec, options);
  } else if (kernel == "append_kv") {
    mla::AppendKVSpec spec;
    spec.latentDim = latentDim;
    spec.ropeDim = ropeDim;
    spec.pageSize = pageSize;
    spec.dtype = dtype;
    module = mla::buildAppendKVModule(context, spec, options);
  } else {
    mla::DecodeSpec spec;
    spec.heads = heads;
    spec.latentDim = latentDim;
    spec.ropeDim = ropeDim;
    spec.pageSize = pageSize;
    spec.qLen = qLen;
    spec.dtype = dtype;
    module = mla::buildDecodeModule(context, spec, options);
  }
  if (failed(module))
    return nullptr;
  return std::move(*module);
}

/// The input: the --kernel flags' module, or the parsed .mlir file (its
/// diagnostics located through `sourceMgr`).
static OwningOpRef<ModuleOp> loadInput(MLIRContext &context,
                                       llvm::SourceMgr &sourceMgr) {
  if (!kernel.empty())
    return buildKernel(context);
  std::string err;
  auto buffer = openInputFile(inputFile, &err);
  if (!buffer) {
    fail(err);
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

/// Every flag that describes a --kernel.
static SmallVector<const cl::Option *> kernelFlags() {
  return {&heads, &latentDim, &ropeDim, &pageSize, &qLen,  &qkDim,
          &vDim,  &causal,    &parts,   &dtype,    &oDtype};
}

/// The flags that describe a --kernel of each kind (the builders check
/// their values).
static SmallVector<const cl::Option *> kindFlags(StringRef kind) {
  if (kind == "decode")
    return {&heads, &latentDim, &ropeDim, &pageSize, &qLen, &dtype};
  if (kind == "prefill")
    return {&heads, &qkDim, &vDim, &causal, &dtype, &oDtype};
  if (kind == "merge")
    return {&heads, &vDim, &parts, &dtype};
  return {&latentDim, &ropeDim, &pageSize, &dtype}; // append_kv
}

/// A flag that describes another kind of kernel than --kernel=`kind` is
/// an error naming it and the flags the kind takes (it used to be ignored).
static LogicalResult checkKindFlags(StringRef kind) {
  SmallVector<const cl::Option *> takes = kindFlags(kind);
  for (const cl::Option *flag : kernelFlags()) {
    if (flag->getNumOccurrences() == 0 || llvm::is_contained(takes, flag))
      continue;
    std::string list;
    for (const cl::Option *t : takes)
      list += (list.empty() ? "--" : ", --") + t->ArgStr.str();
    return error("--" + flag->ArgStr + " does not describe --kernel=" + kind +
                 " (it takes " + list + ")");
  }
  return success();
}

/// Checks the flags that do not describe the kernel (the builders check
/// those) and resolves --target.
static LogicalResult
checkOptions(SmallVectorImpl<const mla::ArchInfo *> &archs) {
  if (inputFile.empty() && kernel.empty())
    return error(kernel.getNumOccurrences() > 0
                     ? "--kernel is empty: give --kernel=KIND (decode, "
                       "prefill, merge, append_kv) or an input .mlir file"
                     : "no input: give an input .mlir file or --kernel=KIND "
                       "(decode, prefill, merge, append_kv); --help lists "
                       "the options");
  if (!inputFile.empty() && !kernel.empty())
    return error("give either an input .mlir file or --kernel=KIND (not "
                 "both)");
  // The flags that describe a --kernel: an .mlir input has its own shapes.
  for (const cl::Option *flag : kernelFlags())
    if (!inputFile.empty() && flag->getNumOccurrences() > 0)
      return error("--" + flag->ArgStr +
                   " describes a --kernel; the input .mlir file '" + inputFile +
                   "' gives its own shapes and types");
  if (!kernel.empty() &&
      !llvm::is_contained({"decode", "prefill", "merge", "append_kv"},
                          StringRef(kernel)))
    return error("--kernel must be one of decode, prefill, merge, append_kv "
                 "(got '" +
                 kernel + "')");
  if (!kernel.empty())
    if (failed(checkKindFlags(kernel)))
      return failure();
  SmallVector<StringRef> targetList;
  StringRef(targets).split(targetList, ',', -1, /*KeepEmpty=*/true);
  if (StringRef(targets).trim().empty())
    return error("--target is empty");
  for (StringRef t : targetList) {
    if (t.trim().empty())
      return error("--target '" + targets +
                   "' has an empty item (a comma too many)");
    const mla::ArchInfo *arch = mla::lookupArch(t);
    if (!arch)
      return error("--target: unknown target '" + t +
                   "' (known: " + mla::archNames() + ")");
    if (llvm::is_contained(archs, arch))
      return error("--target: '" + t + "' is given twice");
    archs.push_back(arch);
  }
  if (emuDropBarrier.getNumOccurrences() > 0 && emuDropBarrier < 0)
    return error("--emu-drop-barrier must be >= 0 (the index of the "
                 "gpu.barrier to remove), got " +
                 Twine(emuDropBarrier.getValue()));
  if (emuDropBarrier >= 0 &&
      llvm::any_of(archs, [](auto *a) { return !a->isEmulation(); }))
    return error("--emu-drop-barrier applies to AMD emulation targets only "
                 "(gfx90a-emu, gfx942-emu, gfx950-emu)");
  if (!llvm::is_contained({"package", "tiled", "mlir", "llvm", "asm", "obj"},
                          StringRef(emit)))
    return error("--emit must be one of package, tiled, mlir, llvm, asm, obj "
                 "(got '" +
                 emit + "')");
  if (report.getNumOccurrences() > 0) {
    if (!llvm::is_contained({"", "text", "json"}, StringRef(report)))
      return error("--report takes text or json (got '" + report + "')");
    if (emit != "package")
      return error("--report describes a package's code objects; it takes "
                   "--emit=package (the default), not --emit=" +
                   emit);
    if (outputFile == "-")
      return error("--report writes standard output; give the package a "
                   "file with -o");
  }
  bool reportOnly = report.getNumOccurrences() > 0 && emit == "package";
  if ((emit == "package" || emit == "obj") && outputFile.empty() && !reportOnly)
    return error("-o is required for --emit=" + emit);
  if (emit != "package" && archs.size() != 1)
    return error("--emit=" + emit + " shows one target; give one --target");
  return success();
}

/// Manifest header and argument lines of a launch plan. (The manifest's
/// line syntax is the runtime's; writePackageFor parses this text with the
/// runtime's parser and writes it with its printer.)
static std::string manifestHeader(mla::LaunchPlanAttr plan) {
  std::string out = "mla-manifest 1\n";
  DictionaryAttr info = plan.getInfo();
  out += "kernel " +
         (info && info.get("kernel") ? info.getAs<StringAttr>("kernel").str()
                                     : std::string("custom")) +
         "\n";
  out += "function " + plan.getFunction().str() + "\n";
  if (info) {
    for (NamedAttribute a : info) {
      if (a.getName() == "kernel" || a.getName() == "config")
        continue;
      std::string value;
      if (auto s = dyn_cast<StringAttr>(a.getValue()))
        value = s.str();
      else if (auto i = dyn_cast<IntegerAttr>(a.getValue()))
        value = std::to_string(i.getInt());
      out += a.getName().str() + " " + value + "\n";
    }
  }
  for (mla::PlanArgAttr arg : plan.getArgs()) {
    out += "arg " + std::to_string(arg.getIndex()) + " " + arg.getRole().str() +
           " " + arg.getKind().str() + " " + arg.getDtype().str();
    if (arg.getKind() == "memref")
      out += " " + mla::rt::printArgDims(std::vector<int64_t>(
                       arg.getDims().begin(), arg.getDims().end()));
    out += "\n";
  }
  return out;
}

/// One target's block: its config, workspaces, launches and byte bounds.
static std::string manifestTarget(mla::LaunchPlanAttr plan,
                                  StringRef targetName) {
  std::string out =
      ("target " + targetName + " code." + targetName + "\n").str();
  if (DictionaryAttr info = plan.getInfo())
    if (auto cfg = info.getAs<StringAttr>("config"))
      out += "config " + cfg.str() + "\n";
  for (mla::PlanWorkspaceAttr ws : plan.getWorkspaces())
    out += "workspace " + std::to_string(ws.getIndex()) + " " +
           ws.getDtype().str() + " " +
           mla::rt::printSizes(std::vector<mla::rt::DimExpr>(
               ws.getDims().begin(), ws.getDims().end())) +
           "\n";
  for (mla::PlanLaunchAttr launch : plan.getLaunches()) {
    // The plan's verifier holds the grid to three sizes and the block to
    // none (host) or three dims.
    mla::rt::LaunchSpec spec;
    spec.entry = launch.getEntry().str();
    spec.args.assign(launch.getArgs().begin(), launch.getArgs().end());
    llvm::copy(launch.getGrid(), spec.grid.begin());
    if (!launch.getBlock().empty())
      llvm::copy(launch.getBlock(), spec.block.begin());
    spec.sharedBytes = std::max<int64_t>(launch.getShared(), 0);
    spec.dependent = launch.getDependent();
    out += mla::rt::printLaunch(spec) + "\n";
  }
  for (mla::PlanMaxBytesAttr bound : plan.getMaxBytes())
    out += "max-bytes " + std::to_string(bound.getIndex()) + " " +
           std::to_string(bound.getBytes()) + "\n";
  out += "end-target\n";
  return out;
}

/// Writes `text` (any bytes) to `outPath`, or to stdout when it is empty.
static LogicalResult writeText(StringRef text, StringRef outPath) {
  std::string path = outPath.empty() ? "-" : outPath.str();
  std::string err;
  auto file = openOutputFile(path, &err);
  if (!file)
    return error(err);
  file->os() << text;
  file->os().flush();
  // A failed write (a full disk) is an error naming the file, not LLVM's
  // fatal "IO failure on output stream"; the file is removed (not kept).
  if (std::error_code ec = file->os().error()) {
    file->os().clear_error();
    return error((path == "-" ? std::string("standard output") : path) +
                 ": cannot write: " + ec.message());
  }
  file->keep();
  return success();
}

/// What one target's compilation produced: the stage --emit names (the
/// module's text for tiled and mlir, else the code), and the launch plan
/// (null for tiled).
struct TargetOutput {
  mla::LaunchPlanAttr plan;
  std::vector<uint8_t> bytes;
  /// With --report, for AMD: the assembly of the same module.
  std::string assembly;
};

/// The options every target's compilation reads, read once: in-process lld
/// resets llvm::cl options when it links, so a later target must not read
/// them again.
struct Knobs {
  std::string outPath, emitKind, perfConfig;
  int emuDropBarrier;
  /// --report: "" (none), "text" or "json".
  std::string report;
};

/// Runs `pm` on `module` with the --mlir-* pass-manager options (IR
/// printing, statistics, timing, crash reproducers) applied. Called for
/// every target before any code object is linked (in-process lld resets
/// those options).
static LogicalResult runPasses(PassManager &pm, ModuleOp module) {
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  applyDefaultTimingPassManagerCLOptions(pm);
  return pm.run(module);
}

/// One target's module after its MLIR pipelines: the tiled program
/// (--emit=tiled), the kernels and launch plan (--emit=mlir), or, for the
/// code stages, the LLVM-dialect module that codegen serializes.
struct LoweredModule {
  OwningOpRef<ModuleOp> module;
  mla::LaunchPlanAttr plan;
};

/// Runs the MLIR passes of `arch` on a copy of `module`, up to the stage
/// `emitKind` names (package: all of them).
static FailureOr<LoweredModule> lowerFor(MLIRContext &context, ModuleOp module,
                                         const mla::ArchInfo &arch,
                                         const Knobs &knobs,
                                         StringRef emitKind) {
  LoweredModule out{module.clone(), {}};
  bool host = arch.kind == mla::TargetKind::Host;
  mla::PipelineOptions options;
  options.target = arch.name.str();
  options.perfConfig = knobs.perfConfig;
  options.emuDropBarrier = knobs.emuDropBarrier;
  PassManager pm(&context);
  if (emitKind == "tiled")
    mla::buildTilePipeline(pm, options);
  else if (host)
    mla::buildHostKernelPipeline(pm, options);
  else
    mla::buildGPUKernelPipeline(pm, options);
  if (failed(runPasses(pm, *out.module)))
    return failure();
  if (emitKind == "tiled")
    return out;
  auto plans =
      (*out.module)
          ->getAttrOfType<ArrayAttr>(mla::MLADialect::kLaunchPlansAttrName);
  if (!plans || plans.size() != 1)
    return error("the input must hold exactly one function with mla ops "
                 "(found " +
                 Twine(plans ? plans.size() : 0) + ")");
  out.plan = cast<mla::LaunchPlanAttr>(plans[0]);
  if (emitKind == "mlir")
    return out;
  PassManager lower(&context);
  if (host)
    mla::buildHostToLLVMPipeline(lower);
  else
    mla::buildGPUToLLVMPipeline(lower, options);
  if (failed(runPasses(lower, *out.module)))
    return failure();
  return out;
}

/// The stage `emitKind` names of `lowered` (what lowerFor returned for it):
/// the module's text for tiled and mlir, else the code.
static FailureOr<TargetOutput> emitFor(LoweredModule &lowered,
                                       const mla::ArchInfo &arch,
                                       const Knobs &knobs, StringRef emitKind) {
  TargetOutput out{lowered.plan, {}, {}};
  ModuleOp copy = *lowered.module;
  if (emitKind == "tiled" || emitKind == "mlir") {
    std::string text;
    llvm::raw_string_ostream os(text);
    copy->print(os);
    out.bytes.assign(text.begin(), text.end());
    return out;
  }
  // Emulation targets lower to host code (a shared object of lanes).
  if (arch.kind == mla::TargetKind::Host || arch.isEmulation()) {
    mla::HostEmit kind = emitKind == "llvm"  ? mla::HostEmit::LLVMIR
                         : emitKind == "asm" ? mla::HostEmit::Assembly
                                             : mla::HostEmit::SharedObject;
    FailureOr<std::vector<uint8_t>> obj = mla::compileHost(copy, kind);
    if (failed(obj))
      return failure();
    out.bytes = std::move(*obj);
    return out;
  }
  mla::GPUEmit kind = emitKind == "llvm"  ? mla::GPUEmit::LLVMIR
                      : emitKind == "asm" ? mla::GPUEmit::Assembly
                                          : mla::GPUEmit::CodeObject;
  FailureOr<std::string> text = mla::compileGPU(copy, arch, kind);
  if (failed(text))
    return failure();
  out.bytes.assign(text->begin(), text->end());
  // The report reads the AMD key loop from the assembly of the module
  // the code object was built from (the same LLVM passes and options).
  if (!knobs.report.empty() && arch.kind == mla::TargetKind::AMD &&
      kind == mla::GPUEmit::CodeObject) {
    FailureOr<std::string> assembly =
        mla::compileGPU(copy, arch, mla::GPUEmit::Assembly);
    if (failed(assembly))
      return failure();
    out.assembly = std::move(*assembly);
  }
  return out;
}

/// Prints the report of the package on standard output.
static LogicalResult printReport(const mla::rt::Manifest &manifest,
                                 ArrayRef<mla::report::TargetCode> targets,
                                 StringRef format) {
  llvm::Expected<mla::report::Report> report =
      mla::report::buildReport(manifest, targets);
  if (!report)
    return error("--report: " + llvm::toString(report.takeError()));
  if (format == "json")
    mla::report::printReportJson(*report, llvm::outs());
  else
    mla::report::printReportText(*report, llvm::outs());
  llvm::outs().flush();
  return success();
}

/// Compiles `module` for every target and writes the package: one code
/// object each, and the manifest; with --report, its report.
static LogicalResult writePackageFor(MLIRContext &context, ModuleOp module,
                                     ArrayRef<const mla::ArchInfo *> archs,
                                     const Knobs &knobs) {
  std::string header;
  std::string targetBlocks;
  mla::rt::CodeSections sections;
  std::vector<mla::report::TargetCode> reportTargets;
  // Every target's MLIR passes first, then the code objects (whose linking
  // resets the --mlir-* options).
  std::vector<LoweredModule> lowered;
  for (const mla::ArchInfo *arch : archs) {
    FailureOr<LoweredModule> one =
        lowerFor(context, module, *arch, knobs, "package");
    if (failed(one))
      return failure();
    lowered.push_back(std::move(*one));
  }
  for (auto [arch, low] : llvm::zip_equal(archs, lowered)) {
    FailureOr<TargetOutput> out = emitFor(low, *arch, knobs, "package");
    if (failed(out))
      return failure();
    std::string targetName = arch->kind == mla::TargetKind::Host
                                 ? std::string(mla::kHostTargetName)
                                 : arch->name.str();
    std::string thisHeader = manifestHeader(out->plan);
    if (header.empty())
      header = thisHeader;
    else if (header != thisHeader)
      return error("targets disagree on the kernel's arguments");
    targetBlocks += manifestTarget(out->plan, targetName);
    if (!knobs.report.empty())
      reportTargets.push_back(
          {arch, targetName, out->bytes, std::move(out->assembly)});
    sections.push_back({"code." + targetName, std::move(out->bytes)});
  }
  // The manifest goes through the runtime's parser, which checks it as
  // every loader will, and its printer, which writes the canonical form.
  mla::rt::Expected<mla::rt::Manifest> manifest =
      mla::rt::parseManifest(header + targetBlocks);
  if (!manifest.ok())
    return error("internal error: the manifest built for the package does "
                 "not parse: " +
                 manifest.status().message());
  manifest->compiler = std::string("mla-compile ") + mla_version_string() +
                       " LLVM " LLVM_VERSION_STRING;
  if (knobs.outPath == "-") {
    // -o -: the package's bytes on standard output, as --emit=obj's.
    mla::rt::Expected<std::vector<uint8_t>> bytes =
        mla::rt::encodePackage(mla::rt::printManifest(*manifest), sections);
    if (!bytes.ok())
      return error(bytes.status().message());
    if (failed(
            writeText(StringRef(reinterpret_cast<const char *>(bytes->data()),
                                bytes->size()),
                      "-")))
      return failure();
  } else if (!knobs.outPath.empty()) {
    mla::rt::Status st = mla::rt::writePackage(
        knobs.outPath, mla::rt::printManifest(*manifest), sections);
    if (!st.ok())
      return error(st.message());
  }
  if (knobs.report.empty())
    return success();
  return printReport(*manifest, reportTargets, knobs.report);
}

/// --allow-unregistered-dialect, mlir-opt's (which the parser's error for
/// an op of an unknown dialect names); registerMLIROptions lists it under
/// the MLIR options.
static cl::opt<bool> allowUnregistered(
    "allow-unregistered-dialect",
    cl::desc("Allow operations of dialects that are not registered"),
    cl::init(false));

/// Registers MLIR's own options, as mlir-opt has them: the pass manager's
/// (--mlir-print-ir-after-all, --mlir-timing, --mlir-pass-statistics, ...),
/// the context's (--mlir-disable-threading, ...) and the printer's
/// (--mlir-print-debuginfo, ...), listed under their own heading in --help
/// with --allow-unregistered-dialect.
static void registerMLIROptions(cl::OptionCategory &mlirCat) {
  // The passes by name, for --mlir-print-ir-after=mla-tile and the like.
  mla::registerMLAPasses();
  registerTransformsPasses();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  for (auto &[name, option] : cl::getRegisteredOptions())
    if (name.starts_with("mlir-") || name == "allow-unregistered-dialect")
      option->addCategory(mlirCat);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  static cl::OptionCategory mlirCat("MLIR options (as mlir-opt's)");
  registerMLIROptions(mlirCat);
  cl::HideUnrelatedOptions({&cat, &mlirCat});
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "mla-compile (mla " << mla_version_string() << ", package format "
       << mla_package_format_version() << ", LLVM " LLVM_VERSION_STRING ")\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "mla-compile: compile mla attention kernels into code-object packages\n\n"
      "Input is either an .mlir file holding a func.func with mla ops, or a\n"
      "kernel described by flags (--kernel=decode ...). The output is a\n"
      "versioned .mlapkg package (code objects + manifest) that mla-run and\n"
      "the runtime load; --emit shows the intermediate stages instead.\n");

  SmallVector<const mla::ArchInfo *> archs;
  if (failed(checkOptions(archs)))
    return 1;
  // In-process lld resets llvm::cl options when it links: read what every
  // target's compilation needs once.
  const Knobs knobs{
      outputFile.getValue(), emit.getValue(), perfConfig.getValue(),
      emuDropBarrier.getValue(),
      report.getNumOccurrences() == 0
          ? std::string()
          : (report.empty() ? std::string("text") : report.getValue())};

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registry.insert<mla::MLADialect>();
  // The context reads --allow-unregistered-dialect, --mlir-* here.
  MLIRContext context(registry);
  context.allowUnregisteredDialects(allowUnregistered);
  // Diagnostics name their location; the op only with the flag.
  cl::Option *printOp =
      cl::getRegisteredOptions().lookup("mlir-print-op-on-diagnostic");
  if (!printOp || printOp->getNumOccurrences() == 0)
    context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = loadInput(context, sourceMgr);
  if (!module)
    return 1;

  // Every stage compiles one function's mla ops (the launch plan's check
  // after the passes says so for the later stages; --emit=tiled stops
  // before it, so an input without any printed its empty module).
  int64_t withMla = 0;
  // (Nested modules and regions included: the passes' located errors name
  // an mla op they cannot compile.)
  module->walk([&](func::FuncOp func) {
    WalkResult found = func.walk([](Operation *op) {
      return isa_and_nonnull<mla::MLADialect>(op->getDialect())
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    });
    withMla += found.wasInterrupted();
  });
  if (withMla != 1) {
    (void)error("the input must hold exactly one function with mla ops "
                "(found " +
                Twine(withMla) + ")");
    return 1;
  }
  if (knobs.emitKind == "package")
    return failed(writePackageFor(context, *module, archs, knobs)) ? 1 : 0;
  // One target (checkOptions): one stage of it, text or the code object.
  FailureOr<LoweredModule> lowered =
      lowerFor(context, *module, *archs.front(), knobs, knobs.emitKind);
  if (failed(lowered))
    return 1;
  FailureOr<TargetOutput> out =
      emitFor(*lowered, *archs.front(), knobs, knobs.emitKind);
  if (failed(out))
    return 1;
  StringRef bytes(reinterpret_cast<const char *>(out->bytes.data()),
                  out->bytes.size());
  return failed(writeText(bytes, knobs.outPath)) ? 1 : 0;
}
