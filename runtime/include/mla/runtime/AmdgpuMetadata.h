//===- AmdgpuMetadata.h - AMDGPU code object metadata -----------*- C++ -*-===//
//
// Reads what an AMD GPU code object (an HSA code object, as mla-compile
// --target=gfx* emits it) declares about its kernels, without ROCm: the
// ELF64 little-endian EM_AMDGPU file, its NT_AMDGPU_METADATA note (owner
// "AMDGPU", type 32; code object v3 and newer) and the MessagePack map in
// it. Then checks a code object against a manifest target: what the HIP
// backend verifies before loading, and what the end-to-end tests compare
// with llvm-readelf.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_AMDGPUMETADATA_H
#define MLA_RUNTIME_AMDGPUMETADATA_H

#include "mla/runtime/KernelParams.h"
#include "mla/runtime/Manifest.h"
#include "mla/runtime/Status.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mla::rt {

/// ELF machine number of AMD GPU code objects.
constexpr uint16_t kElfMachineAmdgpu = 224;
/// Note type of the MessagePack metadata (owner "AMDGPU").
constexpr uint32_t kNoteAmdgpuMetadata = 32;

/// One entry of a kernel's `.args`.
struct AmdgpuKernelArg {
  /// `.offset` and `.size` in the kernarg segment, in bytes.
  uint64_t offset = 0;
  uint64_t size = 0;
  /// `.value_kind`: "global_buffer", "by_value", "hidden_block_count_x", ...
  std::string valueKind;
  /// `.name`; empty when absent.
  std::string name;
  /// `.address_space` ("global", "generic", ...); empty when absent.
  std::string addressSpace;

  /// Hidden arguments (`hidden_*`) are filled by the HIP runtime.
  bool isHidden() const { return valueKind.rfind("hidden_", 0) == 0; }
};

/// One entry of `amdhsa.kernels`.
struct AmdgpuKernelMetadata {
  /// `.name` (the source name, e.g. "decode_k0") and `.symbol` (its kernel
  /// descriptor, "decode_k0.kd").
  std::string name;
  std::string symbol;
  uint64_t kernargSegmentSize = 0;
  uint64_t kernargSegmentAlign = 0;
  /// Static LDS bytes per workgroup (dynamic LDS comes on top at launch).
  uint64_t groupSegmentFixedSize = 0;
  /// Scratch bytes per work-item.
  uint64_t privateSegmentFixedSize = 0;
  uint64_t wavefrontSize = 0;
  uint64_t sgprCount = 0;
  uint64_t vgprCount = 0;
  /// `.agpr_count` (gfx90a and newer); absent on older targets.
  std::optional<uint64_t> agprCount;
  uint64_t maxFlatWorkgroupSize = 0;
  bool usesDynamicStack = false;
  /// `.reqd_workgroup_size` when the kernel declares one.
  std::optional<std::array<uint64_t, 3>> reqdWorkgroupSize;
  /// In kernarg order, hidden ones included.
  std::vector<AmdgpuKernelArg> args;
};

/// The metadata of one code object.
struct AmdgpuMetadata {
  /// `amdhsa.version`, e.g. {1, 2} (code object v5).
  std::vector<uint64_t> version;
  /// `amdhsa.target`, e.g. "amdgcn-amd-amdhsa--gfx942" or
  /// "amdgcn-amd-amdhsa--gfx90a:xnack-".
  std::string target;
  /// In metadata order.
  std::vector<AmdgpuKernelMetadata> kernels;
  /// The ELF header's e_flags (EF_AMDGPU_MACH in the low byte).
  uint32_t elfFlags = 0;

  /// The kernel whose `.name` is `name`; nullptr when absent.
  const AmdgpuKernelMetadata *findKernel(std::string_view name) const;
  /// The processor of `target`, e.g. "gfx942".
  std::string processor() const;
};

/// Parses a code object. Errors are InvalidArgument, one line starting with
/// "AMDGPU code object: ": a truncated or non-ELF64-LE file, another
/// machine, note tables outside the file, no NT_AMDGPU_METADATA note,
/// malformed or unsupported MessagePack (ext types), a missing key or a
/// value of the wrong type. Never reads outside [data, data + size).
Expected<AmdgpuMetadata> parseAmdgpuMetadata(const uint8_t *data, size_t size);

/// The processor of a target ID or an HIP arch name: "gfx942" for
/// "amdgcn-amd-amdhsa--gfx942", "gfx942:sramecc+:xnack-" and "gfx942".
std::string amdgpuProcessor(std::string_view targetId);

/// Whether code compiled for target ID `codeTarget` (a processor and
/// optional `:feature+` / `:feature-` settings, with or without the
/// "amdgcn-amd-amdhsa--" prefix) runs on a device whose HIP arch name is
/// `deviceArch`: same processor, and every feature the code fixes is set
/// the same way on the device (a feature the code leaves out runs either
/// way).
bool amdgpuTargetRuns(std::string_view codeTarget, std::string_view deviceArch);

/// What the device offers, for checkAmdgpuCodeObject; 0 / false skips the
/// check.
struct AmdgpuDeviceLimits {
  /// LDS bytes per workgroup (static + dynamic).
  int64_t ldsBytes = 0;
  /// Wavefront size of the device (64 on CDNA).
  int64_t wavefrontSize = 64;
  /// Accept kernels that use scratch (a private segment or a dynamic
  /// stack).
  bool allowScratch = false;
};

/// Checks a code object's metadata against a manifest target, per launch:
///  * the entry exists as a kernel;
///  * its wavefront size is limits.wavefrontSize;
///  * it uses no scratch (`.private_segment_fixed_size` 0 and no dynamic
///    stack) unless limits.allowScratch;
///  * the block has at most `.max_flat_workgroup_size` threads, and equals
///    `.reqd_workgroup_size` when the kernel declares one;
///  * `.group_segment_fixed_size` + the launch's `shared` fits
///    limits.ldsBytes (when not 0);
///  * its explicit (non-hidden) `.args` are exactly the layout the runtime
///    packs for the launch's arguments (kernargLayout of launchParams):
///    same count, offsets, sizes, pointers as `global_buffer` and values as
///    `by_value`; and `.kernarg_segment_size` covers them.
/// The first mismatch is returned as one line naming the launch (and the
/// manifest argument): InvalidPackage for a code object that does not match
/// its manifest, Unsupported for a device limit.
Status checkAmdgpuCodeObject(const AmdgpuMetadata &metadata,
                             const Manifest &manifest, const TargetSpec &target,
                             const AmdgpuDeviceLimits &limits = {});

/// The kernarg check of checkAmdgpuCodeObject for one kernel: its explicit
/// args against kernargLayout(params). InvalidPackage, e.g. "kernel
/// 'decode_k0': kernel argument 16 (scalar 'scale', f32) is at offset 128
/// (4 bytes, by_value) in the code object, the runtime packs it at offset
/// 132 (4 bytes)".
Status checkKernargLayout(const AmdgpuKernelMetadata &kernel,
                          const std::vector<LaunchParam> &params);

} // namespace mla::rt

#endif // MLA_RUNTIME_AMDGPUMETADATA_H
