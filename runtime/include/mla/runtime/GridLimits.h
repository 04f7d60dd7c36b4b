//===- GridLimits.h - The largest grids each kind of target runs -*- C++
//-*-===//
//
// How many workgroups one launch may have per grid dimension on each kind
// of target: the one table both sides read. The compiler's target table
// (lib/Target/Arch.cpp, ArchInfo::maxGrid / maxGridItems) takes its values
// from here to refuse constant grids it cannot launch; the runtime checks
// the grids it computes at launch from argument shapes against the loaded
// target's limits before anything runs (Kernel::launch, Kernel::validate).
// Header-only and free of LLVM and MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_GRIDLIMITS_H
#define MLA_RUNTIME_GRIDLIMITS_H

#include <array>
#include <cstdint>
#include <string_view>

namespace mla::rt {

struct GridLimits {
  /// The most workgroups along grid x, y, z.
  std::array<int64_t, 3> maxWorkgroups;
  /// The most work-items (workgroups x workgroup size) along one grid dim;
  /// 0: no such limit.
  int64_t maxWorkItems;
  /// How messages name the limits.
  const char *what;

  /// The most workgroups along `dim` for workgroups of `block` work-items
  /// along it.
  constexpr int64_t maxAlong(int dim, int64_t block) const {
    int64_t n = maxWorkgroups[dim];
    if (maxWorkItems > 0 && block > 0 && maxWorkItems / block < n)
      n = maxWorkItems / block;
    return n;
  }
};

/// Host workgroups keep their tiles on the stack of the thread that runs
/// them. The runtime's pool threads have kHostThreadStackBytes of stack; a
/// calling thread with less than kHostCallerStackBytes free leaves its
/// launches to them (ThreadPool); the compiler keeps one workgroup's tiles
/// within kHostTileStackBytes (ArchInfo's shared bytes for the host).
inline constexpr int64_t kHostThreadStackBytes = int64_t{8} << 20;
inline constexpr int64_t kHostTileStackBytes = kHostThreadStackBytes / 2;
inline constexpr int64_t kHostCallerStackBytes =
    kHostTileStackBytes + (int64_t{1} << 20);

/// The host's thread pool counts workgroups in int64_t.
inline constexpr GridLimits kHostGridLimits = {
    {INT64_MAX, INT64_MAX, INT64_MAX}, 0, "the host: 2^63 - 1 per dim"};

/// CUDA: gridDim.x up to 2^31 - 1, gridDim.y and gridDim.z up to 65535 (the
/// CUDA C++ Programming Guide's compute-capability table, sm_30 onwards);
/// no separate work-item limit.
inline constexpr GridLimits kCudaGridLimits = {
    {(int64_t{1} << 31) - 1, 65535, 65535},
    0,
    "CUDA: x < 2^31, y and z <= 65535"};

/// HSA (AMD GPUs and the AMD emulator, which runs the same program): the
/// AQL dispatch packet's grid_size_x/y/z are 32-bit counts of work-items,
/// so workgroups x workgroup size <= 2^32 - 1 along each dim.
inline constexpr GridLimits kHsaGridLimits = {
    {(int64_t{1} << 32) - 1, (int64_t{1} << 32) - 1, (int64_t{1} << 32) - 1},
    (int64_t{1} << 32) - 1,
    "HSA: grid x block < 2^32 work-items per dim"};

/// The limits of code for `target` (a manifest target name: host-x86_64,
/// sm_80, sm_90a, gfx942, gfx942-emu, ...; the compiler's `host` too);
/// nullptr for a target of no known kind.
constexpr const GridLimits *gridLimitsOf(std::string_view target) {
  if (target == "host" || target.substr(0, 5) == "host-")
    return &kHostGridLimits;
  if (target.substr(0, 3) == "sm_")
    return &kCudaGridLimits;
  if (target.substr(0, 3) == "gfx")
    return &kHsaGridLimits;
  return nullptr;
}

} // namespace mla::rt

#endif // MLA_RUNTIME_GRIDLIMITS_H
