//===- DecodeKind.cpp - Rules of `kernel decode` --------------------------===//
//
// A decode kernel attends q [batch, q_len, heads, latent_dim + rope_dim] over
// a paged KV cache: page pool kv [num_pages, page_size, latent_dim +
// rope_dim], block_table [batch, max_pages_per_seq], seq_lens [batch]; it
// writes o [batch, q_len, heads, latent_dim] and lse [batch, q_len, heads].
//
//===----------------------------------------------------------------------===//

#include "KernelKinds.h"
#include "KindChecks.h"
#include "KindPlans.h"
#include "mla/runtime/ChunkSchedule.h"

#include <array>
#include <cstdint>
#include <string>

using namespace mla::rt;
using namespace mla::rt::kinds;

namespace {

Status manifestError(const ManifestArg &arg, const std::string &message) {
  return Status::error(ErrorCode::InvalidManifest,
                       "manifest line " + std::to_string(arg.line) + ": " +
                           kernels::kDecode + " arg '" + arg.role + "' " +
                           message);
}

/// The header-implied dims of a role (kAnyDim where the header does not
/// constrain it); kDynamicDim where the header says the dim is dynamic
/// (q_len 0, page_size 0).
std::vector<std::pair<int64_t, const char *>> expectedDims(const Manifest &m,
                                                           Role role) {
  int64_t row = m.latentDim + m.ropeDim;
  int64_t qLen = m.qLen == 0 ? kDynamicDim : m.qLen;
  int64_t pageSize = m.pageSize == 0 ? kDynamicDim : m.pageSize;
  switch (role) {
  case Role::Q:
    return {{kAnyDim, ""},
            {qLen, "q_len"},
            {m.heads, "heads"},
            {row, "latent_dim + rope_dim"}};
  case Role::Kv:
    return {
        {kAnyDim, ""}, {pageSize, "page_size"}, {row, "latent_dim + rope_dim"}};
  case Role::O:
    return {{kAnyDim, ""},
            {qLen, "q_len"},
            {m.heads, "heads"},
            {m.latentDim, "latent_dim"}};
  case Role::Lse:
    return {{kAnyDim, ""}, {qLen, "q_len"}, {m.heads, "heads"}};
  default:
    return {};
  }
}

bool isInputRole(const KindRole &role) { return role.isInput(); }
bool isOutputRole(const KindRole &role) { return role.isOutput(); }

/// The grid of a key-range launch: `x` (workgroups or requests) by
/// `groups` (head groups) by `z`, in the order of
/// schedule::headGroupGridDim for `count` head groups (1 where a package
/// without a config leaves them free: such packages predate the order);
/// packages compiled before it, (x, groups, z), are still accepted.
void setKeyRangeGrid(plans::LaunchRule &rule, plans::SizeRule x,
                     plans::SizeRule groups, plans::SizeRule z, int64_t count) {
  rule.grid = {x, groups, z};
  if (schedule::headGroupGridDim(count) == 0) {
    rule.earlierGrid = rule.grid;
    rule.grid = {groups, x, z};
  }
}

/// Decode's length-aware schedule (config kv_chunks > 0;
/// docs/Architecture.md, "Decode: what mla-tile builds"): the plan of
/// chunks from the lengths (one workgroup), the partial results of the
/// chunks in one slot each (batch + chunkSlots slots), their merge per
/// request, query and head. `plan` holds the symbols.
Expected<plans::KindPlan> chunkPlan(const Manifest &m, const TargetSpec &target,
                                    plans::KindPlan plan, int64_t kvChunks) {
  using plans::SizeRule;
  enum { Batch, QLen, Heads, Latent };
  Expected<std::optional<int64_t>> group =
      plans::configValue(m, target, "head_group", 1, m.heads);
  if (!group.ok())
    return group.status();
  Expected<std::optional<int64_t>> workgroups =
      plans::configValue(m, target, "workgroups", 0, INT32_MAX);
  if (!workgroups.ok())
    return workgroups.status();
  if (!*group)
    return Status::error(ErrorCode::InvalidManifest,
                         "manifest line " + std::to_string(target.line) +
                             ": decode target '" + target.name +
                             "' config has kv_chunks but no head_group");
  Expected<std::optional<int64_t>> windowsField =
      plans::configValue(m, target, "chunk_windows", 0, 2);
  if (!windowsField.ok())
    return windowsField.status();
  // 1: windows; 2: windows or request-aligned chunks, the plan's choice
  // (the same plan shape and grid).
  const bool windows = windowsField->value_or(0) != 0;
  Expected<std::optional<int64_t>> fusedField =
      plans::configValue(m, target, "fused_merge", 0, 1);
  if (!fusedField.ok())
    return fusedField.status();
  const bool fused = fusedField->value_or(0) != 0;
  const int64_t groups = (m.heads + **group - 1) / **group;
  const int64_t aim = schedule::chunkSlots(kvChunks, groups, windows);
  const int64_t rows = schedule::planRows(windows);
  static_assert(schedule::planRows(false) == 3 && schedule::planRows(true) == 9,
                "the plan's description below");
  const std::string chunksText =
      "chunkSlots(kv_chunks, head groups) = " + std::to_string(aim);
  SizeRule one = SizeRule::constantOf(1, "1");
  SizeRule batch = SizeRule::symbolOf(Batch, "the batch");
  SizeRule slots = SizeRule::symbolOf(Batch, "batch + " + chunksText, aim);
  SizeRule planCols = SizeRule::symbolOf(
      Batch, "batch + " + chunksText + " + 2", aim + schedule::kPlanHeader);
  SizeRule qLen = SizeRule::symbolOf(QLen, "q_len");
  SizeRule heads = SizeRule::symbolOf(Heads, "heads");
  SizeRule latent = SizeRule::symbolOf(Latent, "latent_dim");
  SizeRule gridX = slots;
  if (workgroups->value_or(0) > 0)
    gridX = SizeRule::constantOf(**workgroups, "workgroups");
  else if (windows)
    gridX = SizeRule::constantOf(
        schedule::chunkTarget(kvChunks, groups),
        "the windows, chunkTarget(kv_chunks, head groups) = " +
            std::to_string(schedule::chunkTarget(kvChunks, groups)));
  plan.workspaces = {
      {DType::I32,
       {SizeRule::constantOf(rows, std::to_string(rows)), planCols},
       windows ? "plan [9, batch + chunks + 2]"
               : "plan [3, batch + chunks + 2]"},
      {DType::F32,
       {slots, qLen, heads, latent},
       "o_part [batch + chunks, q_len, heads, latent_dim]"},
      {DType::F32,
       {slots, qLen, heads},
       "lse_part [batch + chunks, q_len, heads]"},
  };
  plan.launches = {
      {{one, one, one},
       {roles::kSeqLens},
       {0},
       "the plan of chunks from the lengths",
       /*plan=*/true},
      {{one, one, one}, // setKeyRangeGrid below
       plans::rolesOf(m, KernelKind::Decode, isInputRole, true),
       {0, 1, 2},
       "the partial results of the chunks"},
      {{batch, qLen, heads},
       plans::rolesOf(m, KernelKind::Decode, isOutputRole, false),
       {0, 1, 2},
       "the merge of each request's chunks per query and head"},
  };
  // fused_merge: the chunks merge their requests (no merge launch); the
  // chunks launch then also writes the outputs.
  if (fused) {
    plan.launches.pop_back();
    plan.launches[1].roles =
        plans::rolesOf(m, KernelKind::Decode, plans::anyRole, true);
    plan.launches[1].what =
        "the partial results of the chunks and, by the last chunk of each "
        "request, its merge";
  }
  setKeyRangeGrid(plan.launches[1], gridX,
                  SizeRule::constantOf(groups, "ceil(heads / head_group) = " +
                                                   std::to_string(groups)),
                  one, groups);
  return plan;
}

/// What every decode target runs (docs/Architecture.md, "Decode: what
/// mla-tile builds"): the partial results of kv_splits key ranges per
/// request and head group, in two f32 workspaces, then their merge per
/// request, query and head. kv_splits and head_group come from the config;
/// a package without them (written before targets had a `config` line)
/// leaves them free, and its sizes must still agree with each other.
Expected<plans::KindPlan> decodePlan(const Manifest &m,
                                     const TargetSpec &target) {
  using plans::SizeRule;
  plans::KindPlan plan;
  enum { Batch, QLen, Heads, Latent };
  plan.symbols = {
      {"batch",
       {{Role::Q, 0},
        {Role::BlockTable, 0},
        {Role::SeqLens, 0},
        {Role::O, 0},
        {Role::Lse, 0}}},
      {"q_len", {{Role::Q, 1}, {Role::O, 1}, {Role::Lse, 1}}, m.qLen},
      {"heads", {{Role::Q, 2}, {Role::O, 2}, {Role::Lse, 2}}, m.heads},
      {"latent_dim", {{Role::O, 3}}, m.latentDim},
  };
  if (m.qLen == 0)
    plan.symbols[QLen].value = -1;
  Expected<std::optional<int64_t>> chunks =
      plans::configValue(m, target, "kv_chunks", 0, INT32_MAX);
  if (!chunks.ok())
    return chunks.status();
  if (chunks->value_or(0) > 0)
    return chunkPlan(m, target, std::move(plan), **chunks);
  Expected<std::optional<int64_t>> splits =
      plans::configValue(m, target, "kv_splits", 1, INT32_MAX);
  if (!splits.ok())
    return splits.status();
  Expected<std::optional<int64_t>> group =
      plans::configValue(m, target, "head_group", 1, m.heads);
  if (!group.ok())
    return group.status();
  SizeRule s = SizeRule::constantOf(splits->value_or(0), "kv_splits");
  if (!*splits) {
    plan.freeConstants.push_back({"kv_splits", 1, INT32_MAX});
    s = SizeRule::freeOf(0, "kv_splits");
  }
  SizeRule groups = SizeRule::freeOf(
      static_cast<int>(plan.freeConstants.size()), "ceil(heads / head_group)");
  if (*group)
    groups = SizeRule::constantOf((m.heads + **group - 1) / **group,
                                  "ceil(heads / head_group) = ceil(" +
                                      std::to_string(m.heads) + " / " +
                                      std::to_string(**group) + ")");
  else
    plan.freeConstants.push_back({"ceil(heads / head_group)", 1, m.heads});
  SizeRule batch = SizeRule::symbolOf(Batch, "the batch");
  SizeRule qLen = SizeRule::symbolOf(QLen, "q_len");
  SizeRule heads = SizeRule::symbolOf(Heads, "heads");
  SizeRule latent = SizeRule::symbolOf(Latent, "latent_dim");
  plan.workspaces = {
      {DType::F32,
       {batch, qLen, heads, s, latent},
       "o_part [batch, q_len, heads, kv_splits, latent_dim]"},
      {DType::F32,
       {batch, qLen, heads, s},
       "lse_part [batch, q_len, heads, kv_splits]"},
  };
  plan.launches = {
      {{batch, groups, s}, // setKeyRangeGrid below
       plans::rolesOf(m, KernelKind::Decode, isInputRole, true),
       {0, 1},
       "the partial results per request, head group and KV split"},
      {{batch, qLen, heads},
       plans::rolesOf(m, KernelKind::Decode, isOutputRole, false),
       {0, 1},
       "the merge of the splits per request, query and head"},
  };
  setKeyRangeGrid(plan.launches[0], batch, groups, s,
                  *group ? (m.heads + **group - 1) / **group : 1);
  return plan;
}

} // namespace

static Status checkDecodeManifest(const Manifest &m) {
  auto fail = [](const std::string &message) {
    return Status::error(ErrorCode::InvalidManifest,
                         std::string(kernels::kDecode) + " manifest " +
                             message);
  };
  if (!m.dtype)
    return fail("needs a 'dtype' line");
  std::pair<const char *, int64_t> keys[] = {{"heads", m.heads},
                                             {"q_len", m.qLen},
                                             {"latent_dim", m.latentDim},
                                             {"rope_dim", m.ropeDim},
                                             {"page_size", m.pageSize}};
  for (auto [key, value] : keys)
    if (value < 0)
      return fail(std::string("needs a '") + key + "' line");

  for (const KindRole &rule : kindRoles(KernelKind::Decode)) {
    const ManifestArg *arg = m.findArg(rule.name);
    if (!arg)
      return fail(std::string("needs an arg with role '") + rule.name + "'");
    if (arg->kind != rule.argKind)
      return manifestError(*arg, rule.argKind == ArgKind::Scalar
                                     ? "must be a scalar"
                                     : "must be a memref");
    if (rule.argKind == ArgKind::Scalar) {
      if (!isFloatingPoint(arg->dtype))
        return manifestError(*arg, "must have a floating-point dtype");
      continue;
    }
    if (arg->dims.size() != static_cast<size_t>(rule.rank))
      return manifestError(*arg, "must have rank " + std::to_string(rule.rank) +
                                     ", has " +
                                     std::to_string(arg->dims.size()));
    DType wanted = *m.dtype;
    if (rule.role == Role::Lse)
      wanted = DType::F32;
    if (rule.role == Role::BlockTable || rule.role == Role::SeqLens) {
      if (arg->dtype != DType::I32 && arg->dtype != DType::I64)
        return manifestError(*arg, "must have dtype i32 or i64");
    } else if (arg->dtype != wanted) {
      return manifestError(*arg, std::string("must have dtype ") +
                                     dtypeName(wanted) + ", has " +
                                     dtypeName(arg->dtype));
    }
    auto expected = expectedDims(m, rule.role);
    for (size_t d = 0; d < expected.size(); ++d) {
      auto [value, what] = expected[d];
      int64_t actual = arg->dims[d];
      if (value == kAnyDim || actual == value)
        continue;
      if (value == kDynamicDim)
        return manifestError(*arg, "dim " + std::to_string(d) +
                                       " must be '?' because " + what +
                                       " is 0 (dynamic)");
      if (actual != kDynamicDim)
        return manifestError(*arg, "dim " + std::to_string(d) + " is " +
                                       std::to_string(actual) + ", expected " +
                                       std::to_string(value) + " (" + what +
                                       ")");
    }
  }
  return plans::checkTargetPlans(m, decodePlan);
}

static Status validateDecodeArgs(const Manifest &m,
                                 const std::vector<ArgValue> &args,
                                 const std::vector<const void *> &hostData) {
  const TensorView &q = tensorOf(m, args, roles::kQ);
  const TensorView &kv = tensorOf(m, args, roles::kKv);
  const TensorView &blockTable = tensorOf(m, args, roles::kBlockTable);
  const TensorView &seqLens = tensorOf(m, args, roles::kSeqLens);
  const TensorView &o = tensorOf(m, args, roles::kO);
  const TensorView &lse = tensorOf(m, args, roles::kLse);
  if (Status s = checkScale(m, args); !s.ok())
    return s;
  // The manifest may leave them '?'; the code and the plan are the
  // header's.
  if (m.qLen > 0)
    if (Status s = checkDim(roles::kQ, q, 1, m.qLen, "q_len"); !s.ok())
      return s;
  if (Status s = checkDim(roles::kQ, q, 2, m.heads, "heads"); !s.ok())
    return s;

  int64_t batch = q.shape[0];
  std::pair<const char *, const TensorView *> batched[] = {
      {roles::kBlockTable, &blockTable},
      {roles::kSeqLens, &seqLens},
      {roles::kO, &o},
      {roles::kLse, &lse}};
  for (auto [role, t] : batched)
    if (Status s = checkDim(role, *t, 0, batch, "the batch size, q dim 0");
        !s.ok())
      return s;
  for (auto [role, t] :
       {std::pair{roles::kO, &o}, std::pair{roles::kLse, &lse}}) {
    if (Status s = checkDim(role, *t, 1, q.shape[1], "q_len, q dim 1"); !s.ok())
      return s;
    if (Status s = checkDim(role, *t, 2, q.shape[2], "heads, q dim 2"); !s.ok())
      return s;
  }
  if (Status s =
          checkDim(roles::kKv, kv, 2, q.shape[3], "the row size, q dim 3");
      !s.ok())
    return s;
  if (Status s = checkDim(roles::kQ, q, 3, m.latentDim + m.ropeDim,
                          "latent_dim + rope_dim");
      !s.ok())
    return s;
  if (Status s = checkDim(roles::kO, o, 3, m.latentDim, "latent_dim"); !s.ok())
    return s;
  int64_t numPages = kv.shape[0];
  if (numPages < 1)
    return argError("kv: the page pool is empty (dim 0 is 0)");
  int64_t pageSize = kv.shape[1];
  if (m.pageSize > 0)
    if (Status s = checkDim(roles::kKv, kv, 1, m.pageSize, "page_size");
        !s.ok())
      return s;
  if (pageSize < 1)
    return argError("kv: the page size (dim 1) is 0");

  // Lengths and block-table entries are content checks: they need host
  // copies of the tensors on devices whose memory the host cannot read.
  int64_t maxPages = blockTable.shape[1];
  const void *lens = hostData[m.findArg(roles::kSeqLens)->index];
  const void *table = hostData[m.findArg(roles::kBlockTable)->index];
  if (!lens)
    return Status::success();
  int64_t capacity;
  if (__builtin_mul_overflow(maxPages, pageSize, &capacity))
    capacity = INT64_MAX;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t len = readIndex(lens, seqLens.dtype, b);
    std::string where =
        "seq_lens[" + std::to_string(b) + "] = " + std::to_string(len);
    if (len < 0)
      return argError(where + " is negative");
    if (len > capacity)
      return argError(where + " exceeds the block table's capacity (" +
                      std::to_string(maxPages) + " pages x " +
                      std::to_string(pageSize) + " = " +
                      std::to_string(capacity) + " tokens)");
    if (!table)
      continue;
    int64_t usedPages = (len + pageSize - 1) / pageSize;
    for (int64_t p = 0; p < usedPages; ++p) {
      int64_t page = readIndex(table, blockTable.dtype, b * maxPages + p);
      if (page < 0 || page >= numPages)
        return argError("block_table[" + std::to_string(b) + "][" +
                        std::to_string(p) + "] = " + std::to_string(page) +
                        " is outside the page pool (kv has " +
                        std::to_string(numPages) + " pages)");
    }
  }
  return Status::success();
}

static size_t decodePlanLaunches(const Manifest &m, const TargetSpec &target) {
  Expected<plans::KindPlan> plan = decodePlan(m, target);
  size_t n = 0;
  if (plan.ok())
    while (n < plan->launches.size() && plan->launches[n].plan)
      ++n;
  return n;
}

const KernelKindRules *mla::rt::findKernelKindRules(std::string_view kind) {
  static const KernelKindRules kRules[] = {
      {KernelKind::Decode, checkDecodeManifest, validateDecodeArgs,
       decodePlanLaunches},
      {KernelKind::Prefill, checkPrefillManifest, validatePrefillArgs},
      {KernelKind::Merge, checkMergeManifest, validateMergeArgs},
      {KernelKind::AppendKv, checkAppendKvManifest, validateAppendKvArgs},
  };
  std::optional<KernelKind> known = findKind(kind);
  for (const KernelKindRules &rules : kRules)
    if (known && rules.kind == *known)
      return &rules;
  return nullptr;
}
