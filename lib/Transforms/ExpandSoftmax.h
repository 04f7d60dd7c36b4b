//===- ExpandSoftmax.h - mla.online_softmax as parallel phases --*- C++ -*-===//
#ifndef MLA_TRANSFORMS_EXPANDSOFTMAX_H
#define MLA_TRANSFORMS_EXPANDSOFTMAX_H

#include "mla/Dialect/MLA/IR/MLA.h"

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

} // namespace mla

#endif // MLA_TRANSFORMS_EXPANDSOFTMAX_H
