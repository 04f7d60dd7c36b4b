//===- DecodeKind.cpp - Rules of `kernel decode` --------------------------===//
//
// A decode kernel attends q [batch, q_len, heads, latent_dim + rope_dim] over
// a paged KV cache: page pool kv [num_pages, page_size, latent_dim +
// rope_dim], block_table [batch, max_pages_per_seq], seq_lens [batch]; it
// writes o [batch, q_len, heads, latent_dim] and lse [batch, q_len, heads].
//
//===----------------------------------------------------------------------===//

#include "KernelKinds.h"

#include <array>
#include <cstdint>
#include <string>

using namespace mla::rt;

namespace {

/// What a decode manifest requires of one role. Expected dims: a value, or
/// kAnyDim when the header does not constrain it.
constexpr int64_t kAnyDim = -2;

struct RoleRule {
  const char *role;
  ArgKind kind;
  /// Required rank (memrefs).
  size_t rank;
};

constexpr std::array<RoleRule, 7> kRoles = {{
    {"q", ArgKind::Memref, 4},
    {"kv", ArgKind::Memref, 3},
    {"block_table", ArgKind::Memref, 2},
    {"seq_lens", ArgKind::Memref, 1},
    {"scale", ArgKind::Scalar, 0},
    {"o", ArgKind::Memref, 4},
    {"lse", ArgKind::Memref, 3},
}};

Status manifestError(const ManifestArg &arg, const std::string &message) {
  return Status::error(ErrorCode::InvalidManifest,
                       "manifest line " + std::to_string(arg.line) +
                           ": decode arg '" + arg.role + "' " + message);
}

/// The header-implied dims of a role; kDynamicDim where the header says the
/// dim is dynamic (q_len 0, page_size 0).
std::vector<std::pair<int64_t, const char *>>
expectedDims(const Manifest &m, std::string_view role) {
  int64_t row = m.latentDim + m.ropeDim;
  int64_t qLen = m.qLen == 0 ? kDynamicDim : m.qLen;
  int64_t pageSize = m.pageSize == 0 ? kDynamicDim : m.pageSize;
  if (role == "q")
    return {{kAnyDim, ""},
            {qLen, "q_len"},
            {m.heads, "heads"},
            {row, "latent_dim + rope_dim"}};
  if (role == "kv")
    return {
        {kAnyDim, ""}, {pageSize, "page_size"}, {row, "latent_dim + rope_dim"}};
  if (role == "o")
    return {{kAnyDim, ""},
            {qLen, "q_len"},
            {m.heads, "heads"},
            {m.latentDim, "latent_dim"}};
  if (role == "lse")
    return {{kAnyDim, ""}, {qLen, "q_len"}, {m.heads, "heads"}};
  return {};
}

int64_t readIndex(const void *data, DType dtype, size_t i) {
  if (dtype == DType::I64)
    return static_cast<const int64_t *>(data)[i];
  return static_cast<const int32_t *>(data)[i];
}

Status argError(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, message);
}

} // namespace

static Status checkDecodeManifest(const Manifest &m) {
  auto fail = [](const std::string &message) {
    return Status::error(ErrorCode::InvalidManifest,
                         "decode manifest " + message);
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

  for (const RoleRule &rule : kRoles) {
    const ManifestArg *arg = m.findArg(rule.role);
    if (!arg)
      return fail(std::string("needs an arg with role '") + rule.role + "'");
    if (arg->kind != rule.kind)
      return manifestError(*arg, rule.kind == ArgKind::Scalar
                                     ? "must be a scalar"
                                     : "must be a memref");
    std::string_view role = rule.role;
    if (rule.kind == ArgKind::Scalar) {
      if (!isFloatingPoint(arg->dtype))
        return manifestError(*arg, "must have a floating-point dtype");
      continue;
    }
    if (arg->dims.size() != rule.rank)
      return manifestError(*arg, "must have rank " + std::to_string(rule.rank) +
                                     ", has " +
                                     std::to_string(arg->dims.size()));
    DType wanted = *m.dtype;
    if (role == "lse")
      wanted = DType::F32;
    if (role == "block_table" || role == "seq_lens") {
      if (arg->dtype != DType::I32 && arg->dtype != DType::I64)
        return manifestError(*arg, "must have dtype i32 or i64");
    } else if (arg->dtype != wanted) {
      return manifestError(*arg, std::string("must have dtype ") +
                                     dtypeName(wanted) + ", has " +
                                     dtypeName(arg->dtype));
    }
    auto expected = expectedDims(m, role);
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
  return Status::success();
}

static Status validateDecodeArgs(const Manifest &m,
                                 const std::vector<ArgValue> &args,
                                 const std::vector<const void *> &hostData) {
  auto tensor = [&](const char *role) -> const TensorView & {
    return args[m.findArg(role)->index].tensor();
  };
  const TensorView &q = tensor("q");
  const TensorView &kv = tensor("kv");
  const TensorView &blockTable = tensor("block_table");
  const TensorView &seqLens = tensor("seq_lens");
  const TensorView &o = tensor("o");
  const TensorView &lse = tensor("lse");

  auto checkDim = [](const char *role, const TensorView &t, size_t d,
                     int64_t value, const std::string &what) {
    if (t.shape[d] == value)
      return Status::success();
    return argError(std::string(role) + ": dim " + std::to_string(d) + " is " +
                    std::to_string(t.shape[d]) + ", expected " +
                    std::to_string(value) + " (" + what + ")");
  };
  int64_t batch = q.shape[0];
  std::pair<const char *, const TensorView *> batched[] = {
      {"block_table", &blockTable},
      {"seq_lens", &seqLens},
      {"o", &o},
      {"lse", &lse}};
  for (auto [role, t] : batched)
    if (Status s = checkDim(role, *t, 0, batch, "the batch size, q dim 0");
        !s.ok())
      return s;
  for (auto [role, t] : {std::pair{"o", &o}, std::pair{"lse", &lse}}) {
    if (Status s = checkDim(role, *t, 1, q.shape[1], "q_len, q dim 1"); !s.ok())
      return s;
    if (Status s = checkDim(role, *t, 2, q.shape[2], "heads, q dim 2"); !s.ok())
      return s;
  }
  if (Status s = checkDim("kv", kv, 2, q.shape[3], "the row size, q dim 3");
      !s.ok())
    return s;
  if (Status s =
          checkDim("q", q, 3, m.latentDim + m.ropeDim, "latent_dim + rope_dim");
      !s.ok())
    return s;
  if (Status s = checkDim("o", o, 3, m.latentDim, "latent_dim"); !s.ok())
    return s;
  int64_t numPages = kv.shape[0];
  if (numPages < 1)
    return argError("kv: the page pool is empty (dim 0 is 0)");
  int64_t pageSize = kv.shape[1];
  if (m.pageSize > 0)
    if (Status s = checkDim("kv", kv, 1, m.pageSize, "page_size"); !s.ok())
      return s;
  if (pageSize < 1)
    return argError("kv: the page size (dim 1) is 0");

  // Lengths and block-table entries are content checks: they need host
  // copies of the tensors on devices whose memory the host cannot read.
  int64_t maxPages = blockTable.shape[1];
  const void *lens = hostData[m.findArg("seq_lens")->index];
  const void *table = hostData[m.findArg("block_table")->index];
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

const KernelKindRules *mla::rt::findKernelKindRules(std::string_view kind) {
  static const KernelKindRules kRules[] = {
      {"decode", checkDecodeManifest, validateDecodeArgs},
      {"prefill", checkPrefillManifest, validatePrefillArgs},
      {"merge", checkMergeManifest, validateMergeArgs},
      {"append_kv", checkAppendKvManifest, validateAppendKvArgs},
  };
  for (const KernelKindRules &rules : kRules)
    if (kind == rules.name)
      return &rules;
  return nullptr;
}
