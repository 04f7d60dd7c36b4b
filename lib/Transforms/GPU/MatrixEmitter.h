//===- MatrixEmitter.h - one interface for matrix instructions --*- C++ -*-===//
//
// Library-private: the emitter of one matrix instruction (mla::MatrixInstr,
// include/mla/Target/MatrixInstrs.def) and the one lowering of mla.matmul
// written against it. The generic parts come from the instruction's data:
// where a lane's accumulators sit in the C tile (and their row masks), the
// lanes that share an accumulator row (row maxima and sums by XOR
// shuffles), the distribution of C tiles over warps / waves / threads and
// the K loop. An implementation adds what the data does not say: how the A
// and B fragments are read (ldmatrix, vector loads), the instruction
// itself, and how the accumulators are carried through loops.
// Implementations: mma.sync (NVIDIA/MmaSync.cpp), MFMA (AMD/Mfma.cpp), the
// scalar FMA (MatrixEmitter.cpp); warpgroup MMA (NVIDIA/Wgmma.cpp), whose
// products are asynchronous from shared memory, serves the fused attention
// step alone. The fused steps (NVIDIA/FusedStep.cpp, GPU/RegisterStep.cpp)
// keep operands in registers through the fragment interface.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_GPU_MATRIXEMITTER_H
#define MLA_LIB_TRANSFORMS_GPU_MATRIXEMITTER_H

#include "GPUCommon.h"
#include "mla/Target/MatrixInstr.h"

#include <memory>

namespace mla {

/// This lane's accumulators of the C tile at (m0, n0): element e at
/// (rows[e], cols[e]), inside the matmul's M rows iff ok[e].
struct AccTile {
  mlir::Value m0, n0;
  llvm::SmallVector<mlir::Value> rows, cols, ok;
  /// What an implementation computes once per tile (beginTile).
  llvm::SmallVector<mlir::Value> extra;
};

/// `x` reduced (max or sum) over the lanes of one instruction (`lanes`)
/// that agree on the coordinate `terms` gives: XOR shuffles (within a warp
/// of `warpSize`) across the lane bits the coordinate does not depend on.
/// The max is arith.maximumf (NaN-propagating), or with `maxNum`
/// arith.maxnumf (one v_max_f32 on AMD, where maximumf takes a compare and
/// a select more).
mlir::Value reduceAcrossLanes(mlir::ImplicitLocOpBuilder &b,
                              const LayoutTerm (&terms)[FragLayout::kMaxTerms],
                              int64_t lanes, int64_t warpSize, mlir::Value x,
                              bool isMax, bool maxNum = false);

/// `x` reduced over the lanes that share its row of `instr`'s C layout.
inline mlir::Value reduceAcrossRow(mlir::ImplicitLocOpBuilder &b,
                                   const MatrixInstr &instr, int64_t warpSize,
                                   mlir::Value x, bool isMax) {
  return reduceAcrossLanes(b, instr.c.row, instr.lanes, warpSize, x, isMax);
}

class MatrixEmitter {
public:
  MatrixEmitter(const MatrixInstr &instr, const ThreadInfo &ti)
      : instr(instr), ti(ti) {}
  virtual ~MatrixEmitter() = default;

  const MatrixInstr &instr;
  const ThreadInfo &ti;

  /// Threads issuing one instruction together, and how many such groups
  /// the workgroup has.
  int64_t groupSize() const { return instr.lanes; }
  int64_t groups() const { return ti.threads / groupSize(); }

  /// Before the lowering of `op` (at `b`, in front of it): this thread's
  /// group and lane, and what the implementation reads per op.
  virtual void begin(mlir::ImplicitLocOpBuilder &b, MatmulOp op);
  /// This thread's group and lane (what begin sets for every op).
  void beginLanes(mlir::ImplicitLocOpBuilder &b);
  mlir::Value group, lane;

  /// The C fragment of tile `tile` (row-major over the ceil(M / m) x N / n
  /// tiles of the instruction's shape) for a matmul of `m` rows.
  AccTile accTile(mlir::ImplicitLocOpBuilder &b, mlir::Value tile, int64_t m,
                  int64_t n);

  /// Once per C tile, before its K loop (e.g. the A and B addresses).
  virtual void beginTile(mlir::ImplicitLocOpBuilder &b, MatmulOp op,
                         AccTile &t) {}

  /// The accumulators as loop-carried values, and back.
  virtual llvm::SmallVector<mlir::Value>
  packAcc(mlir::ImplicitLocOpBuilder &b, llvm::ArrayRef<mlir::Value> elems) {
    return llvm::SmallVector<mlir::Value>(elems);
  }
  virtual llvm::SmallVector<mlir::Value>
  unpackAcc(mlir::ImplicitLocOpBuilder &b, mlir::ValueRange carried) {
    return llvm::SmallVector<mlir::Value>(carried);
  }

  /// acc += A[tile rows, k0 : k0 + k] · B(k0 : k0 + k, tile columns) on the
  /// packed accumulators.
  virtual llvm::SmallVector<mlir::Value> step(mlir::ImplicitLocOpBuilder &b,
                                              MatmulOp op, const AccTile &t,
                                              mlir::Value k0,
                                              mlir::ValueRange acc) = 0;

  /// Whether the instruction takes whole register fragments (`multiply`,
  /// and for lowerings that keep their operands in registers, the fragment
  /// interface below).
  virtual bool multipliesFragments() const { return false; }
  /// acc + A · B on register fragments (multipliesFragments only). Each
  /// operand is this lane's registers of it: for MFMA one vector (A and B of
  /// the operand type in the layouts' element order, C of f32); for
  /// mma.sync four, two and four 32-bit registers (A and B two elements per
  /// register, in element order).
  virtual llvm::SmallVector<mlir::Value> multiply(mlir::ImplicitLocOpBuilder &b,
                                                  mlir::ValueRange a,
                                                  mlir::ValueRange bFrag,
                                                  mlir::ValueRange acc) {
    return {};
  }

  // The fragment interface: what a lowering that keeps its operands and
  // accumulators in registers (the fused attention step) asks of the
  // instruction beyond the layouts. Implemented by the emitters whose
  // layouts the fused step takes (mma.sync; warpgroup MMA for the
  // asynchronous products).

  /// Before such a lowering: this thread's group and lane, the lane parts
  /// of its C coordinates (cRowLane, cColLane: laneCoord of the C layout)
  /// and what the loads below need.
  virtual void beginFragments(mlir::ImplicitLocOpBuilder &b);
  mlir::Value cRowLane, cColLane;
  /// Whether this lane is the first of the lanes that share its C row
  /// (those reduceAcrossRow combines): the lane bits the row does not read
  /// are zero.
  mlir::Value rowLeader(mlir::ImplicitLocOpBuilder &b) const;
  /// The A fragment of the M x K tile at (m0, k0) of `mem` (row-major, in
  /// workgroup memory).
  virtual llvm::SmallVector<mlir::Value> loadA(mlir::ImplicitLocOpBuilder &b,
                                               mlir::Value mem, mlir::Value m0,
                                               mlir::Value k0) {
    return {};
  }
  /// The B fragments of the `bTilesPerLoad()` K x N tiles side by side from
  /// (k0, n0 + nOffset): `mem` holds B as N x K (`nMajor`: a row per column
  /// of B) or as K x N.
  virtual llvm::SmallVector<llvm::SmallVector<mlir::Value>>
  loadB(mlir::ImplicitLocOpBuilder &b, mlir::Value mem, mlir::Value k0,
        mlir::Value n0, int64_t nOffset, bool nMajor) {
    return {};
  }
  virtual int64_t bTilesPerLoad() const { return 1; }
  /// The registers of an A fragment from its elements (f32, in the A
  /// layout's element order), converted to the operand type.
  virtual llvm::SmallVector<mlir::Value>
  packA(mlir::ImplicitLocOpBuilder &b, llvm::ArrayRef<mlir::Value> elems) {
    return {};
  }

  // Asynchronous products from shared memory (warpgroup MMA): operands
  // through descriptors, issued between a fence and a commit, waited for.

  /// Whether the instruction reads B (and optionally A) from shared memory
  /// through descriptors, asynchronously (`multiplyAsync`).
  virtual bool multipliesAsync() const { return false; }
  /// The descriptor of an operand whose first element is at shared byte
  /// address `addr` (i64), leading and stride byte offsets `lbo`, `sbo`.
  virtual mlir::Value descriptor(mlir::ImplicitLocOpBuilder &b,
                                 mlir::Value addr, int64_t lbo, int64_t sbo) {
    return {};
  }
  /// acc (+)= A · B over `n` columns: A from the descriptor `aDesc` or from
  /// registers `aRegs` (the layout of `instr.a`), B from `bDesc`
  /// (`bMNMajor`: rows are K); an empty `acc` is not read.
  virtual llvm::SmallVector<mlir::Value>
  multiplyAsync(mlir::ImplicitLocOpBuilder &b, int64_t n,
                llvm::ArrayRef<mlir::Value> acc, mlir::Value aDesc,
                llvm::ArrayRef<mlir::Value> aRegs, mlir::Value bDesc,
                bool bMNMajor) {
    return {};
  }
  /// Before the first product of a group / after its last one / waiting
  /// until at most `pending` groups are in flight.
  virtual void fence(mlir::ImplicitLocOpBuilder &b) {}
  virtual void commit(mlir::ImplicitLocOpBuilder &b) {}
  virtual void wait(mlir::ImplicitLocOpBuilder &b, int64_t pending) {}
  /// Registers the compiler may not move across the products' issue or
  /// wait (their values pass through unchanged).
  virtual llvm::SmallVector<mlir::Value>
  fenceRegisters(mlir::ImplicitLocOpBuilder &b,
                 llvm::ArrayRef<mlir::Value> regs) {
    return llvm::SmallVector<mlir::Value>(regs);
  }

  /// Whether a product accumulating in a loop keeps its accumulators in
  /// registers across the loop (lowerMatmul's hoisting).
  virtual bool keepsAccumulatorsInLoops() const { return false; }

  /// The lane part of a fragment coordinate (element terms left out), or
  /// null when it has none.
  mlir::Value laneCoord(mlir::ImplicitLocOpBuilder &b,
                        const LayoutTerm (&terms)[FragLayout::kMaxTerms]) const;
  /// The element part of a fragment coordinate (a compile-time constant).
  static int64_t elemCoord(const LayoutTerm (&terms)[FragLayout::kMaxTerms],
                           int64_t e);
};

/// The emitter of `instr` (a warp's, warpgroup's or wave's instruction, or
/// the scalar FMA). mla.matmul takes the ones that implement `step`: all
/// but warpgroup MMA.
std::unique_ptr<MatrixEmitter> createMatrixEmitter(const MatrixInstr &instr,
                                                   const ThreadInfo &ti);

/// mla.matmul through `em`: C tiles spread over the groups, each walking K
/// in the instruction's steps with its accumulators in registers, rows past
/// M read as zero and not stored, then a barrier. With
/// `keepsAccumulatorsInLoops`, the accumulating product at the end of a
/// loop whose C tile nothing else in the loop touches keeps its
/// accumulators in registers across the loop.
void lowerMatmul(MatmulOp op, MatrixEmitter &em);

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_GPU_MATRIXEMITTER_H
