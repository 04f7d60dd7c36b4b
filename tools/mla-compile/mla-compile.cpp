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
//
//===----------------------------------------------------------------------===//
#include "mla/Dialect/MLA/IR/MLA.h"
#include "mla/Pipelines/Pipelines.h"
#include "mla/Target/Arch.h"
#include "mla/Target/GPUTarget.h"
#include "mla/Target/HostTarget.h"
#include "mla/Transforms/Passes.h"
#include "mla/runtime/Manifest.h"
#include "mla/runtime/Package.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory cat("mla-compile options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("[input.mlir]"),
                                      cl::init(""), cl::cat(cat));
static cl::opt<std::string>
    outputFile("o",
               cl::desc("Output file (default: stdout for text, required for "
                        "obj/package)"),
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
                              cl::init(16), cl::cat(cat));
static cl::opt<int64_t>
    latentDim("latent-dim",
              cl::desc("Latent (value) dim, a multiple of 16; DeepSeek 512"),
              cl::init(512), cl::cat(cat));
static cl::opt<int64_t>
    ropeDim("rope-dim", cl::desc("Rope dim, a multiple of 16; DeepSeek 64"),
            cl::init(64), cl::cat(cat));
static cl::opt<int64_t> pageSize(
    "page-size",
    cl::desc("Tokens per KV page (>= 1), or 0 for a page size chosen at run "
             "time"),
    cl::init(64), cl::cat(cat));
static cl::opt<int64_t>
    qLen("q-len", cl::desc("Query tokens per request (>= 1; > 1 is MTP)"),
         cl::init(1), cl::cat(cat));
static cl::opt<int64_t>
    qkDim("qk-dim",
          cl::desc("prefill: q/k head dim, a multiple of 16; DeepSeek 192"),
          cl::init(192), cl::cat(cat));
static cl::opt<int64_t>
    vDim("v-dim",
         cl::desc("prefill, merge: value head dim, a multiple of 16 and at "
                  "most --qk-dim; DeepSeek 128"),
         cl::init(128), cl::cat(cat));
static cl::opt<bool>
    causal("causal",
           cl::desc("prefill: causal mask, aligned bottom-right when a "
                    "request has more keys than queries"),
           cl::init(false), cl::cat(cat));
static cl::opt<int64_t>
    parts("parts", cl::desc("merge: partial results (chunks) merged, >= 1"),
          cl::init(2), cl::cat(cat));
static cl::opt<std::string> dtype("dtype",
                                  cl::desc("q/kv/o element type: bf16, f16, "
                                           "f32"),
                                  cl::init("bf16"), cl::cat(cat));
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
         cl::desc("What to write: package (default), mlir (after the mla "
                  "passes; for gfx942-emu the same module as gfx942), llvm "
                  "(optimised LLVM IR), asm, obj (the code object)"),
         cl::init("package"), cl::cat(cat));
static cl::opt<int> emuDropBarrier(
    "emu-drop-barrier",
    cl::desc("AMD emulation targets: remove the N-th gpu.barrier (0-based) "
             "to test the emulator's race checker"),
    cl::init(-1), cl::cat(cat));
static cl::opt<std::string>
    perfConfig("perf-config",
               cl::desc("Override config fields: tile_kv=N,kv_splits=N,"
                        "head_group=N,warps=N,stages=N,min_workgroups=N,"
                        "tile_q=N (prefill),wgmma=0|1 (sm_90a: warpgroup "
                        "MMA in the fused attention step, default 1)"),
               cl::init(""), cl::cat(cat));

static int fail(const Twine &msg) {
  llvm::errs() << "mla-compile: error: " << msg << "\n";
  return 1;
}

/// MLIR text of a decode kernel described by the flags.
static FailureOr<std::string> decodeSource() {
  auto bad = [](const Twine &m) -> FailureOr<std::string> {
    fail(m);
    return failure();
  };
  if (heads < 1)
    return bad("--heads must be >= 1 (got " + Twine(heads) + ")");
  if (qLen < 1)
    return bad("--q-len must be >= 1 (got " + Twine(qLen) + ")");
  if (latentDim < 16 || latentDim % 16)
    return bad("--latent-dim must be a positive multiple of 16 (got " +
               Twine(latentDim) + ")");
  if (ropeDim < 0 || ropeDim % 16)
    return bad("--rope-dim must be a non-negative multiple of 16 (got " +
               Twine(ropeDim) + ")");
  if (pageSize < 0)
    return bad("--page-size must be >= 1, or 0 for a run-time page size "
               "(got " +
               Twine(pageSize) + ")");
  if (dtype != "bf16" && dtype != "f16" && dtype != "f32")
    return bad("--dtype must be bf16, f16 or f32 (got '" + dtype + "')");
  int64_t d = latentDim + ropeDim;
  std::string p = pageSize == 0 ? "?" : std::to_string(pageSize);
  std::string t = dtype;
  std::string qT = llvm::formatv("memref<?x{0}x{1}x{2}x{3}>", qLen.getValue(),
                                 heads.getValue(), d, t);
  std::string kvT = llvm::formatv("memref<?x{0}x{1}x{2}>", p, d, t);
  std::string oT = llvm::formatv("memref<?x{0}x{1}x{2}x{3}>", qLen.getValue(),
                                 heads.getValue(), latentDim.getValue(), t);
  std::string lseT =
      llvm::formatv("memref<?x{0}x{1}xf32>", qLen.getValue(), heads.getValue());
  return llvm::formatv(
             "func.func @decode(%q: {0}, %kv: {1}, %block_table: "
             "memref<?x?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %o: "
             "{2}, %lse: {3}) {{\n"
             "  mla.decode %q, %kv, %block_table, %seq_lens, %scale, %o, %lse "
             ": {0}, {1}, memref<?x?xi32>, memref<?xi32>, f32, {2}, {3}\n"
             "  return\n}\n",
             qT, kvT, oT, lseT)
      .str();
}

/// MLIR text of a prefill kernel described by the flags.
static FailureOr<std::string> prefillSource() {
  auto bad = [](const Twine &m) -> FailureOr<std::string> {
    fail(m);
    return failure();
  };
  if (heads < 1)
    return bad("--heads must be >= 1 (got " + Twine(heads) + ")");
  if (qkDim < 16 || qkDim % 16)
    return bad("--qk-dim must be a positive multiple of 16 (got " +
               Twine(qkDim) + ")");
  if (vDim < 16 || vDim % 16)
    return bad("--v-dim must be a positive multiple of 16 (got " + Twine(vDim) +
               ")");
  if (vDim > qkDim)
    return bad("--v-dim (" + Twine(vDim) + ") must not exceed --qk-dim (" +
               Twine(qkDim) + ")");
  if (dtype != "bf16" && dtype != "f16" && dtype != "f32")
    return bad("--dtype must be bf16, f16 or f32 (got '" + dtype + "')");
  std::string outType = oDtype.empty() ? dtype.getValue() : oDtype.getValue();
  if (outType != dtype && outType != "f32")
    return bad("--o-dtype must be the --dtype (" + dtype + ") or f32 (got '" +
               outType + "')");
  std::string qT = llvm::formatv("memref<?x{0}x{1}x{2}>", heads.getValue(),
                                 qkDim.getValue(), dtype.getValue());
  std::string vT = llvm::formatv("memref<?x{0}x{1}x{2}>", heads.getValue(),
                                 vDim.getValue(), dtype.getValue());
  std::string oT = llvm::formatv("memref<?x{0}x{1}x{2}>", heads.getValue(),
                                 vDim.getValue(), outType);
  std::string lseT = llvm::formatv("memref<{0}x?xf32>", heads.getValue());
  return llvm::formatv(
             "func.func @prefill(%q: {0}, %k: {0}, %v: {1}, %cu_seqlens_q: "
             "memref<?xi32>, %cu_seqlens_k: memref<?xi32>, %scale: f32, %o: "
             "{4}, %lse: {2}) {{\n"
             "  mla.prefill %q, %k, %v, %cu_seqlens_q, %cu_seqlens_k, %scale, "
             "%o, %lse {3}: {0}, {0}, {1}, memref<?xi32>, memref<?xi32>, f32, "
             "{4}, {2}\n"
             "  return\n}\n",
             qT, vT, lseT, causal ? "{causal} " : "", oT)
      .str();
}

/// MLIR text of a chunked-prefill merge described by the flags: N stacked
/// chunk results o_parts [N, T, H, Dv], lse_parts [N, H, T] -> o [T, H, Dv],
/// lse [H, T], through transposed views in mla.merge's layout.
static FailureOr<std::string> mergeSource() {
  auto bad = [](const Twine &m) -> FailureOr<std::string> {
    fail(m);
    return failure();
  };
  if (heads < 1)
    return bad("--heads must be >= 1 (got " + Twine(heads) + ")");
  if (vDim < 16 || vDim % 16)
    return bad("--v-dim must be a positive multiple of 16 (got " + Twine(vDim) +
               ")");
  if (parts < 1)
    return bad("--parts must be >= 1 (got " + Twine(parts) + ")");
  if (dtype != "bf16" && dtype != "f16" && dtype != "f32")
    return bad("--dtype must be bf16, f16 or f32 (got '" + dtype + "')");
  int64_t n = parts, h = heads, dv = vDim;
  std::string opT = llvm::formatv("memref<{0}x?x{1}x{2}xf32>", n, h, dv);
  std::string lpT = llvm::formatv("memref<{0}x{1}x?xf32>", n, h);
  std::string oT =
      llvm::formatv("memref<?x{0}x{1}x{2}>", h, dv, dtype.getValue());
  std::string lseT = llvm::formatv("memref<{0}x?xf32>", h);
  std::string opV = llvm::formatv(
      "memref<?x{0}x{1}x{2}xf32, strided<[{3}, {2}, ?, 1]>>", h, n, dv, h * dv);
  std::string lpV =
      llvm::formatv("memref<?x{0}x{1}xf32, strided<[1, ?, ?]>>", h, n);
  std::string lseV = llvm::formatv("memref<?x{0}xf32, strided<[1, ?]>>", h);
  return llvm::formatv(
             "func.func @merge(%o_parts: {0}, %lse_parts: {1}, %o: {2}, "
             "%lse: {3}) {{\n"
             "  %op = memref.transpose %o_parts (n, t, h, d) -> (t, h, n, d) "
             ": {0} to {4}\n"
             "  %lp = memref.transpose %lse_parts (n, h, t) -> (t, h, n) : {1} "
             "to {5}\n"
             "  %l = memref.transpose %lse (h, t) -> (t, h) : {3} to {6}\n"
             "  mla.merge %op, %lp, %o, %l : {4}, {5}, {2}, {6}\n"
             "  return\n}\n",
             opT, lpT, oT, lseT, opV, lpV, lseV)
      .str();
}

/// MLIR text of a KV-append kernel described by the flags: new rows
/// kv_new [N, latent + rope] written into the pool kv [pages, P, latent +
/// rope] at slot_mapping [N] (i32; -1 = padding).
static FailureOr<std::string> appendKVSource() {
  auto bad = [](const Twine &m) -> FailureOr<std::string> {
    fail(m);
    return failure();
  };
  if (latentDim < 16 || latentDim % 16)
    return bad("--latent-dim must be a positive multiple of 16 (got " +
               Twine(latentDim) + ")");
  if (ropeDim < 0 || ropeDim % 16)
    return bad("--rope-dim must be a non-negative multiple of 16 (got " +
               Twine(ropeDim) + ")");
  if (pageSize < 0)
    return bad("--page-size must be >= 1, or 0 for a run-time page size "
               "(got " +
               Twine(pageSize) + ")");
  if (dtype != "bf16" && dtype != "f16" && dtype != "f32")
    return bad("--dtype must be bf16, f16 or f32 (got '" + dtype + "')");
  int64_t d = latentDim + ropeDim;
  std::string p = pageSize == 0 ? "?" : std::to_string(pageSize);
  std::string newT =
      llvm::formatv("memref<?x{0}x{1}>", d, dtype.getValue()).str();
  std::string kvT =
      llvm::formatv("memref<?x{0}x{1}x{2}>", p, d, dtype.getValue()).str();
  return llvm::formatv(
             "func.func @append_kv(%kv_new: {0}, %slot_mapping: "
             "memref<?xi32>, %kv: {1}) {{\n"
             "  mla.append_kv %kv_new, %slot_mapping, %kv {{latent_dim = {2} "
             ": i64} : {0}, memref<?xi32>, {1}\n"
             "  return\n}\n",
             newT, kvT, latentDim.getValue())
      .str();
}

/// Manifest header and argument lines of a launch plan.
static std::string manifestHeader(DictionaryAttr plan) {
  std::string out = "mla-manifest 1\n";
  DictionaryAttr info = plan.getAs<DictionaryAttr>("info");
  out += "kernel " +
         (info && info.get("kernel") ? info.getAs<StringAttr>("kernel").str()
                                     : std::string("custom")) +
         "\n";
  out += "function " + plan.getAs<StringAttr>("function").str() + "\n";
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
  for (Attribute l : plan.getAs<ArrayAttr>("lines"))
    if (cast<StringAttr>(l).getValue().starts_with("arg "))
      out += cast<StringAttr>(l).str() + "\n";
  return out;
}

/// One target's block: its config, workspaces and launches. (The text is
/// parsed and written again by the runtime's printer: main.)
static std::string manifestTarget(DictionaryAttr plan, StringRef targetName) {
  std::string out =
      ("target " + targetName + " code." + targetName + "\n").str();
  if (auto info = plan.getAs<DictionaryAttr>("info"))
    if (auto cfg = info.getAs<StringAttr>("config"))
      out += "config " + cfg.str() + "\n";
  for (Attribute l : plan.getAs<ArrayAttr>("lines"))
    if (!cast<StringAttr>(l).getValue().starts_with("arg "))
      out += cast<StringAttr>(l).str() + "\n";
  out += "end-target\n";
  return out;
}

static LogicalResult writeText(StringRef text, StringRef outPath) {
  std::string path = outPath.empty() ? "-" : outPath.str();
  std::string err;
  auto file = openOutputFile(path, &err);
  if (!file) {
    fail(err);
    return failure();
  }
  file->os() << text;
  file->keep();
  return success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(cat);
  cl::ParseCommandLineOptions(
      argc, argv,
      "mla-compile: compile mla attention kernels into code-object packages\n\n"
      "Input is either an .mlir file holding a func.func with mla ops, or a\n"
      "kernel described by flags (--kernel=decode ...). The output is a\n"
      "versioned .mlapkg package (code objects + manifest) that mla-run and\n"
      "the runtime load; --emit shows the intermediate stages instead.\n");

  if (inputFile.empty() == kernel.empty())
    return fail("give either an input .mlir file or --kernel=KIND (not "
                "both)");
  if (!kernel.empty() &&
      !llvm::is_contained({"decode", "prefill", "merge", "append_kv"},
                          StringRef(kernel)))
    return fail("--kernel must be one of decode, prefill, merge, append_kv "
                "(got '" +
                kernel + "')");
  SmallVector<StringRef> targetList;
  StringRef(targets).split(targetList, ',', -1, false);
  if (targetList.empty())
    return fail("--target is empty");
  SmallVector<const mla::ArchInfo *> archs;
  for (StringRef t : targetList) {
    const mla::ArchInfo *arch = mla::lookupArch(t);
    if (!arch)
      return fail("--target: unknown target '" + t +
                  "' (known: " + mla::archNames() + ")");
    if (llvm::is_contained(archs, arch))
      return fail("--target: '" + t + "' is given twice");
    archs.push_back(arch);
  }
  if (emuDropBarrier >= 0 &&
      llvm::any_of(archs, [](auto *a) { return !a->isEmulation(); }))
    return fail("--emu-drop-barrier applies to AMD emulation targets only "
                "(gfx90a-emu, gfx942-emu, gfx950-emu)");
  if (!llvm::is_contained({"package", "mlir", "llvm", "asm", "obj"},
                          StringRef(emit)))
    return fail("--emit must be one of package, mlir, llvm, asm, obj (got '" +
                emit + "')");
  if ((emit == "package" || emit == "obj") && outputFile.empty())
    return fail("-o is required for --emit=" + emit);
  if (emit != "package" && archs.size() != 1)
    return fail("--emit=" + emit + " shows one target; give one --target");
  // In-process lld resets llvm::cl options when it links: keep what the
  // linking stage still needs.
  const std::string outPath = outputFile.getValue();
  const std::string emitKind = emit.getValue();

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registry.insert<mla::MLADialect>();
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  if (!kernel.empty()) {
    FailureOr<std::string> src = kernel == "prefill"     ? prefillSource()
                                 : kernel == "merge"     ? mergeSource()
                                 : kernel == "append_kv" ? appendKVSource()
                                                         : decodeSource();
    if (failed(src))
      return 1;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(*src, "<--kernel=" + kernel + ">"),
        llvm::SMLoc());
  } else {
    std::string err;
    auto buffer = openInputFile(inputFile, &err);
    if (!buffer)
      return fail(err);
    sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  }
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  // One compilation per target, each from a fresh copy of the input.
  std::string header;
  std::string targetBlocks;
  mla::rt::CodeSections sections;
  for (const mla::ArchInfo *arch : archs) {
    OwningOpRef<ModuleOp> copy = module->clone();
    bool host = arch->kind == mla::TargetKind::Host;
    mla::PipelineOptions options;
    options.target = arch->name.str();
    options.perfConfig = perfConfig;
    options.emuDropBarrier = emuDropBarrier;
    PassManager pm(&context);
    if (host)
      mla::buildHostKernelPipeline(pm, options);
    else
      mla::buildGPUKernelPipeline(pm, options);
    if (failed(pm.run(*copy)))
      return 1;
    auto plans = (*copy)->getAttrOfType<ArrayAttr>(
        mla::MLADialect::kLaunchPlansAttrName);
    if (!plans || plans.size() != 1)
      return fail("the input must hold exactly one function with mla ops "
                  "(found " +
                  Twine(plans ? plans.size() : 0) + ")");
    auto plan = cast<DictionaryAttr>(plans[0]);
    if (emitKind == "mlir") {
      std::string text;
      llvm::raw_string_ostream os(text);
      copy->print(os);
      return failed(writeText(text, outPath)) ? 1 : 0;
    }
    PassManager lower(&context);
    if (host)
      mla::buildHostToLLVMPipeline(lower);
    else
      mla::buildGPUToLLVMPipeline(lower, options);
    if (failed(lower.run(*copy)))
      return 1;

    std::vector<uint8_t> code;
    // Emulation targets lower to host code (a shared object of lanes).
    if (host || arch->isEmulation()) {
      mla::HostEmit kind = emitKind == "llvm"  ? mla::HostEmit::LLVMIR
                           : emitKind == "asm" ? mla::HostEmit::Assembly
                                               : mla::HostEmit::SharedObject;
      FailureOr<std::vector<uint8_t>> obj = mla::compileHost(*copy, kind);
      if (failed(obj))
        return 1;
      code = std::move(*obj);
    } else {
      mla::GPUEmit kind = emitKind == "llvm"  ? mla::GPUEmit::LLVMIR
                          : emitKind == "asm" ? mla::GPUEmit::Assembly
                                              : mla::GPUEmit::CodeObject;
      FailureOr<std::string> text = mla::compileGPU(*copy, *arch, kind);
      if (failed(text))
        return 1;
      code.assign(text->begin(), text->end());
    }
    if (emitKind == "llvm" || emitKind == "asm")
      return failed(writeText(
                 StringRef(reinterpret_cast<const char *>(code.data()),
                           code.size()),
                 outPath))
                 ? 1
                 : 0;
    if (emitKind == "obj") {
      std::string err;
      auto file = openOutputFile(outPath, &err);
      if (!file)
        return fail(err);
      file->os().write(reinterpret_cast<const char *>(code.data()),
                       code.size());
      file->keep();
      return 0;
    }
    std::string targetName =
        host ? std::string(mla::kHostTargetName) : arch->name.str();
    std::string thisHeader = manifestHeader(plan);
    if (header.empty())
      header = thisHeader;
    else if (header != thisHeader)
      return fail("targets disagree on the kernel's arguments");
    targetBlocks += manifestTarget(plan, targetName);
    sections.push_back({"code." + targetName, std::move(code)});
  }
  // The manifest goes through the runtime's parser, which checks it as
  // every loader will, and its printer, which writes the canonical form.
  mla::rt::Expected<mla::rt::Manifest> manifest =
      mla::rt::parseManifest(header + targetBlocks);
  if (!manifest.ok())
    return fail("internal error: the manifest built for the package does "
                "not parse: " +
                manifest.status().message());
  mla::rt::Status st = mla::rt::writePackage(
      outPath, mla::rt::printManifest(*manifest), sections);
  if (!st.ok())
    return fail(st.message());
  return 0;
}
