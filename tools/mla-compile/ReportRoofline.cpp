//===- ReportRoofline.cpp - --report: the roofline floor of a package -----===//
//
// A floor, not a prediction: no kernel can finish before its minimum bytes
// cross the memory at peak bandwidth, nor before its FLOPs run at the
// matrix units' peak. The bytes and FLOPs are counted as mla-bench counts
// them (docs/Runtime.md): each input read once, each output written once,
// and the two products of attention.
//
//===----------------------------------------------------------------------===//

#include "Report.h"

#include "mla/runtime/DType.h"

#include <algorithm>

using namespace mla;
using namespace mla::report;

namespace {

/// The machines of the floor: MI300X at AMD's specified peaks, the H200 at
/// what mla-bench measured on it (docs/Performance.md).
const Machine kMachines[] = {
    {"MI300X", 5.3e12, 1307e12, "peak: 5.3 TB/s HBM3, 1307 TFLOP/s bf16 dense"},
    {"H200", 4.2e12, 786e12, "measured: 4.2 TB/s, 786 TFLOP/s bf16"},
};

/// The DeepSeek benchmark workloads of docs/Performance.md.
constexpr int64_t kDecodeBatch = 128, kDecodeSeqLen = 8192;
constexpr int64_t kPrefillBatch = 1, kPrefillSeqLen = 16384;

/// The one formula: the longer of moving the bytes and doing the FLOPs.
Floor floorOn(const Machine &m, double bytes, double flops) {
  double memory = bytes / m.bytesPerSecond;
  double compute = flops / m.flopsPerSecond;
  return {m, std::max(memory, compute),
          memory >= compute ? "memory" : "compute"};
}

double elementBytes(const rt::Manifest &m, const char *role) {
  const rt::ManifestArg *arg = m.findArg(role);
  return static_cast<double>(
      rt::dtypeSize(arg ? arg->dtype : m.dtype.value_or(rt::DType::BF16)));
}

} // namespace

std::optional<Roofline> mla::report::rooflineFloor(const rt::Manifest &m) {
  Roofline r;
  double e = elementBytes(m, rt::roles::kQ);
  if (m.kernel == rt::kernels::kDecode) {
    // q_len 0 is chosen at run time: one query token.
    double sq = m.qLen > 0 ? static_cast<double>(m.qLen) : 1.0;
    double h = static_cast<double>(m.heads);
    double dv = static_cast<double>(m.latentDim);
    double row = dv + static_cast<double>(m.ropeDim);
    r.batch = kDecodeBatch;
    r.seqLen = kDecodeSeqLen;
    double b = static_cast<double>(r.batch);
    double keys = b * static_cast<double>(r.seqLen);
    r.workload = std::to_string(r.batch) + " requests of " +
                 std::to_string(r.seqLen) + " keys, q_len " +
                 std::to_string(static_cast<int64_t>(sq)) + ", " +
                 std::to_string(m.heads) + " heads";
    r.bytes = e * (keys * row + b * sq * h * row + b * sq * h * dv);
    r.flops = 2.0 * sq * h * keys * (2.0 * dv + static_cast<double>(m.ropeDim));
  } else if (m.kernel == rt::kernels::kPrefill) {
    r.batch = kPrefillBatch;
    r.seqLen = kPrefillSeqLen;
    double t = static_cast<double>(r.batch * r.seqLen);
    double h = static_cast<double>(m.heads);
    double dqk = static_cast<double>(m.qkDim), dv = static_cast<double>(m.vDim);
    r.workload = std::to_string(r.batch) + " request of " +
                 std::to_string(r.seqLen) + " tokens, " +
                 std::to_string(m.heads) + " heads" +
                 (m.causal == 1 ? ", causal" : "");
    r.bytes = e * t * h * (2.0 * dqk + dv) +
              elementBytes(m, rt::roles::kO) * t * h * dv + 4.0 * t * h;
    double l2 = static_cast<double>(r.seqLen) * static_cast<double>(r.seqLen) *
                static_cast<double>(r.batch);
    r.flops = 2.0 * h * l2 * (dqk + dv) * (m.causal == 1 ? 0.5 : 1.0);
  } else {
    return std::nullopt;
  }
  for (const Machine &machine : kMachines)
    r.floors.push_back(floorOn(machine, r.bytes, r.flops));
  return r;
}
