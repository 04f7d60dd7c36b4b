//===- FusedStepPlan.cpp - which fused step an attention step takes -------===//
//
// planFusedStep: from the step's shapes, its warps and whether warpgroup
// MMA may be used, the plan of the fused step (FusedStep.cpp) or the
// transposed one (TransposedStep.cpp), or the reason for neither (under
// -debug-only=mla-distribute, and in `whyNot` for mla-select-config's
// diagnostics). Also the row state both steps share: the online softmax's
// per-row update (updateRows) and its initial registers (appendRowState).
//
//===----------------------------------------------------------------------===//
#include "../Utils.h"
#include "NVIDIA.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "mla-distribute"

using namespace mlir;
using namespace mla;
using namespace mla::nvidia;

RowUpdate mla::nvidia::updateRows(ImplicitLocOpBuilder &b, ValueRange mOld,
                                  ArrayRef<Value> mx, Value negInf) {
  RowUpdate u;
  for (auto [old, m] : llvm::zip(mOld, mx)) {
    Value mNew = arith::MaximumFOp::create(b, old, m);
    Value isEmpty =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, mNew, negInf);
    Value ref = arith::SelectOp::create(b, isEmpty, f32Const(b, 0.0), mNew);
    u.mNew.push_back(mNew);
    u.ref.push_back(ref);
    u.corr.push_back(
        math::Exp2Op::create(b, arith::SubFOp::create(b, old, ref)));
  }
  return u;
}

void mla::nvidia::appendRowState(ImplicitLocOpBuilder &b, Value mBuf,
                                 Value lBuf, ArrayRef<Value> rows, Value owner,
                                 SmallVectorImpl<Value> &init) {
  for (Value r : rows)
    init.push_back(memref::LoadOp::create(b, mBuf, ValueRange{r}));
  for (Value r : rows)
    init.push_back(arith::SelectOp::create(
        b, owner, memref::LoadOp::create(b, lBuf, ValueRange{r}),
        f32Const(b, 0.0)));
}

StepPlan mla::nvidia::stepPlanOf(const StepShape &shape) {
  StepPlan p;
  p.elem = shape.elem;
  p.rows = shape.rows;
  p.dim = shape.dim;
  p.tile = shape.tile;
  p.dv = shape.dv;
  p.warps = shape.warps;
  return p;
}

const MatrixInstr &mla::nvidia::mmaSyncInstr(Type elem) {
  return matrixInstr(elem.isBF16() ? MatrixInstrId::MmaSyncM16N8K16BF16
                                   : MatrixInstrId::MmaSyncM16N8K16F16);
}

/// Warpgroup MMA m64n8k16 for `elem` (bf16 or f16): the fused steps' wgmma
/// (its N chosen per product).
static const MatrixInstr &wgmmaInstr(Type elem) {
  return matrixInstr(elem.isBF16() ? MatrixInstrId::WgmmaM64N8K16BF16
                                   : MatrixInstrId::WgmmaM64N8K16F16);
}

const MatrixInstr &StepPlan::productInstr() const {
  return wgmma ? wgmmaInstr(elem) : *frag;
}

FailureOr<StepPlan> mla::nvidia::planFusedStep(const StepShape &shape,
                                               bool wgmmaAllowed, Location loc,
                                               std::string *whyNot) {
  // Refuses with a reason (-debug-only=mla-distribute).
  auto refuse = [&](Location loc, const Twine &why) -> LogicalResult {
    if (whyNot)
      *whyNot = why.str();
    LLVM_DEBUG(llvm::dbgs() << "mla-distribute: no fused attention step at "
                            << loc << ": " << why << "\n");
    return failure();
  };
  // Fewer than 64 rows on one warpgroup: both products transposed.
  std::string whyNotTransposed;
  if (FailureOr<StepPlan> t =
          planTransposedStep(shape, wgmmaAllowed, &whyNotTransposed);
      succeeded(t))
    return t;
  StepPlan p = stepPlanOf(shape);
  if (!(p.elem.isBF16() || p.elem.isF16()))
    return refuse(loc, "mma.sync takes bf16/f16 operands");
  const MatrixInstr &mi = mmaSyncInstr(p.elem);
  p.frag = &mi;
  if (!accumulatorsAsA(mi, mi, p.pAsA))
    return refuse(loc, Twine(mi.mnemonic) +
                           "'s accumulators are not its A fragment");
  if (p.rows % mi.m || p.tile % mi.k || p.dim % mi.k || p.rows == 0)
    return refuse(loc, "rows, key tile and head width must be multiples of " +
                           Twine(mi.m));
  if (p.warps % (p.rows / mi.m) != 0)
    return refuse(loc, "the warps do not split evenly over the " + Twine(mi.m) +
                           "-row blocks");
  p.rowBlocks = p.rows / mi.m;
  p.colSplit = p.warps / p.rowBlocks;
  // Warps that share a row block all compute its scores: measured on the
  // H200 (decode, 16 rows), four-fold redundant Q·Kᵀ (4 warps) is 1.3x
  // slower than the shared-memory phases, two-fold is not.
  if (p.colSplit > 2)
    return refuse(loc, "more than two warps per " + Twine(mi.m) + "-row block");
  // The B fragments of two n-column tiles load together (ldmatrix.x4).
  if (p.dv % (2 * mi.n * p.colSplit) != 0)
    return refuse(loc, "the value width does not split over the warps of a "
                       "row block in " +
                           Twine(2 * mi.n) + "-column steps");
  // Two warps per row block split the key columns of the scores (each
  // computes half, row maxima and probabilities meet in shared memory)
  // when the halves are whole k-key steps; otherwise both compute all.
  p.splitScores = p.colSplit == 2 && p.tile % (2 * mi.k) == 0;
  p.sBlocks = (p.splitScores ? p.tile / 2 : p.tile) / mi.n;
  p.vBlocks = p.dv / p.colSplit / mi.n;
  if (p.sBlocks * mi.c.elems > 64 || p.vBlocks * mi.c.elems > 128)
    return refuse(loc, "the score or accumulator fragments would not fit the "
                       "register file");
  // Warpgroup MMA: its register A fragment and C are the warps' m16n8
  // fragments stacked (the same elements per lane).
  const MatrixInstr &wi = wgmmaInstr(p.elem);
  SmallVector<AccElement> wgmmaPAsA;
  p.wgmma = wgmmaAllowed && accumulatorsAsA(wi, wi, wgmmaPAsA) &&
            wgmmaPAsA == p.pAsA && p.warps % 4 == 0 && p.rowBlocks % 4 == 0 &&
            (p.colSplit == 1 || p.splitScores) && p.dim % 64 == 0 &&
            (p.dv / p.colSplit) % 64 == 0 && p.tile <= 256;
  // One warpgroup computes the whole tile's scores where the config asks
  // (lead_scores): its fragments then hold every key of the tile.
  if (shape.leadScores && p.wgmma && p.splitScores &&
      p.tile / mi.n * mi.c.elems <= 64) {
    p.leadScores = true;
    p.sBlocks = p.tile / mi.n;
  }
  if (wgmmaAllowed && !p.wgmma) {
    std::string why = "needs whole warpgroups of 64 rows, 64-column head "
                      "and value blocks and at most 256 keys";
    if (p.rows < 64)
      why +=
          ", or for fewer rows the transposed step, which " + whyNotTransposed;
    if (whyNot)
      *whyNot = why;
    LLVM_DEBUG(llvm::dbgs() << "mla-distribute: no warpgroup MMA at " << loc
                            << ": " << why << "\n");
  }
  return p;
}
