//===- Emulator.h - Runs emulated AMD workgroups ----------------*- C++ -*-===//
//
// The execution model of the AMD emulator (docs/AMD.md, "The emulator"):
//  * a workgroup's lanes are fibers, grouped into waves of 64 (wave64) in
//    linear thread-id order;
//  * the scheduler runs one wave at a time; within a wave each lane runs
//    until it blocks. A wave-collective operation (MFMA, shuffle) executes
//    when all lanes of the wave have reached it -- the same operation at the
//    same site -- and every lane then continues; anything else is a
//    divergence error. A barrier releases when every lane still running
//    has reached one; waves that have finished no longer take part;
//  * between barriers the waves run in the order of EmuOrder: forward,
//    reverse, or a seeded random order drawn again at every barrier (lanes
//    within a wave in the same order);
//  * LDS is one buffer of the launch's LDS bytes per workgroup, filled with
//    0xFF bytes (NaN) at the start; every access is checked against its
//    size and, with a shadow record per byte, for races: a byte written by
//    one wave and read or written by another in the same barrier epoch, or
//    written by one lane and read or written by another lane of the same
//    wave with no wave-collective operation between;
//  * buffers (amdgpu.fat_raw_buffer_cast) follow the hardware's range check:
//    a load returns 0 and a store is dropped per 4-byte piece that does not
//    lie below num_records; an offset outside [0, 2^32) is an error.
// The first problem found fails the launch with a message naming the op's
// source location.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LIB_EMU_EMULATOR_H
#define MLA_RUNTIME_LIB_EMU_EMULATOR_H

#include "mla/runtime/Status.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mla::rt::emu {

enum class EmuOrder { Forward, Reverse, Random };

struct EmuOptions {
  EmuOrder order = EmuOrder::Forward;
  uint64_t seed = 0;
};

/// One lane of a kernel: `void entry(void **args)`.
using LaneEntry = void (*)(void **args);

/// What a launch of one emulated kernel needs.
struct EmuKernel {
  LaneEntry entry = nullptr;
  /// Source locations of the kernel's sites (messages).
  const char *const *sites = nullptr;
  int32_t siteCount = 0;
};

struct EmuLaunch {
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
  int64_t ldsBytes = 0;
  void **args = nullptr;
};

/// Runs workgroup `blockId` of `launch` on the calling thread. Thread-safe:
/// each thread keeps its own fibers and LDS.
Status runWorkgroup(const EmuKernel &kernel, const EmuLaunch &launch,
                    std::array<int64_t, 3> blockId, const EmuOptions &options);

/// Fills the hook table of a loaded code object (`count` slots, the
/// object's kEmuHookTable). Fails when `count` is not the runtime's.
Status fillHookTable(void **table, int64_t count);

} // namespace mla::rt::emu

#endif // MLA_RUNTIME_LIB_EMU_EMULATOR_H
