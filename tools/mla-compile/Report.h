//===- Report.h - mla-compile --report: what the code objects say -*- C++ -*-===//
//
// `mla-compile --report` (text) and `--report=json`: per kernel of a
// package, what its code object says about it — registers, LDS / shared
// bytes, scratch, occupancy and what limits it, the grid, how often each KV
// row is read, and on AMD the key loop's instruction counts read from the
// ISA — and a roofline floor for the package's shapes. The numbers come
// from the code object (the AMDGPU metadata note through the runtime's
// reader, the AMDGCN assembly of the same module, the PTX text) and from
// the package manifest's launch plan; the few that come from the config
// (`kv_reads`, the loop's `keys`) are labelled so. docs/AMD.md, "The
// report", describes every field.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLA_COMPILE_REPORT_H
#define MLA_TOOLS_MLA_COMPILE_REPORT_H

#include "mla/Target/Arch.h"
#include "mla/runtime/Manifest.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mla::report {

/// One target of a package as mla-compile built it.
struct TargetCode {
  /// The target as given to --target (an emulation target stays one).
  const ArchInfo *arch = nullptr;
  /// The manifest's name of the target (host-x86_64, sm_90a, gfx942).
  std::string name;
  /// The code object the package holds for it.
  std::vector<uint8_t> code;
  /// AMD (not emulated): the AMDGCN assembly of the same LLVM module, what
  /// --emit=asm prints. Empty otherwise.
  std::string assembly;
};

//===----------------------------------------------------------------------===//
// ISA (ReportIsa.cpp)
//===----------------------------------------------------------------------===//

/// Instruction counts of a stretch of AMDGCN assembly (static: each
/// instruction once, whichever paths run).
struct IsaCounts {
  int64_t instructions = 0;
  /// v_mfma_* and v_smfmac_*.
  int64_t mfma = 0;
  /// buffer_load_* and the bytes each lane loads with them.
  int64_t bufferLoads = 0, bufferLoadBytes = 0;
  /// ds_read* (LDS reads) and ds_write* (LDS writes), with bytes per lane.
  int64_t ldsReads = 0, ldsReadBytes = 0;
  int64_t ldsWrites = 0, ldsWriteBytes = 0;
  /// s_barrier.
  int64_t barriers = 0;
  /// s_waitcnt, and those of them that wait for vmcnt(0) (no vector memory
  /// load left in flight).
  int64_t waitcnt = 0, waitVmcntZero = 0;
};

/// A loop of the assembly: a header label and the blocks of its back
/// edges' natural loop.
/// The instructions one iteration of a loop runs: the fewest and the most
/// over its paths from the header to a back edge (each block's
/// instructions once). Found where the loop holds no inner loop.
struct PathRange {
  int64_t shortest = 0, longest = 0;
};

struct IsaLoop {
  std::string label;
  /// 1-based lines of the loop's first and last line in the assembly.
  int64_t firstLine = 0, lastLine = 0;
  /// Every instruction of the loop's blocks once (inner loops included).
  IsaCounts counts;
  /// One iteration's paths (none where the loop holds an inner loop).
  std::optional<PathRange> paths;
};

/// The key loop of a kernel's AMDGCN: of the loops (a branch to a label
/// that dominates it: a backward s_cbranch_* or s_branch that closes a
/// cycle, not a jump back to a shared exit block) the one holding the most
/// MFMAs, the innermost of equals; without any MFMA (f32), the one holding
/// the most buffer loads, the outermost of equals.
struct KeyLoop {
  IsaLoop loop;
  /// "mfma" or "buffer_loads": what chose it.
  std::string chosenBy;
  /// The loops nested in it; their bodies are counted once in `loop`.
  std::vector<IsaLoop> inner;
};

/// The function `kernel` of the assembly (from `kernel:` to its
/// .Lfunc_end), or an error naming what is missing.
llvm::Expected<llvm::StringRef> amdgcnFunction(llvm::StringRef assembly,
                                               llvm::StringRef kernel);

/// The key loop of a function's assembly; nullopt when it has no loop.
/// `firstLine` is the line number of the function's first line.
std::optional<KeyLoop> findKeyLoop(llvm::StringRef function,
                                   int64_t firstLine = 1);

/// Instruction counts of a stretch of PTX (static: each instruction once,
/// whichever paths run; PTX, not the SASS ptxas makes of it).
struct PtxCounts {
  int64_t instructions = 0;
  /// mma.sync (warp) and wgmma.mma_async (warpgroup).
  int64_t mma = 0, wgmma = 0;
  /// cp.async copies (not their commits and waits).
  int64_t cpAsync = 0;
  int64_t ldGlobal = 0, stGlobal = 0;
  /// ld.shared and ldmatrix; st.shared.
  int64_t ldShared = 0, stShared = 0;
  /// bar.sync / barrier.sync.
  int64_t barriers = 0;
  /// cp.async.wait_* and wgmma.wait_group.
  int64_t waits = 0;
};

/// The key loop of a kernel's PTX, chosen as findKeyLoop chooses (the
/// most mma/wgmma, the innermost of equals; without any, the most cp.async
/// and global loads, the outermost of equals).
struct PtxLoop {
  std::string label;
  /// 1-based lines of the loop's first and last line in the PTX.
  int64_t firstLine = 0, lastLine = 0;
  PtxCounts counts;
  /// One iteration's paths (none where the loop holds an inner loop).
  std::optional<PathRange> paths;
  /// "mma" or "copies": what chose it.
  std::string chosenBy;
  /// The loops nested in it (label, counts); counted once in `counts`.
  std::vector<std::pair<std::string, PtxCounts>> inner;
};

/// The key loop of the `.entry kernel` of `ptx`; nullopt when there is no
/// such entry or it has no loop.
std::optional<PtxLoop> findPtxKeyLoop(llvm::StringRef ptx,
                                      llvm::StringRef kernel);

/// What a kernel's PTX declares about its launch: `.maxntid`, `.reqntid`,
/// `.maxnreg`, `.minnctapersm`, and the static `.shared` bytes of the
/// variables its body names (function-scope or module-scope).
struct PtxKernel {
  std::optional<std::array<int64_t, 3>> maxntid, reqntid;
  std::optional<int64_t> maxnreg, minnctapersm;
  int64_t staticShared = 0;
};

/// The `.entry kernel` of `ptx`, or an error when there is none.
llvm::Expected<PtxKernel> readPtxKernel(llvm::StringRef ptx,
                                        llvm::StringRef kernel);

//===----------------------------------------------------------------------===//
// Occupancy (ReportOccupancy.cpp)
//===----------------------------------------------------------------------===//

/// "1 wave", "2 waves".
inline std::string plural(int64_t n, llvm::StringRef word) {
  return std::to_string(n) + " " + word.str() + (n == 1 ? "" : "s");
}

/// What one limit allows: `workgroups` per CU / SM (nullopt: no limit).
struct OccupancyLimit {
  /// The limit's key ("vgpr", "lds", ...) and its name in the text.
  std::string name, label;
  std::optional<int64_t> workgroups;
  /// How it was computed, in words.
  std::string detail;
};

/// Resident workgroups of one kernel on one CU (AMD) or SM (NVIDIA).
struct Occupancy {
  /// "CU" or "SM".
  std::string unit;
  int64_t workgroups = 0;
  /// Waves per CU (AMD) or warps per SM (NVIDIA).
  int64_t waves = 0;
  /// AMD: waves per CU / SIMDs per CU (fractional when a workgroup has
  /// fewer waves than a CU has SIMDs). NVIDIA: nullopt.
  std::optional<double> wavesPerSimd;
  /// Every limit and what it allows; `limitedBy` names those reaching the
  /// minimum.
  std::vector<OccupancyLimit> limits;
  std::vector<std::string> limitedBy;
  /// NVIDIA: registers are unknown (ptxas not run): an upper bound.
  bool upperBound = false;
};

/// AMD (gfx90a, gfx942, gfx950): from the note's `.vgpr_count` (VGPRs and
/// AGPRs of the unified register file), `.sgpr_count`, the workgroup's LDS
/// bytes and its work-items. nullopt for a chip without occupancy data.
std::optional<Occupancy> amdOccupancy(llvm::StringRef chip, int64_t vgprs,
                                      int64_t sgprs, int64_t ldsBytes,
                                      int64_t threads);

/// NVIDIA (sm_80, sm_90a): from the shared bytes and the threads of a CTA;
/// registers are not known without ptxas, so it is an upper bound.
std::optional<Occupancy> nvidiaOccupancy(llvm::StringRef chip,
                                         int64_t sharedBytes, int64_t threads);

//===----------------------------------------------------------------------===//
// Roofline (ReportRoofline.cpp)
//===----------------------------------------------------------------------===//

struct Machine {
  const char *name;
  double bytesPerSecond;
  double flopsPerSecond;
  /// Where the two numbers come from.
  const char *source;
};

/// The floor on one machine: the longer of the bytes at its bandwidth and
/// the FLOPs at its matrix peak.
struct Floor {
  Machine machine;
  double seconds = 0;
  /// "memory" or "compute": which of the two is longer.
  std::string bound;
};

struct Roofline {
  /// The workload, in words, and its numbers.
  std::string workload;
  int64_t batch = 0, seqLen = 0;
  /// The minimum bytes moved (each input read once, each output written
  /// once) and the FLOPs of the two products.
  double bytes = 0, flops = 0;
  std::vector<Floor> floors;
};

/// The floor of the package's kernel at the DeepSeek benchmark workload of
/// its kind (decode: 128 requests of 8192 keys; prefill: one request of
/// 16384 tokens) on MI300X and H200; nullopt for other kinds.
std::optional<Roofline> rooflineFloor(const rt::Manifest &manifest);

//===----------------------------------------------------------------------===//
// The report (Report.cpp)
//===----------------------------------------------------------------------===//

/// One launch of one target.
struct KernelReport {
  std::string name;
  std::string target;
  /// "host", "nvidia", "amd" or "amd-emulated".
  std::string vendor;
  /// The grid as the manifest's size formulas, and in words.
  std::string grid, gridWords;
  std::array<int64_t, 3> block = {1, 1, 1};
  int64_t threads = 1, waves = 1;
  /// AMD: the metadata note's `.vgpr_count` (VGPRs + AGPRs, unified),
  /// `.agpr_count`, `.sgpr_count`.
  std::optional<int64_t> vgpr, agpr, sgpr;
  /// The registers in words (what is not known is said so).
  std::string registers;
  /// Dynamic (launch plan) + static (code object) shared / LDS bytes.
  std::optional<int64_t> ldsBytes, ldsDynamic, ldsStatic;
  /// AMD: `.private_segment_fixed_size` bytes per work-item.
  std::optional<int64_t> scratchBytes;
  bool dynamicStack = false;
  std::optional<Occupancy> occupancy;
  /// Why there is no occupancy, when there is none.
  std::string occupancyNote;
  /// How many times a decode launch reads each KV row (config fact).
  std::optional<int64_t> kvReads;
  std::string kvReadsNote;
  std::optional<PtxKernel> ptx;
  /// NVIDIA: the key loop's PTX (the keys one iteration covers: loopKeys).
  std::optional<PtxLoop> ptxLoop;
  /// AMD: the key loop, and the keys one iteration covers (config fact).
  std::optional<KeyLoop> loop;
  std::optional<int64_t> loopKeys;
  std::string loopNote;
  /// The query rows of one workgroup (config fact: decode head_group x
  /// q_len, prefill tile_q), and what the key loop costs the workgroup per
  /// key and 16 of them: instructions x waves / keys / (rows / 16), the unit
  /// of a 16-row kernel such as AITER's subQ16 decode.
  std::optional<int64_t> loopRows;
  std::string loopRowsNote;
  std::optional<double> workgroupPerKeyPer16Rows() const;
};

struct Report {
  /// The kernel kind and its shape in words.
  std::string kernel, shape;
  /// Per target, its config line.
  std::vector<std::pair<std::string, std::string>> configs;
  std::vector<KernelReport> kernels;
  std::optional<Roofline> roofline;
};

/// The report of a package: its manifest and every target's code.
llvm::Expected<Report> buildReport(const rt::Manifest &manifest,
                                   llvm::ArrayRef<TargetCode> targets);

void printReportText(const Report &report, llvm::raw_ostream &os);
void printReportJson(const Report &report, llvm::raw_ostream &os);

} // namespace mla::report

#endif // MLA_TOOLS_MLA_COMPILE_REPORT_H
