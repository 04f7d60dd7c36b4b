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

using namespace mla::rt;
using namespace mla::rt::kinds;

namespace {

std::vector<RoleRule> prefillRoles(const Manifest &m) {
  DimRule any, heads{m.heads, "heads"}, qk{m.qkDim, "qk_dim"},
      v{m.vDim, "v_dim"};
  return {
      {"q", ArgKind::Memref, DTypeRule::Kernel, {any, heads, qk}},
      {"k", ArgKind::Memref, DTypeRule::Kernel, {any, heads, qk}},
      {"v", ArgKind::Memref, DTypeRule::Kernel, {any, heads, v}},
      {"cu_seqlens_q", ArgKind::Memref, DTypeRule::Index, {any}},
      {"cu_seqlens_k", ArgKind::Memref, DTypeRule::Index, {any}},
      {"scale", ArgKind::Scalar, DTypeRule::Float, {}},
      {"o", ArgKind::Memref, DTypeRule::KernelOrF32, {any, heads, v}},
      {"lse", ArgKind::Memref, DTypeRule::F32, {heads, any}},
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

} // namespace

Status mla::rt::checkPrefillManifest(const Manifest &m) {
  return checkManifestRoles(m, "prefill",
                            {{"heads", m.heads},
                             {"qk_dim", m.qkDim},
                             {"v_dim", m.vDim},
                             {"causal", m.causal}},
                            prefillRoles(m));
}

Status mla::rt::validatePrefillArgs(const Manifest &m,
                                    const std::vector<ArgValue> &args,
                                    const std::vector<const void *> &hostData) {
  std::vector<RoleRule> roles = prefillRoles(m);
  for (const RoleRule &rule : roles)
    if (rule.kind == ArgKind::Memref)
      if (Status s = checkHeaderDims(rule.role, tensorOf(m, args, rule.role),
                                     rule.dims);
          !s.ok())
        return s;
  const TensorView &q = tensorOf(m, args, "q");
  const TensorView &k = tensorOf(m, args, "k");
  const TensorView &v = tensorOf(m, args, "v");
  const TensorView &cuQ = tensorOf(m, args, "cu_seqlens_q");
  const TensorView &cuK = tensorOf(m, args, "cu_seqlens_k");
  const TensorView &o = tensorOf(m, args, "o");
  const TensorView &lse = tensorOf(m, args, "lse");

  int64_t rows = q.shape[0];
  if (Status s = checkDim("o", o, 0, rows, "query rows, q dim 0"); !s.ok())
    return s;
  if (Status s = checkDim("lse", lse, 1, rows, "query rows, q dim 0"); !s.ok())
    return s;
  int64_t keys = k.shape[0];
  if (Status s = checkDim("v", v, 0, keys, "key rows, k dim 0"); !s.ok())
    return s;
  int64_t offsets = cuQ.shape[0];
  if (offsets < 2)
    return argError("cu_seqlens_q: dim 0 is " + std::to_string(offsets) +
                    ", expected at least 2 (batch + 1 offsets, batch >= 1)");
  if (Status s = checkDim("cu_seqlens_k", cuK, 0, offsets,
                          "batch + 1, cu_seqlens_q dim 0");
      !s.ok())
    return s;

  // Content checks: the offsets, from the tensors or their host copies.
  if (const void *data = hostData[m.findArg("cu_seqlens_q")->index])
    if (Status s = checkOffsets("cu_seqlens_q", data, cuQ.dtype, offsets, rows,
                                "query", "q");
        !s.ok())
      return s;
  if (const void *data = hostData[m.findArg("cu_seqlens_k")->index])
    if (Status s = checkOffsets("cu_seqlens_k", data, cuK.dtype, offsets, keys,
                                "key", "k");
        !s.ok())
      return s;
  return Status::success();
}
