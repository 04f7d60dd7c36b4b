//===- MmaSync.h - mma.sync m16n8k16 fragments and lanes --------*- C++ -*-===//
//
// Library-private: the warp-level mma.sync instruction, where a lane sits
// in its fragments, and its MatrixEmitter; shared by the matmul lowering
// (GPU/MatrixEmitter.cpp) and the fused attention step (FusedStep.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_NVIDIA_MMASYNC_H
#define MLA_LIB_TRANSFORMS_NVIDIA_MMASYNC_H

#include "../GPU/MatrixEmitter.h"

namespace mla::nvidia {

/// Where a lane sits in the mma.sync m16n8k16 fragments and in ldmatrix
/// address patterns: its warp, lane, group (lane / 4: accumulator row),
/// 2·(lane % 4) (accumulator column pair), and the ldmatrix row/column
/// offsets lane % 16, lane % 8, 8·(lane / 16), 8·((lane / 8) % 2).
struct LaneLayout {
  mlir::Value warp, lane, group, quadPos, twoTg, lane16, lane8, laneHi8,
      laneMid8;

  LaneLayout(mlir::ImplicitLocOpBuilder &b, const ThreadInfo &ti);
  /// The fragment interface's (MatrixEmitter::beginFragments): the
  /// accumulator row and column parts from `em`'s C layout, built between
  /// the lane and the ldmatrix offsets.
  LaneLayout(mlir::ImplicitLocOpBuilder &b, const ThreadInfo &ti,
             MatrixEmitter &em);

private:
  void warpAndLane(mlir::ImplicitLocOpBuilder &b, const ThreadInfo &ti);
  void ldmatrixOffsets(mlir::ImplicitLocOpBuilder &b);
};

/// Packs a vector<2xbf16> into the i32 register mma.sync takes, or keeps a
/// vector<2xf16> as is.
mlir::Value mmaOperand(mlir::ImplicitLocOpBuilder &b, mlir::Value pair);

/// One mma.sync m16n8k16 (row.col, f32 accumulation) on bf16/f16
/// registers; returns the four accumulators.
llvm::SmallVector<mlir::Value> mmaM16N8K16(mlir::ImplicitLocOpBuilder &b,
                                           mlir::Type elem,
                                           llvm::ArrayRef<mlir::Value> aRegs,
                                           llvm::ArrayRef<mlir::Value> bRegs,
                                           llvm::ArrayRef<mlir::Value> c);

/// The MatrixEmitter of mma.sync m16n8k16 (bf16 or f16).
std::unique_ptr<MatrixEmitter> createMmaSyncEmitter(const MatrixInstr &instr,
                                                    const ThreadInfo &ti);

} // namespace mla::nvidia

#endif // MLA_LIB_TRANSFORMS_NVIDIA_MMASYNC_H
