//===- PrefillKind.cpp - Rules of `kernel prefill` ------------------------===//
//
// A prefill kernel (MHA form) runs a ragged batch of B requests: q [T, H,
// qk_dim], k [Tk, H, qk_dim], v [Tk, H, v_dim], offsets cu_seqlens_q and
// cu_seqlens_k [B + 1] (request b's queries are rows cu_seqlens_q[b] ..
// cu_seqlens_q[b + 1] of q, its keys rows cu_seqlens_k[b] .. of k and v), a
// softmax scale; outputs o [T, H, v_dim] and lse [H, T].
//
//===----------------------------------------------------------------------===//

#include "KernelKinds.h"
#include "KindChecks.h"
#include "KindPlans.h"

using namespace mla::rt;
using namespace mla::rt::kinds;

namespace {

std::vector<RoleRule> prefillRoles(const Manifest &m) {
  DimRule any, heads{m.heads, "heads"}, qk{m.qkDim, "qk_dim"},
      v{m.vDim, "v_dim"};
  return {
      {Role::Q, DTypeRule::Kernel, {any, heads, qk}},
      {Role::K, DTypeRule::Kernel, {any, heads, qk}},
      {Role::V, DTypeRule::Kernel, {any, heads, v}},
      {Role::CuSeqlensQ, DTypeRule::Index, {any}},
      {Role::CuSeqlensK, DTypeRule::Index, {any}},
      {Role::Scale, DTypeRule::Float, {}},
      {Role::O, DTypeRule::KernelOrF32, {any, heads, v}},
      {Role::Lse, DTypeRule::F32, {heads, any}},
  };
}

/// Offsets of `role` (n entries, readable at `data`): start at 0, never
/// decrease, end at `total` (dim 0 of `rowsRole`, `rowsWhat` rows).
Status checkOffsets(const char *role, const void *data, DType dtype, int64_t n,
                    int64_t total, const char *rowsWhat, const char *rowsRole) {
  auto at = [&](int64_t i) {
    return std::string(role) + "[" + std::to_string(i) + "]";
  };
  int64_t previous = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t value = readIndex(data, dtype, i);
    if (i == 0 && value != 0)
      return argError(at(0) + " = " + std::to_string(value) +
                      ", expected 0 (the first offset)");
    if (value < previous)
      return argError(at(i) + " = " + std::to_string(value) + " is less than " +
                      at(i - 1) + " = " + std::to_string(previous) +
                      " (offsets must not decrease)");
    previous = value;
  }
  if (previous != total)
    return argError(at(n - 1) + " = " + std::to_string(previous) +
                    ", expected " + std::to_string(total) +
                    " (the last offset is the number of " + rowsWhat +
                    " rows, " + rowsRole + " dim 0)");
  return Status::success();
}

/// What every prefill target runs (docs/Architecture.md, "Prefill: what
/// mla-tile builds"): one launch over (query tile of the whole batch, head,
/// request), tile_q rows per tile; no workspace. A package without
/// tile_q in its config leaves it free (the grid's divisor).
Expected<plans::KindPlan> prefillPlan(const Manifest &m,
                                      const TargetSpec &target) {
  using plans::SizeRule;
  plans::KindPlan plan;
  enum { Rows, Heads, Offsets };
  plan.symbols = {
      {"query rows", {{Role::Q, 0}, {Role::O, 0}, {Role::Lse, 1}}},
      {"heads",
       {{Role::Q, 1}, {Role::K, 1}, {Role::V, 1}, {Role::O, 1}, {Role::Lse, 0}},
       m.heads},
      {"offsets", {{Role::CuSeqlensQ, 0}, {Role::CuSeqlensK, 0}}},
  };
  Expected<std::optional<int64_t>> tileQ =
      plans::configValue(m, target, "tile_q", 1, INT32_MAX);
  if (!tileQ.ok())
    return tileQ.status();
  SizeRule tiles = SizeRule::symbolOf(Rows, "ceil(query rows / tile_q)", 0,
                                      tileQ->value_or(1));
  if (*tileQ) {
    tiles.what = "ceil(query rows / tile_q) = ceil(query rows / " +
                 std::to_string(**tileQ) + ")";
  } else {
    plan.freeConstants.push_back({"tile_q", 1, INT32_MAX});
    tiles.freeDivisor = 0;
  }
  plan.launches = {
      {{tiles, SizeRule::symbolOf(Heads, "heads"),
        SizeRule::symbolOf(Offsets, "the requests (offsets - 1)", -1)},
       plans::rolesOf(m, KernelKind::Prefill, plans::anyRole, true),
       {},
       "the attention per query tile, head and request"},
  };
  return plan;
}

} // namespace

Status mla::rt::checkPrefillManifest(const Manifest &m) {
  if (Status s = checkManifestRoles(m, KernelKind::Prefill,
                                    {{"heads", m.heads},
                                     {"qk_dim", m.qkDim},
                                     {"v_dim", m.vDim},
                                     {"causal", m.causal}},
                                    prefillRoles(m));
      !s.ok())
    return s;
  return plans::checkTargetPlans(m, prefillPlan);
}

Status mla::rt::validatePrefillArgs(const Manifest &m,
                                    const std::vector<ArgValue> &args,
                                    const std::vector<const void *> &hostData) {
  if (Status s = checkScale(m, args); !s.ok())
    return s;
  std::vector<RoleRule> roles = prefillRoles(m);
  for (const RoleRule &rule : roles)
    if (kindRoles(KernelKind::Prefill).find(rule.role)->argKind ==
        ArgKind::Memref)
      if (Status s = checkHeaderDims(rule.name(),
                                     tensorOf(m, args, rule.name()), rule.dims);
          !s.ok())
        return s;
  const TensorView &q = tensorOf(m, args, roles::kQ);
  const TensorView &k = tensorOf(m, args, roles::kK);
  const TensorView &v = tensorOf(m, args, roles::kV);
  const TensorView &cuQ = tensorOf(m, args, roles::kCuSeqlensQ);
  const TensorView &cuK = tensorOf(m, args, roles::kCuSeqlensK);
  const TensorView &o = tensorOf(m, args, roles::kO);
  const TensorView &lse = tensorOf(m, args, roles::kLse);

  int64_t rows = q.shape[0];
  if (Status s = checkDim(roles::kO, o, 0, rows, "query rows, q dim 0");
      !s.ok())
    return s;
  if (Status s = checkDim(roles::kLse, lse, 1, rows, "query rows, q dim 0");
      !s.ok())
    return s;
  int64_t keys = k.shape[0];
  if (Status s = checkDim(roles::kV, v, 0, keys, "key rows, k dim 0"); !s.ok())
    return s;
  int64_t offsets = cuQ.shape[0];
  if (offsets < 2)
    return argError("cu_seqlens_q: dim 0 is " + std::to_string(offsets) +
                    ", expected at least 2 (batch + 1 offsets, batch >= 1)");
  if (Status s = checkDim(roles::kCuSeqlensK, cuK, 0, offsets,
                          "batch + 1, cu_seqlens_q dim 0");
      !s.ok())
    return s;

  // Content checks: the offsets, from the tensors or their host copies.
  if (const void *data = hostData[m.findArg(roles::kCuSeqlensQ)->index])
    if (Status s = checkOffsets(roles::kCuSeqlensQ, data, cuQ.dtype, offsets,
                                rows, "query", roles::kQ);
        !s.ok())
      return s;
  if (const void *data = hostData[m.findArg(roles::kCuSeqlensK)->index])
    if (Status s = checkOffsets(roles::kCuSeqlensK, data, cuK.dtype, offsets,
                                keys, "key", roles::kK);
        !s.ok())
      return s;
  return Status::success();
}
