//===- ReportPrint.cpp - --report as text and as JSON ---------------------===//
//
// The same fields in both forms; docs/AMD.md, "The report", lists them.
// Unknown values are JSON null with a note saying why, and "unknown" or
// "n/a" with the reason in the text.
//
//===----------------------------------------------------------------------===//

#include "Report.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <cmath>

using namespace mla::report;
using llvm::SmallVector;
namespace json = llvm::json;

namespace {

const char *kFloorLabel =
    "a floor, not a prediction: no kernel finishes before its minimum bytes "
    "cross memory at the bandwidth, nor before its FLOPs run at the bf16 "
    "matrix peak; max(bytes / bandwidth, flops / peak)";

/// A double as a short JSON number (`0.5`, `18.03`, `233.6`).
void number(json::OStream &j, double v, const char *fmt = "%.4g") {
  j.rawValue([&](llvm::raw_ostream &os) { os << llvm::format(fmt, v); });
}

template <typename T>
void nullable(json::OStream &j, llvm::StringRef key,
              const std::optional<T> &v) {
  j.attributeBegin(key);
  if (v)
    j.value(*v);
  else
    j.value(nullptr);
  j.attributeEnd();
}

void triple(json::OStream &j, llvm::StringRef key,
            const std::optional<std::array<int64_t, 3>> &v) {
  j.attributeBegin(key);
  if (v)
    j.array([&] {
      for (int64_t x : *v)
        j.value(x);
    });
  else
    j.value(nullptr);
  j.attributeEnd();
}

void countsJson(json::OStream &j, const IsaCounts &c) {
  j.attribute("instructions", c.instructions);
  j.attribute("mfma", c.mfma);
  j.attribute("buffer_loads", c.bufferLoads);
  j.attribute("buffer_load_bytes", c.bufferLoadBytes);
  j.attribute("lds_reads", c.ldsReads);
  j.attribute("lds_read_bytes", c.ldsReadBytes);
  j.attribute("lds_writes", c.ldsWrites);
  j.attribute("lds_write_bytes", c.ldsWriteBytes);
  j.attribute("barriers", c.barriers);
  j.attribute("waitcnt", c.waitcnt);
  j.attribute("waitcnt_vmcnt0", c.waitVmcntZero);
}

void ptxCountsJson(json::OStream &j, const PtxCounts &c) {
  j.attribute("instructions", c.instructions);
  j.attribute("mma", c.mma);
  j.attribute("wgmma", c.wgmma);
  j.attribute("cp_async", c.cpAsync);
  j.attribute("ld_global", c.ldGlobal);
  j.attribute("st_global", c.stGlobal);
  j.attribute("ld_shared", c.ldShared);
  j.attribute("st_shared", c.stShared);
  j.attribute("barriers", c.barriers);
  j.attribute("waits", c.waits);
}

/// "paths": {"shortest", "longest"} of one iteration, or null (an inner
/// loop).
void pathsJson(json::OStream &j, const std::optional<PathRange> &paths) {
  j.attributeBegin("paths");
  if (paths)
    j.object([&] {
      j.attribute("shortest", paths->shortest);
      j.attribute("longest", paths->longest);
    });
  else
    j.value(nullptr);
  j.attributeEnd();
}

/// "lines": [first, last], a loop's 1-based lines in its assembly.
void linesJson(json::OStream &j, int64_t first, int64_t last) {
  j.attributeArray("lines", [&] {
    j.value(first);
    j.value(last);
  });
}

/// NVIDIA: the key loop's PTX counts, or null.
void ptxLoopJson(json::OStream &j, const KernelReport &k) {
  j.attributeBegin("ptx_loop");
  if (!k.ptxLoop) {
    j.value(nullptr);
    j.attributeEnd();
    return;
  }
  const PtxLoop &l = *k.ptxLoop;
  j.object([&] {
    nullable(j, "keys", k.loopKeys);
    j.attribute("label", l.label);
    linesJson(j, l.firstLine, l.lastLine);
    j.attribute("chosen_by", l.chosenBy);
    ptxCountsJson(j, l.counts);
    pathsJson(j, l.paths);
    j.attributeArray("inner_loops", [&] {
      for (const auto &[label, counts] : l.inner)
        j.object([&] {
          j.attribute("label", label);
          ptxCountsJson(j, counts);
        });
    });
  });
  j.attributeEnd();
}

void loopJson(json::OStream &j, const KernelReport &k) {
  j.attributeBegin("loop");
  if (!k.loop) {
    j.value(nullptr);
    j.attributeEnd();
    return;
  }
  const KeyLoop &l = *k.loop;
  j.object([&] {
    nullable(j, "keys", k.loopKeys);
    j.attribute("keys_source", "config tile_kv");
    j.attribute("label", l.loop.label);
    linesJson(j, l.loop.firstLine, l.loop.lastLine);
    j.attribute("chosen_by", l.chosenBy);
    countsJson(j, l.loop.counts);
    pathsJson(j, l.loop.paths);
    j.attributeBegin("instructions_per_key");
    if (k.loopKeys && *k.loopKeys > 0)
      number(j, static_cast<double>(l.loop.counts.instructions) / *k.loopKeys);
    else
      j.value(nullptr);
    j.attributeEnd();
    nullable(j, "rows", k.loopRows);
    j.attribute("rows_source", k.loopRowsNote);
    j.attributeBegin("workgroup_instructions_per_key_per_16_rows");
    if (std::optional<double> v = k.workgroupPerKeyPer16Rows())
      number(j, *v);
    else
      j.value(nullptr);
    j.attributeEnd();
    j.attributeArray("inner_loops", [&] {
      for (const IsaLoop &inner : l.inner)
        j.object([&] {
          j.attribute("label", inner.label);
          linesJson(j, inner.firstLine, inner.lastLine);
          countsJson(j, inner.counts);
        });
    });
  });
  j.attributeEnd();
}

void occupancyJson(json::OStream &j, const KernelReport &k) {
  j.attributeBegin("occupancy");
  if (!k.occupancy) {
    j.value(nullptr);
    j.attributeEnd();
    return;
  }
  const Occupancy &o = *k.occupancy;
  j.object([&] {
    j.attribute("unit", o.unit);
    j.attribute("workgroups", o.workgroups);
    j.attribute("waves", o.waves);
    j.attribute("upper_bound", o.upperBound);
    j.attributeArray("limited_by", [&] {
      for (const std::string &name : o.limitedBy)
        j.value(name);
    });
    j.attributeArray("limits", [&] {
      for (const OccupancyLimit &l : o.limits)
        j.object([&] {
          j.attribute("name", l.name);
          nullable(j, "workgroups", l.workgroups);
          j.attribute("detail", l.detail);
        });
    });
  });
  j.attributeEnd();
}

void kernelJson(json::OStream &j, const KernelReport &k) {
  j.attribute("name", k.name);
  j.attribute("target", k.target);
  j.attribute("vendor", k.vendor);
  j.attribute("grid", k.grid);
  j.attribute("grid_words", k.gridWords);
  triple(j, "block", k.block);
  j.attribute("threads", k.threads);
  j.attribute("waves", k.waves);
  nullable(j, "vgpr", k.vgpr);
  nullable(j, "agpr", k.agpr);
  nullable(j, "sgpr", k.sgpr);
  j.attribute("registers", k.registers);
  nullable(j, "lds_bytes", k.ldsBytes);
  nullable(j, "lds_dynamic_bytes", k.ldsDynamic);
  nullable(j, "lds_static_bytes", k.ldsStatic);
  nullable(j, "scratch_bytes", k.scratchBytes);
  j.attribute("dynamic_stack", k.dynamicStack);
  j.attributeBegin("waves_per_simd");
  if (k.occupancy && k.occupancy->wavesPerSimd)
    number(j, *k.occupancy->wavesPerSimd);
  else
    j.value(nullptr);
  j.attributeEnd();
  nullable(j, "ctas_per_sm",
           k.occupancy && k.occupancy->unit == "SM"
               ? std::optional<int64_t>(k.occupancy->workgroups)
               : std::nullopt);
  occupancyJson(j, k);
  j.attribute("occupancy_note", k.occupancyNote);
  nullable(j, "kv_reads", k.kvReads);
  j.attribute("kv_reads_source", k.kvReadsNote);
  if (k.ptx)
    j.attributeObject("ptx", [&] {
      triple(j, "maxntid", k.ptx->maxntid);
      triple(j, "reqntid", k.ptx->reqntid);
      nullable(j, "maxnreg", k.ptx->maxnreg);
      nullable(j, "minnctapersm", k.ptx->minnctapersm);
      j.attribute("static_shared_bytes", k.ptx->staticShared);
    });
  loopJson(j, k);
  j.attribute("loop_note", k.loopNote);
  ptxLoopJson(j, k);
}

void rooflineJson(json::OStream &j, const Report &r) {
  j.attributeBegin("roofline");
  if (!r.roofline) {
    j.value(nullptr);
    j.attributeEnd();
    return;
  }
  const Roofline &f = *r.roofline;
  j.object([&] {
    j.attribute("label", kFloorLabel);
    j.attribute("workload", f.workload);
    j.attribute("batch", f.batch);
    j.attribute("seq_len", f.seqLen);
    j.attribute("bytes", static_cast<int64_t>(std::llround(f.bytes)));
    j.attribute("flops", static_cast<int64_t>(std::llround(f.flops)));
    j.attributeArray("floors", [&] {
      for (const Floor &fl : f.floors)
        j.object([&] {
          j.attribute("machine", fl.machine.name);
          j.attributeBegin("bandwidth_tb_s");
          number(j, fl.machine.bytesPerSecond / 1e12);
          j.attributeEnd();
          j.attributeBegin("peak_tflop_s");
          number(j, fl.machine.flopsPerSecond / 1e12);
          j.attributeEnd();
          j.attribute("source", fl.machine.source);
          j.attributeBegin("floor_us");
          number(j, fl.seconds * 1e6, "%.2f");
          j.attributeEnd();
          j.attribute("bound", fl.bound);
        });
    });
  });
  j.attributeEnd();
}

//===----------------------------------------------------------------------===//
// Text
//===----------------------------------------------------------------------===//

std::string countsText(const IsaCounts &c) {
  return plural(c.instructions, "instruction") + ", " + std::to_string(c.mfma) +
         " MFMA, " + plural(c.bufferLoads, "buffer load") + " (" +
         std::to_string(c.bufferLoadBytes) + " B/lane), " +
         plural(c.ldsReads, "LDS read") + " (" +
         std::to_string(c.ldsReadBytes) + " B/lane), " +
         plural(c.ldsWrites, "LDS write") + " (" +
         std::to_string(c.ldsWriteBytes) + " B/lane), " +
         std::to_string(c.barriers) + " s_barrier, " +
         std::to_string(c.waitcnt) + " s_waitcnt (" +
         std::to_string(c.waitVmcntZero) + " of them vmcnt(0))";
}

std::string ptxCountsText(const PtxCounts &c) {
  return std::to_string(c.instructions) + " PTX instructions, " +
         std::to_string(c.wgmma) + " wgmma, " + std::to_string(c.mma) +
         " mma.sync, " + std::to_string(c.cpAsync) + " cp.async, " +
         std::to_string(c.ldGlobal) + " ld.global, " +
         std::to_string(c.stGlobal) + " st.global, " +
         std::to_string(c.ldShared) + " ld.shared/ldmatrix, " +
         std::to_string(c.stShared) + " st.shared, " +
         std::to_string(c.barriers) + " bar.sync, " + std::to_string(c.waits) +
         " waits";
}

/// One iteration's paths, where they differ (a branch inside the loop).
void pathsText(const std::optional<PathRange> &paths, llvm::StringRef what,
               llvm::raw_ostream &os) {
  if (paths && paths->shortest != paths->longest)
    os << "                one iteration runs " << paths->shortest << " to "
       << paths->longest << " of these " << what
       << " (its shortest and longest path)\n";
}

/// NVIDIA: the key loop's PTX counts, when there is one.
void ptxLoopText(const KernelReport &k, llvm::raw_ostream &os) {
  if (!k.ptxLoop)
    return;
  const PtxLoop &l = *k.ptxLoop;
  os << "    PTX loop    " << l.label << " (PTX lines " << l.firstLine << "-"
     << l.lastLine << ", the loop with the "
     << (l.chosenBy == "mma" ? "most mma/wgmma" : "most copies")
     << "), per iteration of one thread, ";
  if (k.loopKeys)
    os << *k.loopKeys << " keys (config tile_kv):\n";
  else
    os << "keys unknown (no tile_kv in the config):\n";
  os << "                " << ptxCountsText(l.counts) << "\n";
  for (const auto &[label, counts] : l.inner)
    os << "                inner loop " << label
       << " (counted once above; its trip count is not read from the PTX): "
       << ptxCountsText(counts) << "\n";
  pathsText(l.paths, "PTX instructions", os);
}

void loopText(const KernelReport &k, llvm::raw_ostream &os) {
  if (!k.loop) {
    os << "    key loop    " << k.loopNote << "\n";
    return;
  }
  const KeyLoop &l = *k.loop;
  os << "    key loop    " << l.loop.label << " (ISA lines " << l.loop.firstLine
     << "-" << l.loop.lastLine << ", the loop with the "
     << (l.chosenBy == "mfma" ? "most MFMAs" : "most buffer loads")
     << "), per iteration of one wave, ";
  if (k.loopKeys)
    os << *k.loopKeys << " keys (config tile_kv):\n";
  else
    os << "keys unknown (no tile_kv in the config):\n";
  os << "                " << countsText(l.loop.counts) << "\n";
  if (k.loopKeys && *k.loopKeys > 0)
    os << "                "
       << llvm::format("%.2f", static_cast<double>(l.loop.counts.instructions) /
                                   *k.loopKeys)
       << " instructions per key\n";
  if (std::optional<double> v = k.workgroupPerKeyPer16Rows())
    os << "                " << llvm::format("%.2f", *v)
       << " instructions per key and 16 query rows for the workgroup ("
       << k.waves << " waves, " << *k.loopRows << " rows: " << k.loopRowsNote
       << ")\n";
  pathsText(l.loop.paths, "instructions", os);
  for (const IsaLoop &inner : l.inner)
    os << "                inner loop " << inner.label
       << " (counted once above; its trip count is not read from the ISA): "
       << countsText(inner.counts) << "\n";
}

void occupancyText(const KernelReport &k, llvm::raw_ostream &os) {
  if (!k.occupancy) {
    os << "    occupancy   " << k.occupancyNote << "\n";
    return;
  }
  const Occupancy &o = *k.occupancy;
  bool amd = o.unit == "CU";
  const char *group = amd ? "workgroup" : "CTA";
  os << "    occupancy   " << (o.upperBound ? "at most " : "");
  if (amd)
    os << llvm::format("%g", *o.wavesPerSimd)
       << (*o.wavesPerSimd == 1 ? " wave" : " waves") << " per SIMD ("
       << plural(o.workgroups, group) << " of " << plural(k.waves, "wave")
       << ", " << plural(o.waves, "wave") << " per CU)";
  else
    os << plural(o.workgroups, group) << " per SM (" << plural(o.waves, "warp")
       << ")";
  SmallVector<std::string> limiting;
  for (const OccupancyLimit &l : o.limits)
    if (llvm::is_contained(o.limitedBy, l.name))
      limiting.push_back(l.label);
  os << "; limited by " << llvm::join(limiting, ", ") << "\n";
  for (const OccupancyLimit &l : o.limits) {
    os << "                " << l.label << ": "
       << (l.workgroups            ? plural(*l.workgroups, group)
           : l.name == "registers" ? "unknown"
                                   : "no limit")
       << " (" << l.detail << ")\n";
  }
}

void kernelText(const KernelReport &k, llvm::raw_ostream &os) {
  os << "  " << k.name << "  grid " << k.grid << " (" << k.gridWords
     << "), block " << k.block[0] << "," << k.block[1] << "," << k.block[2];
  if (k.vendor != "host")
    os << " (" << k.waves << (k.vendor == "nvidia" ? " warps" : " waves")
       << ")";
  os << "\n    registers   " << k.registers << "\n";
  if (k.ldsBytes) {
    os << "    LDS/shared  " << *k.ldsBytes << " bytes";
    if (k.ldsStatic && *k.ldsStatic > 0)
      os << " (" << *k.ldsDynamic << " dynamic from the launch plan + "
         << *k.ldsStatic << " static)";
    else
      os << " (dynamic, from the launch plan)";
    os << "\n";
  } else {
    os << "    LDS/shared  n/a\n";
  }
  if (k.scratchBytes)
    os << "    scratch     " << *k.scratchBytes << " bytes per work-item"
       << (k.dynamicStack ? ", dynamic stack" : "") << "\n";
  occupancyText(k, os);
  os << "    KV reads    ";
  if (k.kvReads)
    os << *k.kvReads << " (" << k.kvReadsNote << ")\n";
  else
    os << "unknown (" << k.kvReadsNote << ")\n";
  loopText(k, os);
  ptxLoopText(k, os);
}

void rooflineText(const Report &r, llvm::raw_ostream &os) {
  if (!r.roofline) {
    os << "roofline floor: none (decode and prefill have one)\n";
    return;
  }
  const Roofline &f = *r.roofline;
  os << "roofline floor (" << kFloorLabel << ")\n  workload: " << f.workload
     << " (the DeepSeek benchmark workload): " << llvm::format("%.4g", f.bytes)
     << " bytes, " << llvm::format("%.4g", f.flops) << " FLOPs\n";
  for (const Floor &fl : f.floors)
    os << "  " << fl.machine.name << " (" << fl.machine.source
       << "): " << llvm::format("%.2f", fl.seconds * 1e6) << " us, " << fl.bound
       << "-bound\n";
}

} // namespace

void mla::report::printReportJson(const Report &r, llvm::raw_ostream &os) {
  json::OStream j(os, 2);
  j.object([&] {
    j.attribute("kernel", r.kernel);
    j.attribute("shape", r.shape);
    j.attributeArray("targets", [&] {
      for (const auto &[name, config] : r.configs)
        j.object([&] {
          j.attribute("name", name);
          j.attribute("config", config);
        });
    });
    j.attributeArray("kernels", [&] {
      for (const KernelReport &k : r.kernels)
        j.object([&] { kernelJson(j, k); });
    });
    rooflineJson(j, r);
  });
  os << "\n";
}

void mla::report::printReportText(const Report &r, llvm::raw_ostream &os) {
  os << "mla-compile report: " << r.kernel << " (" << r.shape << ")\n";
  for (const auto &[name, config] : r.configs) {
    os << "\ntarget " << name << " ("
       << (config.empty() ? "no config" : "config " + config) << ")\n";
    for (const KernelReport &k : r.kernels)
      if (k.target == name)
        kernelText(k, os);
  }
  os << "\n";
  rooflineText(r, os);
}
