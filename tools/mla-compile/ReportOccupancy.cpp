//===- ReportOccupancy.cpp - --report: resident workgroups per CU / SM ----===//
//
// AMD (CDNA2-4, wave64), as LLVM's AMDGPU backend models it
// (AMDGPUBaseInfo.cpp: getNumWavesPerEUWithNumVGPRs,
// getOccupancyWithNumSGPRs, getMaxWorkGroupsPerCU) and AMDGPUUsage
// documents the kernel descriptor's granules:
//  * a CU has 4 SIMDs; a SIMD holds at most 8 waves (gfx90a and later);
//  * VGPRs and AGPRs share one file of 512 registers per lane and SIMD,
//    allocated in granules of 8 (the note's `.vgpr_count` on these chips is
//    already the unified count: arch VGPRs rounded up to 4, plus AGPRs);
//  * SGPRs: at most 8 waves up to 100 SGPRs, 7 above (GFX8-GFX9 table);
//  * LDS: the CU's LDS (64 KiB on gfx90a/gfx942, 160 KiB on gfx950: the
//    target table's per-workgroup limit, which on CDNA is the whole CU's)
//    in granules of 128 dwords (512 bytes), 320 dwords (1280 bytes) on
//    gfx950;
//  * a workgroup of N waves spreads over the SIMDs: registers for W waves
//    per SIMD hold floor(4 W / N) workgroups; workgroups of more than one
//    wave take one of 16 barriers.
// NVIDIA (sm_80 A100, sm_90a H100/H200), as CUDA's occupancy calculator:
// shared memory per SM (164 KiB, 228 KiB) with 1 KiB reserved per CTA, in
// 128-byte units; 2048 threads and 32 CTAs per SM. Registers are not known
// without ptxas, so the result is an upper bound.
//
//===----------------------------------------------------------------------===//

#include "Report.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mla;
using namespace mla::report;
using llvm::StringRef;

namespace {

int64_t alignTo(int64_t n, int64_t granule) {
  return (n + granule - 1) / granule * granule;
}

int64_t ceilDiv(int64_t n, int64_t d) { return (n + d - 1) / d; }

struct AmdCu {
  StringRef chip;
  /// LDS allocation granule, bytes.
  int64_t ldsGranule;
};

constexpr int64_t kSimdsPerCu = 4;
constexpr int64_t kMaxWavesPerSimd = 8;
constexpr int64_t kVgprsPerSimdLane = 512;
constexpr int64_t kVgprGranule = 8;
constexpr int64_t kBarriersPerCu = 16;
constexpr int64_t kAmdWave = 64;

const AmdCu kAmdCus[] = {{"gfx90a", 512}, {"gfx942", 512}, {"gfx950", 1280}};

struct NvidiaSm {
  StringRef chip;
  int64_t sharedPerSm;
};

constexpr int64_t kSharedReservedPerCta = 1024;
constexpr int64_t kSharedGranule = 128;
constexpr int64_t kThreadsPerSm = 2048;
constexpr int64_t kCtasPerSm = 32;
constexpr int64_t kWarp = 32;

const NvidiaSm kNvidiaSms[] = {{"sm_80", 164 * 1024}, {"sm_90a", 228 * 1024}};

/// Fills `limitedBy` (the limits reaching the minimum) and `workgroups`.
void settle(Occupancy &occ) {
  std::optional<int64_t> least;
  for (const OccupancyLimit &l : occ.limits)
    if (l.workgroups && (!least || *l.workgroups < *least))
      least = l.workgroups;
  occ.workgroups = least.value_or(0);
  for (const OccupancyLimit &l : occ.limits)
    if (l.workgroups && *l.workgroups == occ.workgroups)
      occ.limitedBy.push_back(l.name);
}

/// Waves per SIMD the unified VGPR file holds for `vgprs` per lane.
int64_t vgprWaves(int64_t vgprs) {
  int64_t allocated = alignTo(std::max<int64_t>(vgprs, 1), kVgprGranule);
  return std::min(kMaxWavesPerSimd, kVgprsPerSimdLane / allocated);
}

/// Waves per SIMD for `sgprs` (GFX8-GFX9: 10 up to 80, 9 up to 88, 8 up to
/// 100, else 7), capped at the SIMD's 8.
int64_t sgprWaves(int64_t sgprs) {
  int64_t waves = sgprs <= 80 ? 10 : sgprs <= 88 ? 9 : sgprs <= 100 ? 8 : 7;
  return std::min(kMaxWavesPerSimd, waves);
}

} // namespace

std::optional<Occupancy> mla::report::amdOccupancy(StringRef chip,
                                                   int64_t vgprs, int64_t sgprs,
                                                   int64_t ldsBytes,
                                                   int64_t threads) {
  const AmdCu *cu =
      llvm::find_if(kAmdCus, [&](const AmdCu &c) { return c.chip == chip; });
  const ArchInfo *arch = lookupArch(chip);
  if (cu == std::end(kAmdCus) || !arch || threads < 1)
    return std::nullopt;
  int64_t n = ceilDiv(threads, kAmdWave);
  Occupancy occ;
  occ.unit = "CU";
  int64_t vw = vgprWaves(vgprs);
  occ.limits.push_back(
      {"vgpr", "VGPRs", kSimdsPerCu * vw / n,
       std::to_string(vgprs) + " VGPRs+AGPRs per lane, allocated " +
           std::to_string(alignTo(std::max<int64_t>(vgprs, 1), kVgprGranule)) +
           " of " + std::to_string(kVgprsPerSimdLane) + ": " +
           plural(vw, "wave") + " per SIMD"});
  int64_t sw = sgprWaves(sgprs);
  occ.limits.push_back(
      {"sgpr", "SGPRs", kSimdsPerCu * sw / n,
       std::to_string(sgprs) + " SGPRs: " + plural(sw, "wave") + " per SIMD"});
  int64_t ldsCu = arch->sharedBytes;
  if (ldsBytes > 0) {
    int64_t allocated = alignTo(ldsBytes, cu->ldsGranule);
    occ.limits.push_back({"lds", "LDS", ldsCu / allocated,
                          std::to_string(ldsBytes) + " bytes, allocated " +
                              std::to_string(allocated) + " of " +
                              std::to_string(ldsCu) + " per CU"});
  } else {
    occ.limits.push_back({"lds", "LDS", std::nullopt, "no LDS"});
  }
  occ.limits.push_back(
      {"waves", "wave slots", kSimdsPerCu * kMaxWavesPerSimd / n,
       plural(n, "wave") + " per workgroup, " +
           std::to_string(kMaxWavesPerSimd) + " per SIMD at most"});
  occ.limits.push_back(
      {"barriers", "barriers",
       n > 1 ? std::optional<int64_t>(kBarriersPerCu) : std::nullopt,
       n > 1 ? std::to_string(kBarriersPerCu) + " per CU, one per workgroup"
             : "a one-wave workgroup takes no barrier"});
  settle(occ);
  occ.waves = occ.workgroups * n;
  occ.wavesPerSimd = static_cast<double>(occ.waves) / kSimdsPerCu;
  return occ;
}

std::optional<Occupancy> mla::report::nvidiaOccupancy(StringRef chip,
                                                      int64_t sharedBytes,
                                                      int64_t threads) {
  const NvidiaSm *sm = llvm::find_if(
      kNvidiaSms, [&](const NvidiaSm &s) { return s.chip == chip; });
  if (sm == std::end(kNvidiaSms) || threads < 1)
    return std::nullopt;
  int64_t warps = ceilDiv(threads, kWarp);
  Occupancy occ;
  occ.unit = "SM";
  occ.upperBound = true;
  int64_t allocated =
      alignTo(std::max<int64_t>(sharedBytes, 0) + kSharedReservedPerCta,
              kSharedGranule);
  occ.limits.push_back({"shared", "shared memory", sm->sharedPerSm / allocated,
                        std::to_string(sharedBytes) + " bytes + " +
                            std::to_string(kSharedReservedPerCta) +
                            " reserved, allocated " +
                            std::to_string(allocated) + " of " +
                            std::to_string(sm->sharedPerSm) + " per SM"});
  occ.limits.push_back({"threads", "threads", kThreadsPerSm / (warps * kWarp),
                        std::to_string(warps * kWarp) + " threads of " +
                            std::to_string(kThreadsPerSm) + " per SM"});
  occ.limits.push_back({"ctas", "CTA slots", kCtasPerSm,
                        std::to_string(kCtasPerSm) + " per SM at most"});
  occ.limits.push_back(
      {"registers", "registers", std::nullopt, "unknown: ptxas not run"});
  settle(occ);
  occ.waves = occ.workgroups * warps;
  return occ;
}
