//===- AppendKvKind.cpp - Rules of `kernel append_kv` ---------------------===//
//
// An append_kv kernel writes the cache rows of T new tokens into a paged KV
// cache (vLLM's concat_and_cache_mla): kv_new [T, latent_dim + rope_dim],
// slot_mapping [T], page pool kv [num_pages, page_size, latent_dim +
// rope_dim] (read and written). Token t goes to row slot % page_size of page
// slot / page_size; slot -1 marks a padding token that is skipped. Any other
// slot outside [0, num_pages * page_size) is rejected before launch.
//
//===----------------------------------------------------------------------===//

#include "KernelKinds.h"
#include "KindChecks.h"
#include "KindPlans.h"

using namespace mla::rt;
using namespace mla::rt::kinds;

namespace {

std::vector<RoleRule> appendKvRoles(const Manifest &m) {
  DimRule any, row{m.latentDim + m.ropeDim, "latent_dim + rope_dim"},
      page{m.pageSize == 0 ? kDynamicDim : m.pageSize, "page_size"};
  return {
      {Role::KvNew, DTypeRule::Kernel, {any, row}},
      {Role::SlotMapping, DTypeRule::Index, {any}},
      {Role::Kv, DTypeRule::Kernel, {any, page, row}},
  };
}

/// What every append_kv target runs: one launch over the new tokens; no
/// workspace.
Expected<plans::KindPlan> appendKvPlan(const Manifest &m, const TargetSpec &) {
  using plans::SizeRule;
  plans::KindPlan plan;
  plan.symbols = {{"new tokens", {{Role::KvNew, 0}, {Role::SlotMapping, 0}}}};
  plan.launches = {
      {{SizeRule::symbolOf(0, "new tokens"), SizeRule::constantOf(1, "one"),
        SizeRule::constantOf(1, "one")},
       plans::rolesOf(m, KernelKind::AppendKv, plans::anyRole, true),
       {},
       "the copy of each new token's row"},
  };
  return plan;
}

} // namespace

Status mla::rt::checkAppendKvManifest(const Manifest &m) {
  if (Status s = checkManifestRoles(m, KernelKind::AppendKv,
                                    {{"latent_dim", m.latentDim},
                                     {"rope_dim", m.ropeDim},
                                     {"page_size", m.pageSize}},
                                    appendKvRoles(m));
      !s.ok())
    return s;
  return plans::checkTargetPlans(m, appendKvPlan);
}

Status
mla::rt::validateAppendKvArgs(const Manifest &m,
                              const std::vector<ArgValue> &args,
                              const std::vector<const void *> &hostData) {
  for (const RoleRule &rule : appendKvRoles(m))
    if (Status s = checkHeaderDims(rule.name(), tensorOf(m, args, rule.name()),
                                   rule.dims);
        !s.ok())
      return s;
  const TensorView &kvNew = tensorOf(m, args, roles::kKvNew);
  const TensorView &slots = tensorOf(m, args, roles::kSlotMapping);
  const TensorView &kv = tensorOf(m, args, roles::kKv);
  int64_t tokens = kvNew.shape[0];
  if (Status s = checkDim(roles::kSlotMapping, slots, 0, tokens,
                          "new tokens, kv_new dim 0");
      !s.ok())
    return s;
  int64_t numPages = kv.shape[0];
  if (numPages < 1)
    return argError("kv: the page pool is empty (dim 0 is 0)");
  int64_t pageSize = kv.shape[1];
  if (pageSize < 1)
    return argError("kv: the page size (dim 1) is 0");

  // Content check: every slot in the pool, or -1.
  const void *data = hostData[m.findArg(roles::kSlotMapping)->index];
  if (!data)
    return Status::success();
  int64_t capacity;
  if (__builtin_mul_overflow(numPages, pageSize, &capacity))
    capacity = INT64_MAX;
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t slot = readIndex(data, slots.dtype, t);
    if (slot == -1)
      continue;
    std::string where =
        "slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot);
    if (slot < 0)
      return argError(where +
                      " is negative (only -1, a padding token, may be)");
    if (slot >= capacity)
      return argError(where + " is outside the page pool (kv has " +
                      std::to_string(numPages) + " pages x " +
                      std::to_string(pageSize) + " = " +
                      std::to_string(capacity) + " slots)");
  }
  return Status::success();
}
