//===- KindRoles.h - Role tags from the kind table --------------*- C++ -*-===//
//
// Pass-private: tags a kernel's arguments with the roles that
// runtime/include/mla/runtime/Kinds.def lists for its kind, so that the
// compiler's `mla.role` values and the runtime's kind checks read one table.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_TRANSFORMS_KINDROLES_H
#define MLA_LIB_TRANSFORMS_KINDROLES_H

#include "Utils.h"

#include "mla/runtime/Kinds.h"

#include "llvm/ADT/ArrayRef.h"

#include <cassert>

namespace mla {

/// Tags `operands`, the arguments of a `kind` kernel in Kinds.def order,
/// with their roles (see tagRole).
inline void tagKindRoles(rt::KernelKind kind,
                         llvm::ArrayRef<mlir::Value> operands) {
  rt::KindRoles roles = rt::kindRoles(kind);
  assert(operands.size() == roles.size() &&
         "one operand per Kinds.def role of the kind");
  for (size_t i = 0; i < operands.size() && i < roles.size(); ++i)
    tagRole(operands[i], roles.begin()[i].name);
}

} // namespace mla

#endif // MLA_LIB_TRANSFORMS_KINDROLES_H
