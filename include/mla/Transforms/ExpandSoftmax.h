//===- ExpandSoftmax.h - mla.online_softmax as parallel phases --*- C++ -*-===//
#ifndef MLA_TRANSFORMS_EXPANDSOFTMAX_H
#define MLA_TRANSFORMS_EXPANDSOFTMAX_H

#include "mla/Dialect/MLA/IR/MLA.h"

namespace mla {

/// Replaces `op` by four scf.parallel phases (see mla-expand-softmax). Its
/// scratch buffers (per row and 8-column chunk partials, per row
/// references) are allocas at the top of the enclosing mla.grid.
void expandOnlineSoftmax(OnlineSoftmaxOp op);

} // namespace mla

#endif // MLA_TRANSFORMS_EXPANDSOFTMAX_H
