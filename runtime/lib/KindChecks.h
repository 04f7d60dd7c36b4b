//===- KindChecks.h - Table-driven checks of kernel kinds ------*- C++ -*-===//
//
// Helpers for the prefill, merge and append_kv rules: Kinds.def gives each
// role's arg kind and rank, a kind's rules add, per role, its dtype and
// header-implied dims; the helpers check manifests against both and
// checks launch arguments' dims and index contents with messages that name
// the argument.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LIB_KINDCHECKS_H
#define MLA_RUNTIME_LIB_KINDCHECKS_H

#include "mla/runtime/Manifest.h"
#include "mla/runtime/Status.h"
#include "mla/runtime/Tensor.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mla::rt::kinds {

/// A dim the header does not constrain.
constexpr int64_t kAnyDim = -2;

/// One manifest dim: a header value (kDynamicDim when the header says it is
/// dynamic, e.g. page_size 0) named `what`, or kAnyDim.
struct DimRule {
  int64_t value = kAnyDim;
  const char *what = "";
};

enum class DTypeRule {
  Kernel,      ///< the header's dtype
  KernelOrF32, ///< the header's dtype or f32 (outputs)
  F32,
  Index, ///< i32 or i64
  Float, ///< any floating-point dtype (scalars)
};

/// What a kind requires of one role beyond its Kinds.def entry.
struct RoleRule {
  Role role;
  DTypeRule dtype;
  /// Memrefs: one entry per dim (the table's rank).
  std::vector<DimRule> dims;

  const char *name() const { return roleName(role); }
};

/// Checks that the header keys are present (value >= 0; `dtype` separately)
/// and that every role of `kind` in Kinds.def has a manifest arg of the
/// table's arg kind and rank that matches its rule. Messages:
/// "KIND manifest needs a 'KEY' line", "KIND manifest needs an arg with role
/// 'R'", "manifest line N: KIND arg 'R' ...".
Status checkManifestRoles(
    const Manifest &m, KernelKind kind,
    const std::vector<std::pair<const char *, int64_t>> &requiredKeys,
    const std::vector<RoleRule> &roles);

/// The launch tensor of `role` (the generic checks have run: it is a tensor
/// of the manifest's rank).
const TensorView &tensorOf(const Manifest &m, const std::vector<ArgValue> &args,
                           const char *role);

/// "ROLE: dim D is X, expected V (WHAT)" unless dim d of t is `value`.
Status checkDim(const char *role, const TensorView &t, size_t d, int64_t value,
                const std::string &what);

/// Checks every dim of `t` that `rules` fixes (header values > 0 only; a
/// dynamic or unconstrained dim is left alone).
Status checkHeaderDims(const char *role, const TensorView &t,
                       const std::vector<DimRule> &rules);

int64_t readIndex(const void *data, DType dtype, int64_t i);

/// "scale: nan is not a finite number (the softmax scale)" unless the
/// kind's scale argument (a floating-point scalar) is finite and not 0 (a
/// zero-initialized mla_decode_args / mla_prefill_args: no default scale).
Status checkScale(const Manifest &m, const std::vector<ArgValue> &args);

Status argError(const std::string &message);

} // namespace mla::rt::kinds

#endif // MLA_RUNTIME_LIB_KINDCHECKS_H
