//===- ExpandSoftmax.h - mla.online_softmax as parallel phases --*- C++ -*-===//
#ifndef MLA_TRANSFORMS_EXPANDSOFTMAX_H
#define MLA_TRANSFORMS_EXPANDSOFTMAX_H

#include "mla/Dialect/MLA/IR/MLA.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mla {

/// Replaces `op` by four scf.parallel phases (see mla-expand-softmax). Its
/// scratch buffers (per row and 8-column chunk partials, per row
/// references) are allocas at the top of the enclosing mla.grid.
void expandOnlineSoftmax(OnlineSoftmaxOp op);

/// Replaces `op` by `mla.matmul` (S = Q·Kᵀ), `mla.online_softmax` (S -> P,
/// m, l, corr; `op`'s element region) and `mla.matmul` (acc = corr·acc +
/// P·V) over the score, probability and correction tiles it allocates
/// (allocateStepScratch); returns the online softmax.
OnlineSoftmaxOp decomposeAttentionStep(AttentionStepOp op);

/// The per-row factors of mla.attention_finish from a row's m, l and scale
/// (f32 values; `scale` may be null): `inv` = scale / l and `lse` = (m +
/// log2 l) · ln 2, or 0 and -inf for a row that saw no key (l = 0).
struct FinishFactors {
  mlir::Value inv, lse;
};
FinishFactors finishFactors(mlir::ImplicitLocOpBuilder &b, mlir::Value m,
                            mlir::Value l, mlir::Value scale);

/// Replaces `op` by one scf.parallel over (row, column block) that reads
/// the accumulator and runs the output region, the lse region on the
/// first block of each row.
void expandAttentionFinish(AttentionFinishOp op);

} // namespace mla

#endif // MLA_TRANSFORMS_EXPANDSOFTMAX_H
