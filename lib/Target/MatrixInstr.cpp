//===- MatrixInstr.cpp - the matrix instruction table ---------------------===//
#include "mla/Target/MatrixInstr.h"

#include <cassert>

namespace mla {

static const MatrixInstr kInstrs[] = {
#define TERM(src, div, mod, mul)                                               \
  LayoutTerm { LayoutTerm::src, div, mod, mul }
#define TERMS(...) {__VA_ARGS__}
#define LAYOUT(elems, rows, cols)                                              \
  FragLayout { elems, rows, cols }
#define MATRIX_INSTR(Id, mnemonic, vendor, scope, lanes, m, n, k, passes,      \
                     type, ...)                                                \
  {MatrixInstrId::Id,                                                          \
   mnemonic,                                                                   \
   MatrixVendor::vendor,                                                       \
   MatrixScope::scope,                                                         \
   lanes,                                                                      \
   m,                                                                          \
   n,                                                                          \
   k,                                                                          \
   passes,                                                                     \
   MatrixType::type,                                                           \
   __VA_ARGS__},
#include "mla/Target/MatrixInstrs.def"
#undef LAYOUT
#undef TERMS
#undef TERM
};

const MatrixInstr &matrixInstr(MatrixInstrId id) {
  const MatrixInstr &instr = kInstrs[static_cast<size_t>(id)];
  assert(instr.id == id && "MatrixInstrs.def out of order");
  return instr;
}

llvm::ArrayRef<MatrixInstr> allMatrixInstrs() { return kInstrs; }

} // namespace mla
