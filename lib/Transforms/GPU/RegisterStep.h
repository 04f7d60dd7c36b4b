//===- RegisterStep.h - the attention step in registers, from data -*- C++ -*-//
//
// Library-private: the register-resident lowering of mla.attention_step
// written once against the matrix-instruction data (MatrixInstrs.def) and
// the MatrixEmitter interface, for instructions whose accumulator layout is
// the layout of their B operand (AMD's MFMA: a lane holds column l % n of
// C and of B). It computes the transposed products
//
//   Sᵀ = K · Qᵀ        (keys x queries: A = K from LDS, B = Qᵀ in registers)
//   Oᵀ += Vᵀ · Pᵀ      (values x queries: A = Vᵀ from LDS, B = Pᵀ = the
//                       accumulators of Sᵀ after the softmax, in registers)
//
// so that a lane's scores, probabilities and output accumulators all belong
// to the queries of its C columns: the softmax's row maximum and sum are
// in-lane reductions plus XOR shuffles across the lanes of one column, the
// correction of the output is one scalar per lane and query block, and P
// never leaves the registers. Waves split the workgroup's rows
// (`rowWaves`) and each key tile (`keyWaves`); each wave keeps its own
// online-softmax state over its keys, and the waves of one row block
// combine (m, l, O) through LDS once, after the key loop; with one key
// wave the mla.attention_finish after the loop is lowered from the output
// registers instead (no accumulator tile). Inside the loop the only LDS
// traffic is the reads of the K and V tiles.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_TRANSFORMS_GPU_REGISTERSTEP_H
#define MLA_LIB_TRANSFORMS_GPU_REGISTERSTEP_H

#include "GPUCommon.h"
#include "mla/Target/MatrixInstr.h"

#include <string>
#include <tuple>

namespace mla {

/// Registers of one SIMD lane (VGPRs and AGPRs of gfx90a/gfx942/gfx950),
/// shared by the waves of a workgroup that land on the same SIMD (a CU has
/// four), and what the plan leaves of them for addresses and temporaries:
/// it refuses state beyond (512 / waves per SIMD) - 64 registers per lane.
constexpr int64_t kLaneRegisters = 512, kSimdsPerCU = 4,
                  kTemporaryRegisters = 64;
/// The widest group of value blocks read together (RegisterStepPlan::vGroup).
constexpr int64_t kValueGroup = 4;

/// How one attention step is spread over the waves of its workgroup.
struct RegisterStepPlan {
  const MatrixInstr *instr = nullptr;
  StepShape shape;
  int64_t rowWaves = 1, keyWaves = 1;
  int64_t qBlocks = 1;     ///< a wave's blocks of instr->n queries
  int64_t keysPerWave = 0; ///< a wave's keys of each tile
  /// Whether mla.attention_finish is lowered from the output registers
  /// (one key wave: each query's accumulators are on one wave, in runs of
  /// finishWidth(dv) value columns per lane across the blocks of a value
  /// group), so that the accumulator needs no LDS tile.
  bool finishInRegisters = false;

  int64_t rowsPerWave() const { return qBlocks * instr->n; }
  /// Query rows of the waves together (> rows when padded).
  int64_t paddedRows() const { return rowWaves * rowsPerWave(); }
  bool padded() const { return paddedRows() != shape.rows; }
  int64_t sBlocks() const { return keysPerWave / instr->m; }
  int64_t pvSteps() const { return keysPerWave / instr->k; }
  int64_t dvBlocks() const { return shape.dv / instr->m; }
  int64_t kSteps() const { return shape.dim / instr->k; }
  /// Value blocks whose Vᵀ fragments a lane reads together: row r of
  /// block md is value column (md / G) * G * M + r * G + md % G (G =
  /// vGroup(), M = instr->m), so that a lane's rows of the G blocks of a
  /// group are G consecutive columns of V, read with one 8-byte (bf16/f16)
  /// vector load per key instead of one 2-byte load per key and block. The
  /// largest of kValueGroup, its halves, ... that divides dvBlocks().
  int64_t vGroup() const;
  /// 32-bit registers per lane of the state the plan keeps: output
  /// accumulators, scores and the query fragments.
  int64_t laneRegisters() const;
  /// The most laneRegisters() may be for the plan's waves.
  int64_t registerBudget() const;
  /// Bytes of the LDS buffer in which the key waves combine (0: none).
  int64_t combineBytes() const;
  /// Larger is better: fewer padded rows, then the larger instruction,
  /// then fewer key waves (less to combine).
  std::tuple<int64_t, int64_t, int64_t> rank() const;
};

/// The plan for `shape` (shape.warps waves of `waveSize` lanes) on the best
/// of `instrs` (the chip's matrix instructions) that takes it, or failure
/// with the reasons in `whyNot` (and under -debug-only=mla-distribute).
mlir::FailureOr<RegisterStepPlan>
planRegisterStep(const StepShape &shape, llvm::ArrayRef<MatrixInstrId> instrs,
                 int64_t waveSize, std::string *whyNot = nullptr);

/// Lowers `op` in registers on the plan for its shapes and `ti`'s waves.
/// Fails, before changing any IR, when no plan is feasible or the IR does
/// not allow it (checkStepLoop); -debug-only=mla-distribute says why.
mlir::LogicalResult registerAttentionStep(AttentionStepOp op,
                                          const ThreadInfo &ti,
                                          llvm::ArrayRef<MatrixInstrId> instrs);

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_GPU_REGISTERSTEP_H
