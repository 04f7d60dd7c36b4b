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
// (`rowWaves`), each key tile (`keyWaves`) and the value columns
// (`valueWaves`); each wave keeps its own online-softmax state over its
// keys, and the waves of one row block combine (m, l, O) through LDS once,
// after the key loop; with one key wave the mla.attention_finish after the
// loop is lowered from the output registers instead (no accumulator
// tile). The value waves of one row block and key range need the same
// scores and each multiplies its share of Vᵀ: a wave's products, output
// registers and rescale shrink with its columns, so that H=16 decode runs
// on four waves (one per SIMD) over a 32-key tile whose LDS holds no
// second tile. They either each compute the whole Sᵀ, or (a score split)
// each its share of the head dim, adding the partial scores through a
// small LDS exchange and one barrier per tile. Inside the loop the LDS
// traffic is the reads of the K and V tiles and that exchange.
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
/// What the plan's cost model (RegisterStepPlan::issueEstimate) charges a
/// barrier, in instructions: the score split's one per tile.
constexpr int64_t kBarrierIssue = 8;
/// The widest group of value blocks read together (RegisterStepPlan::vGroup).
constexpr int64_t kValueGroup = 4;

/// How one attention step is spread over the waves of its workgroup.
struct RegisterStepPlan {
  const MatrixInstr *instr = nullptr;
  StepShape shape;
  int64_t rowWaves = 1, keyWaves = 1, valueWaves = 1;
  /// Value waves that split the head dim of Sᵀ (1 or valueWaves): each
  /// computes the products of its kStepsPerWave() k steps and the value
  /// waves of a row block and key range add their partial scores through
  /// an LDS exchange (exchangeBytes) before the softmax, in the same order
  /// on every wave, so that all of them softmax the same scores. 1: each
  /// value wave computes every k step itself (the scores twice at two).
  int64_t scoreSplit = 1;
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
  /// A wave's blocks of instr->m value columns (shape.dv / valueWaves).
  int64_t dvBlocks() const { return shape.dv / instr->m / valueWaves; }
  int64_t waves() const { return rowWaves * keyWaves * valueWaves; }
  int64_t kSteps() const { return shape.dim / instr->k; }
  /// The k steps of Sᵀ one wave computes (kSteps() / scoreSplit).
  int64_t kStepsPerWave() const { return kSteps() / scoreSplit; }
  /// Bytes of the LDS buffer through which the value waves add their
  /// partial scores (0 without a score split): each wave's Sᵀ
  /// accumulators, one f32 vector per lane and block.
  int64_t exchangeBytes() const;
  /// Value blocks whose Vᵀ fragments a lane reads together: row r of
  /// block md is value column (md / G) * G * M + r * G + md % G (G =
  /// vGroup(), M = instr->m), so that a lane's rows of the G blocks of a
  /// group are G consecutive columns of V, read with one 8-byte (bf16/f16)
  /// vector load per key instead of one 2-byte load per key and block. The
  /// largest of kValueGroup, its halves, ... that divides dvBlocks().
  int64_t vGroup() const;
  /// 32-bit registers per lane of the state the plan keeps: output
  /// accumulators, scores and the query fragments, and the next key tile
  /// in flight (copyRegisters).
  int64_t laneRegisters() const;
  /// A lane's share of one key tile's K (and V) bytes, in 32-bit registers:
  /// what the reads of the next tile hold while the current one is
  /// computed (ArchInfo::prefetchesThroughRegisters).
  int64_t copyRegisters() const;
  /// The most laneRegisters() may be for the plan's waves.
  int64_t registerBudget() const;
  /// Bytes of the LDS buffer in which the key waves combine (0: none).
  int64_t combineBytes() const;
  /// A model of one wave's time per key tile: the products (their passes
  /// of the matrix pipe, MatrixInstr::passes), the K and Vᵀ reads, the Vᵀ
  /// fragments' permutes, the softmax on the scores, the rescale of the
  /// outputs, the wave's share of the tile's copy (one each) and a score
  /// split's exchange (its writes, reads, adds and kBarrierIssue). A ranking
  /// model, not a count: the ISA's counts are what mla-compile --report
  /// prints.
  int64_t issueEstimate() const;
  /// issueEstimate() times the plan's waves per SIMD: the time of a key
  /// tile on the busiest SIMD of a CU, in the model's units.
  int64_t simdCost() const;
};

/// Plans whose simdCost() is within kPlanCostTieNum / kPlanCostTieDen of
/// the cheapest count as equally fast: the model cannot tell them apart.
constexpr int64_t kPlanCostTieNum = 17, kPlanCostTieDen = 16;

/// The best of `plans` (not empty): the fewest padded rows; among those,
/// of the plans as fast as the cheapest (kPlanCostTieNum), the fewest key
/// waves (no accumulator tile, no combine after the loop), then the larger
/// instruction, then the cheaper. A plan whose key waves would only save a
/// few reads keeps one key wave and its finish in registers.
const RegisterStepPlan &
chooseRegisterStepPlan(llvm::ArrayRef<RegisterStepPlan> plans);

/// The plan for `shape` (shape.warps waves of `waveSize` lanes) on the best
/// of `instrs` (the chip's matrix instructions) that takes it, or failure
/// with the reasons in `whyNot` (and under -debug-only=mla-distribute).
/// `ldsBytes` is the chip's LDS: a plan whose key waves combine through an
/// accumulator tile is refused where that tile and the row state do not
/// fit it (WorkgroupTiles; the operand tiles, the same for every
/// plan, are the caller's to check).
mlir::FailureOr<RegisterStepPlan>
planRegisterStep(const StepShape &shape, llvm::ArrayRef<MatrixInstrId> instrs,
                 int64_t waveSize, int64_t ldsBytes,
                 std::string *whyNot = nullptr);

/// Lowers `op` in registers on the plan for its shapes and `ti`'s waves
/// (planRegisterStep with `ldsBytes`).
/// Fails, before changing any IR, when no plan is feasible or the IR does
/// not allow it (checkStepLoop); -debug-only=mla-distribute says why.
mlir::LogicalResult registerAttentionStep(AttentionStepOp op,
                                          const ThreadInfo &ti,
                                          llvm::ArrayRef<MatrixInstrId> instrs,
                                          int64_t ldsBytes);

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_GPU_REGISTERSTEP_H
