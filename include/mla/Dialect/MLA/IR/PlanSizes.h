//===- PlanSizes.h - the launch plan's size formulas in the IR --*- C++ -*-===//
//
// The launch plan (#mla.launch_plan, MLAAttrs.td) holds its workspace dims
// and grids as the runtime's own size formulas (mla::rt::DimExpr, the
// manifest's `argI.D[+C|-C][/K]`), typed, so that the IR verifies what the
// runtime will compute. In the IR a size is written
//
//   16 | argI.D | argI.D + C | argI.D - C | argI.D ceildiv K
//      | (argI.D + C) ceildiv K | (argI.D - C) ceildiv K
//
// = ceil((dim D of memref argument I +- C) / K); an argument's dims are
// integers or `?` (read from the tensor at launch).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_DIALECT_MLA_IR_PLANSIZES_H
#define MLA_DIALECT_MLA_IR_PLANSIZES_H

#include "mla/runtime/Manifest.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/Hashing.h"

namespace mla::rt {
inline llvm::hash_code hash_value(const DimExpr &e) {
  return llvm::hash_combine(e.constant, e.argIndex, e.dim, e.addend, e.divisor);
}
/// Prints `e` in the IR's form (above).
mlir::AsmPrinter &operator<<(mlir::AsmPrinter &printer, const DimExpr &e);
} // namespace mla::rt

namespace mlir {
template <> struct FieldParser<mla::rt::DimExpr> {
  static FailureOr<mla::rt::DimExpr> parse(AsmParser &parser);
};
} // namespace mlir

namespace mla {
/// Whether `e` is well formed on its own (a constant >= 0, or an argument
/// index and dim >= 0 and a divisor > 0); `why` says what is not.
bool isWellFormedSize(const rt::DimExpr &e, std::string &why);
/// A size that is the constant `c`.
inline rt::DimExpr constantSize(int64_t c) {
  rt::DimExpr e;
  e.constant = c;
  return e;
}
} // namespace mla

#endif // MLA_DIALECT_MLA_IR_PLANSIZES_H
