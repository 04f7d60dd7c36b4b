//===- MergeKind.cpp - Rules of `kernel merge` ----------------------------===//
//
// A merge kernel combines N partial attention results of the same T query
// rows (chunked prefill: one per chunk of keys) by their log-sum-exp:
// o_parts f32 [N, T, H, v_dim], lse_parts f32 [N, H, T] -> o [T, H, v_dim],
// lse f32 [H, T]. N is the header's `parts`.
//
//===----------------------------------------------------------------------===//

#include "KernelKinds.h"
#include "KindChecks.h"
#include "KindPlans.h"

using namespace mla::rt;
using namespace mla::rt::kinds;

namespace {

std::vector<RoleRule> mergeRoles(const Manifest &m) {
  DimRule any, heads{m.heads, "heads"}, v{m.vDim, "v_dim"},
      parts{m.parts, "parts"};
  return {
      {Role::OParts, DTypeRule::F32, {parts, any, heads, v}},
      {Role::LseParts, DTypeRule::F32, {parts, heads, any}},
      {Role::O, DTypeRule::KernelOrF32, {any, heads, v}},
      {Role::Lse, DTypeRule::F32, {heads, any}},
  };
}

/// What every merge target runs: one launch over (query row, head); no
/// workspace.
Expected<plans::KindPlan> mergePlan(const Manifest &m, const TargetSpec &) {
  using plans::SizeRule;
  plans::KindPlan plan;
  plan.symbols = {
      {"query rows",
       {{Role::OParts, 1}, {Role::LseParts, 2}, {Role::O, 0}, {Role::Lse, 1}}},
      {"heads",
       {{Role::OParts, 2}, {Role::LseParts, 1}, {Role::O, 1}, {Role::Lse, 0}},
       m.heads},
  };
  plan.launches = {
      {{SizeRule::symbolOf(0, "query rows"), SizeRule::symbolOf(1, "heads"),
        SizeRule::constantOf(1, "one")},
       plans::rolesOf(m, KernelKind::Merge, plans::anyRole, true),
       {},
       "the merge per query row and head"},
  };
  return plan;
}

} // namespace

Status mla::rt::checkMergeManifest(const Manifest &m) {
  if (Status s = checkManifestRoles(
          m, KernelKind::Merge,
          {{"heads", m.heads}, {"v_dim", m.vDim}, {"parts", m.parts}},
          mergeRoles(m));
      !s.ok())
    return s;
  return plans::checkTargetPlans(m, mergePlan);
}

Status mla::rt::validateMergeArgs(const Manifest &m,
                                  const std::vector<ArgValue> &args,
                                  const std::vector<const void *> &) {
  for (const RoleRule &rule : mergeRoles(m))
    if (Status s = checkHeaderDims(rule.name(), tensorOf(m, args, rule.name()),
                                   rule.dims);
        !s.ok())
      return s;
  const TensorView &oParts = tensorOf(m, args, roles::kOParts);
  int64_t rows = oParts.shape[1];
  const char *what = "query rows, o_parts dim 1";
  if (Status s = checkDim(roles::kLseParts, tensorOf(m, args, roles::kLseParts),
                          2, rows, what);
      !s.ok())
    return s;
  if (Status s =
          checkDim(roles::kO, tensorOf(m, args, roles::kO), 0, rows, what);
      !s.ok())
    return s;
  return checkDim(roles::kLse, tensorOf(m, args, roles::kLse), 1, rows, what);
}
