//===- Arch.h - the table of targets that drives pass choices ---*- C++ -*-===//
#ifndef MLA_TARGET_ARCH_H
#define MLA_TARGET_ARCH_H

#include "mla/Target/MatrixInstr.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace mla {

enum class TargetKind { Host, NVIDIA, AMD };

/// What passes need to know about a chip: thread-group shape, fast-memory
/// size, its matrix instructions, and how LLVM names it.
struct ArchInfo {
  llvm::StringRef name; ///< as in --target: host, sm_80, sm_90a, gfx942...
  TargetKind kind;
  int64_t warpSize;    ///< threads per warp / wave (1 on the host)
  int64_t sharedBytes; ///< shared memory / LDS one workgroup may use
  /// The chip's matrix instructions (MatrixInstrs.def), preferred first.
  llvm::ArrayRef<MatrixInstrId> matrixInstrs;
  int64_t minWorkgroups; ///< workgroups that fill the chip (0: host)
  /// Streaming multiprocessors / compute units (0: host): the workgroups
  /// of one wave where each takes more than half of the shared memory.
  int64_t computeUnits;
  llvm::StringRef triple;   ///< LLVM target triple
  llvm::StringRef cpu;      ///< LLVM CPU name
  llvm::StringRef features; ///< LLVM target features
  /// The most workgroups one launch may have along grid x, y, z.
  std::array<int64_t, 3> maxGrid;
  /// The most work-items (workgroups x workgroup size) along one grid
  /// dim; 0: no such limit.
  int64_t maxGridItems;
  /// Emulation targets (gfx942-emu, ...): the AMD chip whose module they
  /// run on the host emulator; empty for real targets.
  llvm::StringRef emulates = "";

  bool isEmulation() const { return !emulates.empty(); }

  /// The most workgroups along grid dim `dim` (0: x, 1: y, 2: z) for
  /// workgroups of `block` work-items along it.
  int64_t maxWorkgroups(unsigned dim, int64_t block) const {
    int64_t n = maxGrid[dim];
    return maxGridItems > 0 && block > 0 ? std::min(n, maxGridItems / block)
                                         : n;
  }

  // Capability questions: passes ask these instead of comparing vendors.
  bool isGPU() const { return kind != TargetKind::Host; }
  /// Asynchronous global -> shared copies with zero-fill (cp.async).
  bool hasAsyncCopies() const { return kind == TargetKind::NVIDIA; }
  /// Global memory through buffer descriptors (AMD buffer_load/store).
  bool hasBufferOps() const { return kind == TargetKind::AMD; }
  /// Whether a key loop's KV copy of a step with `stages` stages stages the
  /// next tile's page numbers (mla-expand-paging), so that the loop needs
  /// no staging phase and its barrier; `pagesPerTile` is how many pages one
  /// key tile's rows come from (0: the page size is known at run time only).
  /// AMD: proven in the emulator. NVIDIA: single-stage loops whose tiles
  /// may span several pages, the next tile's page numbers copied by a
  /// 4-byte cp.async that lands with the tile's copies (measured on an
  /// H100, docs/Performance.md "Where the chunks kernel's time goes": page
  /// 1 B=128 L=8192 1.3-1.8 % faster; with one page per tile, page 64, the
  /// medium rows were 1-2 % slower, so those keep the per-tile phase); in
  /// pipelined loops the staging stays a phase of its own (staged ahead
  /// synchronously, the H=128 default was 30 % slower). The host has no
  /// barriers to save.
  bool stagesPagesAhead(int64_t stages, int64_t pagesPerTile) const {
    return kind == TargetKind::AMD ||
           (kind == TargetKind::NVIDIA && stages == 1 && pagesPerTile != 1);
  }
  /// Whether mla-distribute writes out a parallel loop's few iterations
  /// per thread instead of looping (so that a copy's loads are all in
  /// flight at once). AMD only: NVIDIA's copies are asynchronous already
  /// and its code is tuned on the H200 as it is.
  bool unrollsThreadLoops() const { return kind == TargetKind::AMD; }
  /// Whether mla-distribute spreads an asynchronous copy phase's rows over
  /// the threads with each thread's 16-byte pieces fixed and its
  /// iterations written out (GPU/ThreadLoops.cpp `blockedCopyMapping`;
  /// the config's `blocked_copies = 0` keeps the linear mapping): the
  /// row's address (page lookup, bounds check) is computed once per row,
  /// the pieces are constant offsets from it. NVIDIA: the linear mapping's
  /// divisions and lookups made its cp.async copies instruction-bound;
  /// blocked, an H100 measured 3-12 % less time on the large decode rows
  /// (page 1 B=128: 2.8 %) and 13-16 % on prefill (docs/Performance.md, "Copies"). AMD copies
  /// through registers (no cp.async) and keeps the linear mapping.
  bool blocksCopyThreads() const { return kind == TargetKind::NVIDIA; }
  /// Whether a key loop's KV copy reads the next tile into registers while
  /// the current tile is computed and writes it to LDS in the next
  /// iteration (mla-distribute), the place of an asynchronous copy into a
  /// second LDS buffer. AMD only: no cp.async, and two 32-key tiles do not
  /// fit gfx942's 64 KiB of LDS; NVIDIA pipelines with cp.async.
  bool prefetchesThroughRegisters() const { return kind == TargetKind::AMD; }
  /// Whether the page lookup of a key loop whose step has `stages` stages,
  /// where it is a phase of its own (no stagesPagesAhead), reads the next
  /// iteration's block-table entries one iteration early, into registers
  /// the loop carries (mla-distribute, GPU/ThreadLoops.cpp), so that the
  /// lookup's barrier waits for no global load. NVIDIA's pipelined loops
  /// (the H=128 decode: one round trip to the block table a key tile
  /// before, with the whole workgroup waiting at the lookup's barrier);
  /// AMD stages its pages ahead instead, and so do NVIDIA's single-stage
  /// loops whose tiles span several pages.
  bool prefetchesPageLookups(int64_t stages) const {
    return kind == TargetKind::NVIDIA && stages > 1;
  }
  /// Whether the register step may read its queries in place from q, into
  /// registers before the key loop: a prefill's query tile with the rows
  /// past the request's included (its loads are buffer loads, so rows past
  /// q's end read zeros, and the next request's rows are computed and
  /// never stored), and a decode's Sq x H rows of all heads (one
  /// contiguous view). AMD only; elsewhere mla-tile stages the tile (a
  /// prefill's with its rows masked).
  bool readsQueriesInPlace() const { return kind == TargetKind::AMD; }
  /// Whether decode's window loop reads its first chunk's plan rows (4-7,
  /// ChunkSchedule.h planRows) with the window's range, ahead of its chunk
  /// loop, keeping them live across it; otherwise the first chunk reads
  /// them (one round trip after the range instead of two). Not on AMD:
  /// gfx950's H=128 chunks kernel, at 502 VGPRs, spilled 12 bytes with the
  /// four values live.
  bool readsWindowOpeningEarly() const { return kind != TargetKind::AMD; }
  /// The LLVM synchronisation scope of the whole device (every SM / CU):
  /// the fences by which one workgroup's global writes reach another
  /// workgroup of the same launch (decode's fused merge). NVIDIA "device"
  /// (fence.acq_rel.gpu; NVPTX gives atomicrmw no ordering of its own),
  /// AMD "agent", the host the system's ("").
  llvm::StringRef deviceSyncScope() const {
    switch (kind) {
    case TargetKind::NVIDIA:
      return "device";
    case TargetKind::AMD:
      return "agent";
    default:
      return "";
    }
  }
  /// Global vector accesses marked 16-byte aligned become one wide access
  /// (NVIDIA; AMD's buffer operations get no benefit from the mark).
  bool marksVectorAlignment() const { return kind == TargetKind::NVIDIA; }
  /// mla-distribute's register-resident attention step (NVIDIA/FusedStep).
  bool hasRegisterFusedStep() const { return kind == TargetKind::NVIDIA; }
  /// The instruction one warp / wave issues for mla.matmul on operands of
  /// `type` (the first the chip lists), or nullptr: then the scalar FMA.
  const MatrixInstr *matmulInstr(MatrixType type) const {
    for (MatrixInstrId id : matrixInstrs) {
      const MatrixInstr &mi = matrixInstr(id);
      if ((mi.scope == MatrixScope::Warp || mi.scope == MatrixScope::Wave) &&
          mi.type == type)
        return &mi;
    }
    return nullptr;
  }
  /// Warpgroup MMA (Hopper's wgmma.mma_async: 4 warps, operands read from
  /// 128-byte-swizzled shared memory through descriptors).
  bool hasWarpgroupMma() const {
    for (MatrixInstrId id : matrixInstrs)
      if (matrixInstr(id).scope == MatrixScope::Warpgroup)
        return true;
    return false;
  }
  /// Programmatic dependent launch (NVIDIA sm_90 and later: PTX
  /// griddepcontrol): a kernel may start while the one before it in the
  /// stream runs, and waits for it in its own code.
  bool hasDependentLaunch() const {
    unsigned sm = 0;
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    return kind == TargetKind::NVIDIA && cpu.starts_with("sm_") &&
           !cpu.drop_front(3).take_while(digit).getAsInteger(10, sm) &&
           sm >= 90;
  }
  /// Special-function exp2/log2 as intrinsics of this chip's backend.
  llvm::StringRef exp2Intrinsic() const {
    return kind == TargetKind::NVIDIA ? "llvm.nvvm.ex2.approx.ftz.f"
                                      : "llvm.amdgcn.exp2.f32";
  }
  llvm::StringRef log2Intrinsic() const {
    return kind == TargetKind::NVIDIA ? "llvm.nvvm.lg2.approx.ftz.f"
                                      : "llvm.amdgcn.log.f32";
  }
};

/// The entry for `name`, or nullptr.
const ArchInfo *lookupArch(llvm::StringRef name);

/// The chip a pipeline compiles for: `emulates` for an emulation target,
/// the target itself otherwise (nullptr stays nullptr).
const ArchInfo *compiledArch(const ArchInfo *arch);

/// All known targets, for help texts and errors.
llvm::ArrayRef<ArchInfo> allArchs();

/// "host, sm_80, sm_90a, ..." for messages.
std::string archNames();

} // namespace mla

#endif // MLA_TARGET_ARCH_H
