//===- Report.cpp - --report: one entry per launch of every target --------===//
//
// Builds the report from the package manifest (the launch plan: grid,
// block, dynamic shared bytes, config) and every target's code: AMD through
// the runtime's metadata reader (mla/runtime/AmdgpuMetadata.h) and its
// assembly, NVIDIA from its PTX. ReportPrint.cpp writes it.
//
//===----------------------------------------------------------------------===//

#include "Report.h"

#include "mla/runtime/AmdgpuMetadata.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cstdlib>

using namespace mla;
using namespace mla::report;
using llvm::StringRef;

namespace {

int64_t ceilDiv(int64_t n, int64_t d) { return (n + d - 1) / d; }

/// A size formula as the manifest writes it: `8`, `arg0.0`, `arg3.0-1`,
/// `arg0.0/64`.
std::string formula(const rt::DimExpr &d) {
  if (d.isConstant())
    return std::to_string(d.constant);
  std::string s =
      "arg" + std::to_string(d.argIndex) + "." + std::to_string(d.dim);
  if (d.addend > 0)
    s += "+" + std::to_string(d.addend);
  else if (d.addend < 0)
    s += std::to_string(d.addend);
  if (d.divisor != 1)
    s += "/" + std::to_string(d.divisor);
  return s;
}

/// The same in words: `dim 0 of q`, `(dim 0 of cu_seqlens_q - 1)`.
std::string formulaWords(const rt::Manifest &m, const rt::DimExpr &d) {
  if (d.isConstant())
    return std::to_string(d.constant);
  std::string role = "arg " + std::to_string(d.argIndex);
  for (const rt::ManifestArg &arg : m.args)
    if (arg.index == d.argIndex)
      role = arg.role;
  std::string s = "dim " + std::to_string(d.dim) + " of " + role;
  if (d.addend)
    s = "(" + s + (d.addend > 0 ? " + " : " - ") +
        std::to_string(std::abs(d.addend)) + ")";
  if (d.divisor != 1)
    s = "ceil(" + s + " / " + std::to_string(d.divisor) + ")";
  return s;
}

std::optional<int64_t> configInt(const rt::TargetSpec &t, StringRef key) {
  auto it = t.config.find(key.str());
  int64_t v = 0;
  if (it == t.config.end() || StringRef(it->second).getAsInteger(10, v))
    return std::nullopt;
  return v;
}

/// Whether `launch` takes the argument of `role`.
bool takes(const rt::Manifest &m, const rt::LaunchSpec &launch,
           StringRef role) {
  const rt::ManifestArg *arg = m.findArg(role);
  return arg && llvm::is_contained(launch.args, arg->index);
}

/// The KV reads of a launch: config facts.
void fillKvReads(const rt::Manifest &m, const rt::TargetSpec &t,
                 const rt::LaunchSpec &launch, KernelReport &k) {
  if (m.kernel == rt::kernels::kDecode && takes(m, launch, rt::roles::kKv)) {
    std::optional<int64_t> group = configInt(t, "head_group");
    if (!group || *group < 1 || m.heads < 1) {
      k.kvReadsNote = "unknown: no head_group in the config";
      return;
    }
    k.kvReads = ceilDiv(m.heads, *group);
    k.kvReadsNote = "config: " + std::to_string(m.heads) + " heads / " +
                    "head_group " + std::to_string(*group) +
                    "; each head group's workgroups read the request's KV "
                    "range";
    return;
  }
  if (m.kernel == rt::kernels::kPrefill && takes(m, launch, rt::roles::kK)) {
    k.kvReadsNote = "each K/V row once per query tile of its request: "
                    "ceil(query tokens / tile_q), known at run time";
    return;
  }
  if (m.kernel == rt::kernels::kAppendKv) {
    k.kvReads = 0;
    k.kvReadsNote = "writes KV rows, reads none";
  } else if (m.kernel == rt::kernels::kDecode ||
             m.kernel == rt::kernels::kPrefill ||
             m.kernel == rt::kernels::kMerge) {
    k.kvReads = 0;
    k.kvReadsNote = "reads no KV rows";
  } else {
    k.kvReadsNote = "not known for a kernel of kind '" + m.kernel + "'";
  }
}

/// Whether the launch streams keys (a key loop to report).
bool readsKeys(const rt::Manifest &m, const rt::LaunchSpec &launch) {
  return (m.kernel == rt::kernels::kDecode &&
          takes(m, launch, rt::roles::kKv)) ||
         (m.kernel == rt::kernels::kPrefill && takes(m, launch, rt::roles::kK));
}

/// The key loop of an AMD launch from the assembly.
void fillAmdLoop(const rt::Manifest &m, const rt::TargetSpec &t,
                 const rt::LaunchSpec &launch, StringRef assembly,
                 KernelReport &k) {
  if (!readsKeys(m, launch)) {
    k.loopNote = "no key loop: the launch reads no keys";
    return;
  }
  llvm::Expected<StringRef> fn = amdgcnFunction(assembly, launch.entry);
  if (!fn) {
    k.loopNote = llvm::toString(fn.takeError());
    return;
  }
  int64_t firstLine =
      static_cast<int64_t>(
          assembly.take_front(fn->data() - assembly.data()).count('\n')) +
      1;
  k.loop = findKeyLoop(*fn, firstLine);
  if (!k.loop) {
    k.loopNote = "no loop in the ISA";
    return;
  }
  k.loopKeys = configInt(t, "tile_kv");
  k.loopNote = "keys: config tile_kv (the keys one iteration of every "
               "wave's loop advances)";
  if (m.kernel == rt::kernels::kDecode) {
    std::optional<int64_t> group = configInt(t, "head_group");
    if (group && *group > 0 && m.heads > 0 && m.qLen > 0) {
      k.loopRows = std::min(*group, m.heads) * m.qLen;
      k.loopRowsNote = "config head_group x q_len";
    } else {
      k.loopRowsNote = "unknown: no head_group in the config or q_len known "
                       "only at run time";
    }
  } else if (std::optional<int64_t> tileQ = configInt(t, "tile_q")) {
    k.loopRows = *tileQ;
    k.loopRowsNote = "config tile_q";
  } else {
    k.loopRowsNote = "unknown: no tile_q in the config";
  }
}

std::string registerWords(const rt::AmdgpuKernelMetadata &md) {
  std::string s = std::to_string(md.vgprCount) + " VGPRs (.vgpr_count: " +
                  "arch VGPRs and AGPRs of the one register file)";
  if (md.agprCount)
    s += ", of them " + std::to_string(*md.agprCount) + " AGPRs (.agpr_count)";
  return s + ", " + std::to_string(md.sgprCount) + " SGPRs (.sgpr_count)";
}

llvm::Error fillAmd(const rt::Manifest &m, const rt::TargetSpec &t,
                    const rt::LaunchSpec &launch, const TargetCode &code,
                    const rt::AmdgpuMetadata &metadata, KernelReport &k) {
  const rt::AmdgpuKernelMetadata *md = metadata.findKernel(launch.entry);
  if (!md)
    return llvm::createStringError("the " + code.name +
                                   " code object's metadata note has no "
                                   "kernel '" +
                                   launch.entry + "'");
  k.vgpr = static_cast<int64_t>(md->vgprCount);
  k.agpr =
      md->agprCount ? std::optional<int64_t>(*md->agprCount) : std::nullopt;
  k.sgpr = static_cast<int64_t>(md->sgprCount);
  k.registers = registerWords(*md);
  k.ldsDynamic = launch.sharedBytes;
  k.ldsStatic = static_cast<int64_t>(md->groupSegmentFixedSize);
  k.ldsBytes = *k.ldsDynamic + *k.ldsStatic;
  k.scratchBytes = static_cast<int64_t>(md->privateSegmentFixedSize);
  k.dynamicStack = md->usesDynamicStack;
  StringRef chip = compiledArch(code.arch)->name;
  k.occupancy = amdOccupancy(chip, *k.vgpr, *k.sgpr, *k.ldsBytes, k.threads);
  if (!k.occupancy)
    k.occupancyNote = "no occupancy data for " + chip.str();
  fillAmdLoop(m, t, launch, code.assembly, k);
  return llvm::Error::success();
}

llvm::Error fillNvidia(const rt::Manifest &m, const rt::TargetSpec &t,
                       const rt::LaunchSpec &launch, const TargetCode &code,
                       KernelReport &k) {
  StringRef ptx(reinterpret_cast<const char *>(code.code.data()),
                code.code.size());
  llvm::Expected<PtxKernel> kernel = readPtxKernel(ptx, launch.entry);
  if (!kernel)
    return kernel.takeError();
  k.ptx = *kernel;
  k.registers = kernel->maxnreg
                    ? "at most " + std::to_string(*kernel->maxnreg) +
                          " per thread (.maxnreg); the allocation is "
                          "unknown (ptxas not run)"
                    : "unknown (ptxas not run)";
  k.ldsDynamic = launch.sharedBytes;
  k.ldsStatic = kernel->staticShared;
  k.ldsBytes = *k.ldsDynamic + *k.ldsStatic;
  k.occupancy = nvidiaOccupancy(code.arch->name, *k.ldsBytes, k.threads);
  if (!k.occupancy)
    k.occupancyNote = "no occupancy data for " + code.arch->name.str();
  k.loopNote = "no ISA counts for NVIDIA (SASS needs ptxas)";
  if (readsKeys(m, launch)) {
    k.ptxLoop = findPtxKeyLoop(ptx, launch.entry);
    k.loopKeys = configInt(t, "tile_kv");
  }
  return llvm::Error::success();
}

void fillHostOrEmulated(const rt::LaunchSpec &launch, const TargetCode &code,
                        KernelReport &k) {
  if (k.vendor == "host") {
    k.registers = "n/a (host code)";
    k.occupancyNote = "n/a (host: one thread-pool task per workgroup)";
    k.loopNote = "n/a (host code)";
    return;
  }
  k.registers = "n/a (emulated: the AMD program runs as host code; no "
                "registers are allocated)";
  k.ldsDynamic = launch.sharedBytes;
  k.ldsBytes = launch.sharedBytes;
  k.occupancyNote = "n/a (emulated)";
  k.loopNote = "n/a (emulated: no AMD ISA; --target=" +
               compiledArch(code.arch)->name.str() + " has it)";
}

llvm::Expected<KernelReport> kernelReport(const rt::Manifest &m,
                                          const rt::TargetSpec &t,
                                          const rt::LaunchSpec &launch,
                                          const TargetCode &code,
                                          const rt::AmdgpuMetadata *metadata) {
  KernelReport k;
  k.name = launch.entry;
  k.target = code.name;
  const ArchInfo &arch = *code.arch;
  k.vendor = arch.kind == TargetKind::Host     ? "host"
             : arch.kind == TargetKind::NVIDIA ? "nvidia"
             : arch.isEmulation()              ? "amd-emulated"
                                               : "amd";
  for (size_t i = 0; i < 3; ++i) {
    k.grid += (i ? "," : "") + formula(launch.grid[i]);
    k.gridWords += (i ? " x " : "") + formulaWords(m, launch.grid[i]);
  }
  k.block = launch.block;
  k.threads = launch.block[0] * launch.block[1] * launch.block[2];
  k.waves = ceilDiv(k.threads, std::max<int64_t>(arch.warpSize, 1));
  fillKvReads(m, t, launch, k);
  if (k.vendor == "amd") {
    if (llvm::Error err = fillAmd(m, t, launch, code, *metadata, k))
      return std::move(err);
  } else if (k.vendor == "nvidia") {
    if (llvm::Error err = fillNvidia(m, t, launch, code, k))
      return std::move(err);
  } else {
    fillHostOrEmulated(launch, code, k);
  }
  return k;
}

std::string shapeWords(const rt::Manifest &m) {
  std::string dtype = m.dtype ? rt::dtypeName(*m.dtype) : "?";
  auto dims = [](int64_t v) {
    return v == 0 ? std::string("run time") : std::to_string(v);
  };
  if (m.kernel == rt::kernels::kDecode)
    return "H=" + std::to_string(m.heads) + " q_len=" + dims(m.qLen) +
           " latent " + std::to_string(m.latentDim) + " + rope " +
           std::to_string(m.ropeDim) + ", " + dtype + ", page " +
           dims(m.pageSize);
  if (m.kernel == rt::kernels::kPrefill)
    return "H=" + std::to_string(m.heads) + " qk " + std::to_string(m.qkDim) +
           " v " + std::to_string(m.vDim) + ", " + dtype +
           (m.causal == 1 ? ", causal" : "");
  if (m.kernel == rt::kernels::kMerge)
    return "H=" + std::to_string(m.heads) + " v " + std::to_string(m.vDim) +
           ", " + std::to_string(m.parts) + " parts, " + dtype;
  if (m.kernel == rt::kernels::kAppendKv)
    return "latent " + std::to_string(m.latentDim) + " + rope " +
           std::to_string(m.ropeDim) + ", " + dtype + ", page " +
           dims(m.pageSize);
  return dtype;
}

} // namespace

llvm::Expected<Report>
mla::report::buildReport(const rt::Manifest &manifest,
                         llvm::ArrayRef<TargetCode> targets) {
  Report report;
  report.kernel = manifest.kernel;
  report.shape = shapeWords(manifest);
  for (const TargetCode &code : targets) {
    const rt::TargetSpec *spec = manifest.findTarget(code.name);
    if (!spec)
      return llvm::createStringError("the manifest has no target '" +
                                     code.name + "'");
    std::string config;
    for (const auto &[key, value] : spec->config)
      config += (config.empty() ? "" : " ") + key + "=" + value;
    report.configs.push_back({code.name, config});
    std::optional<rt::AmdgpuMetadata> metadata;
    if (code.arch->kind == TargetKind::AMD && !code.arch->isEmulation()) {
      rt::Expected<rt::AmdgpuMetadata> md =
          rt::parseAmdgpuMetadata(code.code.data(), code.code.size());
      if (!md.ok())
        return llvm::createStringError(code.name + ": " +
                                       md.status().message());
      metadata = std::move(*md);
    }
    for (const rt::LaunchSpec &launch : spec->launches) {
      llvm::Expected<KernelReport> k = kernelReport(
          manifest, *spec, launch, code, metadata ? &*metadata : nullptr);
      if (!k)
        return k.takeError();
      report.kernels.push_back(std::move(*k));
    }
  }
  report.roofline = rooflineFloor(manifest);
  return report;
}

std::optional<double>
mla::report::KernelReport::workgroupPerKeyPer16Rows() const {
  if (!loop || !loopKeys || *loopKeys <= 0 || !loopRows || *loopRows <= 0)
    return std::nullopt;
  return static_cast<double>(loop->loop.counts.instructions) * waves /
         *loopKeys / (static_cast<double>(*loopRows) / 16);
}
