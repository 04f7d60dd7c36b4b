//===- MatrixInstr.h - matrix instructions as data --------------*- C++ -*-===//
//
// One description per matrix instruction (MatrixInstrs.def): its vendor,
// the threads that issue it together, its M x N x K shape, operand type and
// where each lane's fragment elements sit in the A, B and C tiles. The
// lower half's emitters (lib/Transforms/GPU/MatrixEmitter.h) compute
// addresses, masks and cross-lane reductions from these layouts; ArchInfo
// lists the instructions of each chip.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_TARGET_MATRIXINSTR_H
#define MLA_TARGET_MATRIXINSTR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace mla {

enum class MatrixInstrId {
#define MATRIX_INSTR(Id, ...) Id,
#include "mla/Target/MatrixInstrs.def"
};

/// Which threads issue one instruction together.
enum class MatrixScope { Thread, Warp, Warpgroup, Wave };
/// Operand element types (Any: converted to the f32 accumulator).
enum class MatrixType { Any, BF16, F16 };
enum class MatrixVendor { Any, NVIDIA, AMD };

/// One term of a fragment coordinate: ((x / div) % mod) * mul, x the lane
/// or the element index within the lane's fragment.
struct LayoutTerm {
  enum Source : uint8_t { L, E } source = L;
  int16_t div = 1, mod = 0, mul = 0; ///< mod 0: the term is absent
  int64_t eval(int64_t lane, int64_t elem) const {
    if (mod == 0)
      return 0;
    return ((source == L ? lane : elem) / div) % mod * mul;
  }
};

/// Where element `e` of lane `l`'s fragment sits in an operand tile.
struct FragLayout {
  static constexpr int kMaxTerms = 4;
  int64_t elems = 0; ///< per lane; 0: shared memory only
  LayoutTerm row[kMaxTerms], col[kMaxTerms];
  int64_t rowOf(int64_t lane, int64_t e) const { return sum(row, lane, e); }
  int64_t colOf(int64_t lane, int64_t e) const { return sum(col, lane, e); }

private:
  static int64_t sum(const LayoutTerm (&t)[kMaxTerms], int64_t l, int64_t e) {
    int64_t s = 0;
    for (const LayoutTerm &term : t)
      s += term.eval(l, e);
    return s;
  }
};

struct MatrixInstr {
  MatrixInstrId id;
  llvm::StringRef mnemonic;
  MatrixVendor vendor;
  MatrixScope scope;
  int64_t lanes; ///< threads issuing it together
  int64_t m, n, k;
  /// Passes of the matrix pipe per instruction (MatrixInstrs.def); 0: not
  /// modelled.
  int64_t passes;
  MatrixType type;
  FragLayout a, b, c; ///< A: M x K, B: K x N, C: M x N (f32)
};

const MatrixInstr &matrixInstr(MatrixInstrId id);
llvm::ArrayRef<MatrixInstr> allMatrixInstrs();

/// Element `elem` of C tile `tile` (of C tiles side by side).
struct AccElement {
  int64_t tile, elem;
  bool operator==(const AccElement &o) const {
    return tile == o.tile && elem == o.elem;
  }
};

/// Whether the accumulators of a product by `c` serve, in the registers
/// they are in, as the A fragment of a following product by `a` (P, the
/// scores' C tiles side by side, as the A operand of P·V): on success
/// `where[e]` is the accumulator that element e of a lane's A fragment is,
/// the same for every lane; false when some lane would need another lane's
/// accumulator (or `a` reads A from shared memory only).
bool accumulatorsAsA(const MatrixInstr &c, const MatrixInstr &a,
                     llvm::SmallVectorImpl<AccElement> &where);

} // namespace mla

#endif // MLA_TARGET_MATRIXINSTR_H
