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

bool accumulatorsAsA(const MatrixInstr &c, const MatrixInstr &a,
                     llvm::SmallVectorImpl<AccElement> &where) {
  where.clear();
  if (c.lanes != a.lanes || a.a.elems == 0 || a.m != c.m || a.k % c.n != 0)
    return false;
  for (int64_t l = 0; l < a.lanes; ++l)
    for (int64_t e = 0; e < a.a.elems; ++e) {
      const int64_t row = a.a.rowOf(l, e), col = a.a.colOf(l, e);
      int64_t found = -1;
      for (int64_t ce = 0; ce < c.c.elems && found < 0; ++ce)
        if (c.c.rowOf(l, ce) == row && c.c.colOf(l, ce) == col % c.n)
          found = ce;
      if (found < 0)
        return false;
      AccElement at{col / c.n, found};
      // The same accumulator on every lane (registers hold no lane index).
      if (l == 0)
        where.push_back(at);
      else if (!(where[e] == at))
        return false;
    }
  return true;
}

} // namespace mla
