//===- Arch.cpp - the target table ----------------------------------------===//
#include "mla/Target/Arch.h"
#include "mla/runtime/GridLimits.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <string>

namespace mla {

using I = MatrixInstrId;
static const MatrixInstrId kAmpere[] = {I::MmaSyncM16N8K16BF16,
                                        I::MmaSyncM16N8K16F16};
static const MatrixInstrId kHopper[] = {
    I::MmaSyncM16N8K16BF16, I::MmaSyncM16N8K16F16, I::WgmmaM64N8K16BF16,
    I::WgmmaM64N8K16F16};
static const MatrixInstrId kCdna23[] = {
    I::MfmaF32M16N16K16BF16, I::MfmaF32M16N16K16F16, I::MfmaF32M32N32K8BF16,
    I::MfmaF32M32N32K8F16};
static const MatrixInstrId kCdna4[] = {
    I::MfmaF32M16N16K16BF16, I::MfmaF32M16N16K16F16,  I::MfmaF32M32N32K8BF16,
    I::MfmaF32M32N32K8F16,   I::MfmaF32M16N16K32BF16, I::MfmaF32M16N16K32F16};

// Grid limits, in workgroups per dim and work-items per dim: the runtime's
// table (mla/runtime/GridLimits.h), which checks the grids it computes at
// launch against the same numbers.
constexpr std::array<int64_t, 3> kHostGrid =
    mla::rt::kHostGridLimits.maxWorkgroups;
constexpr std::array<int64_t, 3> kCudaGrid =
    mla::rt::kCudaGridLimits.maxWorkgroups;
constexpr std::array<int64_t, 3> kHsaGrid =
    mla::rt::kHsaGridLimits.maxWorkgroups;
constexpr int64_t kHsaGridItems = mla::rt::kHsaGridLimits.maxWorkItems;
static_assert(mla::rt::kHostGridLimits.maxWorkItems == 0 &&
                  mla::rt::kCudaGridLimits.maxWorkItems == 0,
              "ArchInfo gives host and CUDA targets no work-item limit");

static const ArchInfo kArchs[] = {
    // name, kind, warp, shared bytes, matrix instructions, workgroups that
    // fill the chip, SMs / CUs, triple, cpu, features, grid limits
    // (workgroups per dim, work-items per dim)
    // host: a workgroup's tiles live on the stack of the thread that runs
    // it (a pool worker's, or the caller's where it has the room;
    // mla/runtime/GridLimits.h): at most half of a worker's stack.
    {"host",
     TargetKind::Host,
     1,
     mla::rt::kHostTileStackBytes,
     {},
     0,
     0,
     "x86_64-unknown-linux-gnu",
     "x86-64-v3",
     "",
     kHostGrid,
     0},
    // Ampere: 163 KB of shared memory per block (opt-in above 48 KB);
    // mma.sync m16n8k16.
    // Workgroups to fill: two per SM (108 SMs on A100).
    {"sm_80", TargetKind::NVIDIA, 32, 163 * 1024, kAmpere, 216, 108,
     "nvptx64-nvidia-cuda", "sm_80", "+ptx80", kCudaGrid, 0},
    // Hopper: 227 KB per block; mma.sync m16n8k16 and warpgroup MMA
    // (wgmma, used by the fused attention step).
    // 256 workgroups (about two per SM of an H100/H200) measured best for
    // decode on the H200 (docs/Performance.md); 132 SMs.
    {"sm_90a", TargetKind::NVIDIA, 32, 227 * 1024, kHopper, 256, 132,
     "nvptx64-nvidia-cuda", "sm_90a", "+ptx80", kCudaGrid, 0},
    // CDNA2 (MI200): wave64, 64 KB LDS, v_mfma_f32_16x16x16bf16_1k.
    // One LDS-bound workgroup per CU: 110 CUs per MI250X die.
    {"gfx90a", TargetKind::AMD, 64, 64 * 1024, kCdna23, 110, 110,
     "amdgcn-amd-amdhsa", "gfx90a", "", kHsaGrid, kHsaGridItems},
    // CDNA3 (MI300): wave64, 64 KB LDS, v_mfma_f32_16x16x16_bf16.
    // 304 CUs on MI300X.
    {"gfx942", TargetKind::AMD, 64, 64 * 1024, kCdna23, 304, 304,
     "amdgcn-amd-amdhsa", "gfx942", "", kHsaGrid, kHsaGridItems},
    // CDNA4 (MI350): wave64, 160 KB LDS.
    // 256 CUs on MI355X.
    {"gfx950", TargetKind::AMD, 64, 160 * 1024, kCdna4, 256, 256,
     "amdgcn-amd-amdhsa", "gfx950", "", kHsaGrid, kHsaGridItems},
    // The emulation targets: the chip's module exactly as before ROCDL
    // conversion, run as host code by the runtime's AMD emulator
    // (docs/AMD.md). Every field but the name is the chip's.
    {"gfx90a-emu", TargetKind::AMD, 64, 64 * 1024, kCdna23, 110, 110,
     "amdgcn-amd-amdhsa", "gfx90a", "", kHsaGrid, kHsaGridItems, "gfx90a"},
    {"gfx942-emu", TargetKind::AMD, 64, 64 * 1024, kCdna23, 304, 304,
     "amdgcn-amd-amdhsa", "gfx942", "", kHsaGrid, kHsaGridItems, "gfx942"},
    {"gfx950-emu", TargetKind::AMD, 64, 160 * 1024, kCdna4, 256, 256,
     "amdgcn-amd-amdhsa", "gfx950", "", kHsaGrid, kHsaGridItems, "gfx950"},
};

const ArchInfo *lookupArch(llvm::StringRef name) {
  for (const ArchInfo &a : kArchs)
    if (a.name == name)
      return &a;
  return nullptr;
}

const ArchInfo *compiledArch(const ArchInfo *arch) {
  return arch && arch->isEmulation() ? lookupArch(arch->emulates) : arch;
}

llvm::ArrayRef<ArchInfo> allArchs() { return kArchs; }

std::string archNames() {
  return llvm::join(
      llvm::map_range(allArchs(), [](const ArchInfo &a) { return a.name; }),
      ", ");
}

} // namespace mla
