//===- EmuBackend.h - The AMD emulator backend ------------------*- C++ -*-===//
//
// Runs the code objects of the AMD emulation targets (manifest targets
// gfx90a-emu, gfx942-emu, gfx950-emu: the chip's kernels exactly as before
// ROCDL conversion, compiled to host lanes by mla-compile) on the host, wave
// by wave, with MFMA, buffer and LDS semantics from AMD's documentation and
// an LDS race checker (docs/AMD.md, "The emulator"). Launches follow the
// manifest's plan like every device: grid, block size, LDS bytes and the
// max-bytes limits. An emulated run proves the AMD-specific code's
// semantics; it says nothing about LLVM's AMDGPU backend or timing, and it
// is not a run on AMD hardware.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_EMUBACKEND_H
#define MLA_RUNTIME_EMUBACKEND_H

#include "mla/runtime/Backend.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace mla::rt {

/// The order in which waves (and the lanes within each) run between
/// barriers. A kernel free of races gives bit-identical results in all.
/// CheckOrders runs every launch three times from the same memory state --
/// forward, reverse and random -- and fails it when any byte of any memref
/// argument differs between the orders.
enum class EmuWaveOrder { Forward, Reverse, Random, CheckOrders };

struct EmuBackendOptions {
  /// Workgroups run in parallel on this many threads, 0 = one per core.
  unsigned threads = 0;
  EmuWaveOrder order = EmuWaveOrder::Forward;
  /// Seeds the random order (redrawn at every barrier of every workgroup).
  uint64_t seed = 1;
};

std::shared_ptr<Backend>
createEmuBackend(const EmuBackendOptions &options = {});

/// Options of the device names "emu" (= "emu:forward"), "emu:reverse",
/// "emu:random" (seed 1), "emu:random:SEED", "emu:check-orders" and
/// "emu:check-orders:SEED"; std::nullopt otherwise.
std::optional<EmuBackendOptions> parseEmuDeviceName(std::string_view name);

/// The AMD chip an emulation target emulates ("gfx942" for "gfx942-emu"),
/// or empty when `target` is not one.
std::string_view emulatedChip(std::string_view target);

} // namespace mla::rt

#endif // MLA_RUNTIME_EMUBACKEND_H
