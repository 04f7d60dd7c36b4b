//===- EmuAbi.h - The AMD emulator's code-object ABI ------------*- C++ -*-===//
//
// The one description of how an emulated AMD code object (manifest targets
// gfx90a-emu, gfx942-emu, gfx950-emu) talks to the runtime's emulator. The
// compiler (lib/Transforms/AMD/EmulateAMDGPU*.cpp) builds its calls and
// tables from this file; the runtime (runtime/lib/emu/) implements them.
//
// An emulated code object is a host shared object. Each kernel of the
// manifest is an exported `void NAME(void **args)` that runs ONE lane of a
// workgroup; args[i] points to a host memref descriptor or scalar, as for
// host kernels. Everything a lane asks of the GPU (its ids, barriers, LDS,
// buffer accesses, MFMA and other wave-collective operations) is a call
// through the table `kEmuHookTable` that the object defines and the
// runtime fills after loading it.
//
// Plain C types only: this header is included by the compiler and by the
// runtime, neither of which depends on the other's libraries here.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_EMUABI_H
#define MLA_RUNTIME_EMUABI_H

#include <cstdint>

namespace mla::emu {

/// Bumped whenever a hook's meaning or signature changes.
constexpr int32_t kEmuAbiVersion = 1;

/// Symbols an emulated code object defines.
constexpr const char *kEmuHookTable = "__mla_emu_hooks";      // [N x ptr]
constexpr const char *kEmuAbiSymbol = "__mla_emu_abi";        // i32 version
constexpr const char *kEmuSiteTable = "__mla_emu_sites";      // [S x ptr]
constexpr const char *kEmuSiteCount = "__mla_emu_site_count"; // i32 S

/// The hooks, in table order:
///   X(Enumerator, symbol, C return type, C parameters, signature)
/// The signature is what the compiler builds the LLVM function type from:
/// `ret(params)` with v = void, i32, i64, p = pointer, p3 = LDS pointer,
/// p7 = buffer pointer, s = the i32 `site`: an index into kEmuSiteTable (the
/// op's source location, for messages), always the last parameter.
#define MLA_EMU_HOOKS(X)                                                       \
  /* gpu.thread_id/block_id/block_dim/grid_dim: DimCode below. */              \
  X(Dim, "__mla_emu_dim", int64_t, (int32_t code), "i64(i32)")                 \
  /* gpu.barrier: a workgroup barrier. */                                      \
  X(Barrier, "__mla_emu_barrier", void, (int32_t site), "v(s)")                \
  /* gpu.dynamic_shared_memory: the workgroup's LDS and its size. */           \
  X(LdsBase, "__mla_emu_lds_base", void *, (void), "p3()")                     \
  X(LdsBytes, "__mla_emu_lds_bytes", int64_t, (void), "i64()")                 \
  /* Loads/stores through an LDS pointer: `bytes` bytes to/from `data`. */     \
  X(LdsLoad, "__mla_emu_lds_load", void,                                       \
    (void *p, int64_t bytes, void *data, int32_t site), "v(p3,i64,p,s)")       \
  X(LdsStore, "__mla_emu_lds_store", void,                                     \
    (void *p, int64_t bytes, const void *data, int32_t site), "v(p3,i64,p,s)") \
  /* amdgpu.fat_raw_buffer_cast: a buffer resource over `base` with            \
     `numRecords` bytes (32-bit, as the descriptor's field). */                \
  X(MakeBuffer, "__mla_emu_make_buffer", void *,                               \
    (void *base, int32_t numRecords), "p7(p,i32)")                             \
  X(BufferLoad, "__mla_emu_buffer_load", void,                                 \
    (void *p, int64_t bytes, void *data, int32_t site), "v(p7,i64,p,s)")       \
  X(BufferStore, "__mla_emu_buffer_store", void,                               \
    (void *p, int64_t bytes, const void *data, int32_t site), "v(p7,i64,p,s)") \
  /* llvm.atomicrmw add (i32) through a buffer pointer: the old value. */      \
  X(BufferAtomicAdd, "__mla_emu_buffer_atomic_add", int32_t,                   \
    (void *p, int32_t value, int32_t site), "i32(p7,i32,s)")                   \
  /* amdgpu.mfma (wave-collective): D = A * B + C with this lane's             \
     operands; `shape` is MfmaShape, `type` MfmaType. */                       \
  X(Mfma, "__mla_emu_mfma", void,                                              \
    (int32_t shape, int32_t type, const void *a, const void *b, const void *c, \
     void *d, int32_t site),                                                   \
    "v(i32,i32,p,p,p,p,s)")                                                    \
  /* gpu.shuffle (wave-collective): `value` (32 bits) of lane `src` of this    \
     wave; the caller has already replaced an invalid src by its own lane. */  \
  X(Shuffle, "__mla_emu_shuffle", int32_t,                                     \
    (int32_t value, int32_t src, int32_t site), "i32(i32,i32,s)")

enum class Hook : int32_t {
#define MLA_EMU_ENUM(e, sym, ret, params, sig) e,
  MLA_EMU_HOOKS(MLA_EMU_ENUM)
#undef MLA_EMU_ENUM
      Count
};

/// Dim hook codes: 3 * kind + dimension (x = 0, y = 1, z = 2).
/// LaneId (dimension 0 only) is the lane within the wave (gpu.lane_id).
enum class DimKind : int32_t {
  ThreadId = 0,
  BlockId = 1,
  BlockDim = 2,
  GridDim = 3,
  LaneId = 4
};
constexpr int32_t dimCode(DimKind kind, int32_t dim) {
  return 3 * static_cast<int32_t>(kind) + dim;
}

/// MFMA shapes (M x N x K, one block) the emulator implements.
enum class MfmaShape : int32_t { M16N16K16 = 0, M32N32K8 = 1, M16N16K32 = 2 };
/// MFMA source element types; accumulation is f32 in every case.
enum class MfmaType : int32_t { BF16 = 0, F16 = 1 };

} // namespace mla::emu

#endif // MLA_RUNTIME_EMUABI_H
