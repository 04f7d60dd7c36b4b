//===- KindPlans.cpp - Checking a target's plan against its kind ----------===//

#include "KindPlans.h"

#include <algorithm>
#include <charconv>

using namespace mla::rt;
using namespace mla::rt::plans;

SizeRule SizeRule::constantOf(int64_t value, std::string what) {
  SizeRule rule;
  rule.kind = Constant;
  rule.constant = value;
  rule.what = std::move(what);
  return rule;
}

SizeRule SizeRule::freeOf(int constant, std::string what) {
  SizeRule rule;
  rule.kind = Free;
  rule.index = constant;
  rule.what = std::move(what);
  return rule;
}

SizeRule SizeRule::symbolOf(int symbol, std::string what, int64_t addend,
                            int64_t divisor) {
  SizeRule rule;
  rule.kind = Symbol;
  rule.index = symbol;
  rule.addend = addend;
  rule.divisor = divisor;
  rule.what = std::move(what);
  return rule;
}

namespace {

/// A size after resolution: a known value, ceil((symbol + addend) /
/// divisor) of a size only a launch knows, or a dim the kind does not name.
struct Resolved {
  enum Kind { Known, Symbolic, Unnamed } kind = Unnamed;
  int64_t value = 0;
  int symbol = -1;
  int64_t addend = 0;
  int64_t divisor = 1;
};

/// What evalDim computes at launch for a dim of `size`; nullopt on
/// overflow (no sensible manifest gets there).
std::optional<int64_t> ceilSize(int64_t size, int64_t addend, int64_t divisor) {
  int64_t v;
  if (__builtin_add_overflow(size, addend, &v))
    return std::nullopt;
  return v <= 0 ? 0 : v / divisor + (v % divisor != 0);
}

class PlanChecker {
public:
  PlanChecker(const Manifest &m, const TargetSpec &target, const KindPlan &plan)
      : m(m), target(target), plan(plan), bound(plan.freeConstants.size()) {
    // A size the header leaves open is still known when the manifest fixes
    // one of its dims (validation makes the others agree at launch).
    for (const SizeSymbol &symbol : plan.symbols) {
      int64_t value = symbol.value;
      for (auto [role, dim] : symbol.dims)
        if (const ManifestArg *arg = m.findArg(roleName(role)))
          if (value < 0 && dim < static_cast<int>(arg->dims.size()) &&
              arg->dims[dim] != kDynamicDim)
            value = arg->dims[dim];
      values.push_back(value);
    }
  }

  Status check();

private:
  /// A launch plan that is not this runtime's: the manifest line, what
  /// differs, and its likeliest cause (kForeignPlanHint).
  Status fail(int line, const std::string &message) const {
    return Status::error(ErrorCode::InvalidManifest,
                         "manifest line " + std::to_string(line) + ": " +
                             m.kernel + " target '" + target.name + "' " +
                             message + kForeignPlanHint);
  }
  Status checkWorkspace(const WorkspaceSpec &spec, const WorkspaceRule &rule);
  Status checkLaunch(const LaunchSpec &spec, const LaunchRule &rule);
  Status checkLaunchArgs(const LaunchSpec &spec, const LaunchRule &rule);
  /// Empty when `size` satisfies `rule` (binding free constants); else
  /// what was expected.
  std::string mismatch(const DimExpr &size, const SizeRule &rule);
  Resolved resolve(const DimExpr &size) const;
  std::string spell(const DimExpr &size) const;
  std::string symbolDims(int symbol) const;
  std::string indexName(int index) const {
    return index < static_cast<int>(m.args.size())
               ? "'" + m.args[index].role + "'"
               : "workspace " + std::to_string(index);
  }

  const Manifest &m;
  const TargetSpec &target;
  const KindPlan &plan;
  std::vector<int64_t> values;
  std::vector<std::optional<int64_t>> bound;
};

} // namespace

Resolved PlanChecker::resolve(const DimExpr &size) const {
  Resolved r;
  if (size.isConstant()) {
    r.kind = Resolved::Known;
    r.value = size.constant;
    return r;
  }
  const ManifestArg &arg = m.args[size.argIndex];
  int64_t known = arg.dims[size.dim];
  std::optional<Role> role = findRole(arg.role);
  for (size_t s = 0; s < plan.symbols.size() && known == kDynamicDim; ++s)
    for (auto [symbolRole, dim] : plan.symbols[s].dims)
      if (role && *role == symbolRole && dim == size.dim) {
        if (values[s] >= 0) {
          known = values[s];
          break;
        }
        r.kind = Resolved::Symbolic;
        r.symbol = static_cast<int>(s);
        r.addend = size.addend;
        r.divisor = size.divisor;
        return r;
      }
  if (known == kDynamicDim)
    return r; // Unnamed
  std::optional<int64_t> value = ceilSize(known, size.addend, size.divisor);
  if (!value)
    return r;
  r.kind = Resolved::Known;
  r.value = *value;
  return r;
}

std::string PlanChecker::spell(const DimExpr &size) const {
  if (size.isConstant())
    return std::to_string(size.constant);
  std::string text =
      "arg" + std::to_string(size.argIndex) + "." + std::to_string(size.dim);
  if (size.addend)
    text += (size.addend > 0 ? "+" : "-") +
            std::to_string(size.addend > 0 ? size.addend : -size.addend);
  if (size.divisor != 1)
    text += "/" + std::to_string(size.divisor);
  return "'" + text + "' (" + m.args[size.argIndex].role + " dim " +
         std::to_string(size.dim) + ")";
}

std::string PlanChecker::symbolDims(int symbol) const {
  std::string out;
  const auto &dims = plan.symbols[symbol].dims;
  for (size_t i = 0; i < dims.size(); ++i)
    out += std::string(i == 0                 ? ""
                       : i + 1 == dims.size() ? " or "
                                              : ", ") +
           roleName(dims[i].first) + " dim " + std::to_string(dims[i].second);
  return out;
}

std::string PlanChecker::mismatch(const DimExpr &size, const SizeRule &rule) {
  Resolved have = resolve(size);
  switch (rule.kind) {
  case SizeRule::Constant:
    if (have.kind == Resolved::Known && have.value == rule.constant)
      return "";
    return std::to_string(rule.constant) + " (" + rule.what + ")";
  case SizeRule::Free: {
    const FreeConstant &free = plan.freeConstants[rule.index];
    std::optional<int64_t> &value = bound[rule.index];
    if (value)
      return have.kind == Resolved::Known && have.value == *value
                 ? ""
                 : std::to_string(*value) + " (" + rule.what +
                       ", as its first use says)";
    if (have.kind == Resolved::Known && have.value >= free.min &&
        have.value <= free.max) {
      value = have.value;
      return "";
    }
    return "a constant in [" + std::to_string(free.min) + ", " +
           std::to_string(free.max) + "] (" + rule.what + ")";
  }
  case SizeRule::Symbol:
    break;
  }
  int64_t divisor = rule.divisor;
  std::optional<int64_t> *freeDivisor =
      rule.freeDivisor >= 0 ? &bound[rule.freeDivisor] : nullptr;
  bool divisorKnown = !freeDivisor || freeDivisor->has_value();
  if (freeDivisor && freeDivisor->has_value())
    divisor = **freeDivisor;
  std::string dims = symbolDims(rule.index);
  if (values[rule.index] >= 0 && divisorKnown) {
    std::optional<int64_t> want =
        ceilSize(values[rule.index], rule.addend, divisor);
    if (want && have.kind == Resolved::Known && have.value == *want)
      return "";
    return (want ? std::to_string(*want) : std::string("?")) + " (" +
           rule.what + ")";
  }
  bool same = have.kind == Resolved::Symbolic && have.symbol == rule.index &&
              have.addend == rule.addend;
  if (same && !divisorKnown) {
    const FreeConstant &free = plan.freeConstants[rule.freeDivisor];
    if (have.divisor >= free.min && have.divisor <= free.max) {
      *freeDivisor = have.divisor;
      return "";
    }
  } else if (same && have.divisor == divisor) {
    return "";
  }
  return rule.what + " (" + plan.symbols[rule.index].name + ": " + dims + ")";
}

Status PlanChecker::checkWorkspace(const WorkspaceSpec &spec,
                                   const WorkspaceRule &rule) {
  std::string where =
      "workspace " + std::to_string(spec.index) + " (" + rule.what + ")";
  if (spec.dtype != rule.dtype)
    return fail(spec.line, where + " has dtype " + dtypeName(spec.dtype) +
                               ", expected " + dtypeName(rule.dtype));
  if (spec.dims.size() != rule.dims.size())
    return fail(spec.line,
                where + " has rank " + std::to_string(spec.dims.size()) +
                    ", expected " + std::to_string(rule.dims.size()));
  for (size_t d = 0; d < spec.dims.size(); ++d)
    if (std::string want = mismatch(spec.dims[d], rule.dims[d]); !want.empty())
      return fail(spec.line, where + " dim " + std::to_string(d) + " is " +
                                 spell(spec.dims[d]) + ", expected " + want);
  return Status::success();
}

Status PlanChecker::checkLaunchArgs(const LaunchSpec &spec,
                                    const LaunchRule &rule) {
  std::vector<int> expected;
  for (const std::string &role : rule.roles)
    expected.push_back(m.findArg(role)->index);
  for (int w : rule.workspaces)
    expected.push_back(static_cast<int>(m.args.size()) + w);
  std::string takes;
  for (int index : expected)
    takes += (takes.empty() ? "" : ", ") + indexName(index);
  std::string where = "launch '" + spec.entry + "' (" + rule.what + ")";
  std::vector<int> seen;
  for (int index : spec.args) {
    if (std::find(seen.begin(), seen.end(), index) != seen.end())
      return fail(spec.line, where + " passes " + indexName(index) +
                                 " twice (it takes each of " + takes +
                                 " once)");
    if (std::find(expected.begin(), expected.end(), index) == expected.end())
      return fail(spec.line, where + " passes " + indexName(index) +
                                 ", which it does not take (it takes " + takes +
                                 ")");
    seen.push_back(index);
  }
  for (int index : expected)
    if (std::find(seen.begin(), seen.end(), index) == seen.end())
      return fail(spec.line, where + " does not pass " + indexName(index) +
                                 " (it takes " + takes + ")");
  return Status::success();
}

Status PlanChecker::checkLaunch(const LaunchSpec &spec,
                                const LaunchRule &rule) {
  if (Status s = checkLaunchArgs(spec, rule); !s.ok())
    return s;
  const char *axes[] = {"x", "y", "z"};
  const std::vector<std::optional<int64_t>> before = bound;
  for (int d = 0; d < 3; ++d) {
    std::string want = mismatch(spec.grid[d], rule.grid[d]);
    if (want.empty())
      continue;
    // A package written before the grid's current order.
    if (rule.earlierGrid) {
      std::vector<std::optional<int64_t>> tried = bound;
      bound = before;
      bool earlier = true;
      for (int e = 0; e < 3 && earlier; ++e)
        earlier = mismatch(spec.grid[e], (*rule.earlierGrid)[e]).empty();
      if (earlier)
        return Status::success();
      bound = tried;
    }
    return fail(spec.line, "launch '" + spec.entry + "' (" + rule.what +
                               ") grid " + axes[d] + " is " +
                               spell(spec.grid[d]) + ", expected " + want);
  }
  return Status::success();
}

Status PlanChecker::check() {
  auto names = [](const auto &rules) {
    std::string out;
    for (const auto &rule : rules)
      out += (out.empty() ? "" : ", then ") + std::string(rule.what);
    return out.empty() ? std::string("none") : out;
  };
  if (target.workspaces.size() != plan.workspaces.size())
    return fail(target.line, "has " + std::to_string(target.workspaces.size()) +
                                 " workspaces, expected " +
                                 std::to_string(plan.workspaces.size()) + " (" +
                                 names(plan.workspaces) + ")");
  for (size_t w = 0; w < plan.workspaces.size(); ++w)
    if (Status s = checkWorkspace(target.workspaces[w], plan.workspaces[w]);
        !s.ok())
      return s;
  if (target.launches.size() != plan.launches.size())
    return fail(target.line, "has " + std::to_string(target.launches.size()) +
                                 " launches, expected " +
                                 std::to_string(plan.launches.size()) + " (" +
                                 names(plan.launches) + ")");
  for (size_t l = 0; l < plan.launches.size(); ++l)
    if (Status s = checkLaunch(target.launches[l], plan.launches[l]); !s.ok())
      return s;
  return Status::success();
}

Status plans::checkTargetPlan(const Manifest &m, const TargetSpec &target,
                              const KindPlan &plan) {
  return PlanChecker(m, target, plan).check();
}

Status plans::checkTargetPlans(
    const Manifest &m,
    Expected<KindPlan> (*planOf)(const Manifest &, const TargetSpec &)) {
  for (const TargetSpec &target : m.targets) {
    Expected<KindPlan> plan = planOf(m, target);
    if (!plan.ok())
      return plan.status();
    if (Status s = checkTargetPlan(m, target, *plan); !s.ok())
      return s;
  }
  return Status::success();
}

Expected<std::optional<int64_t>> plans::configValue(const Manifest &m,
                                                    const TargetSpec &target,
                                                    const char *key,
                                                    int64_t min, int64_t max) {
  auto it = target.config.find(key);
  if (it == target.config.end()) {
    it = m.config.find(key);
    if (it == m.config.end())
      return std::optional<int64_t>();
  }
  const std::string &text = it->second;
  int64_t value = 0;
  auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min ||
      value > max)
    return Status::error(ErrorCode::InvalidManifest,
                         "manifest line " + std::to_string(target.line) + ": " +
                             m.kernel + " target '" + target.name +
                             "' config " + key + "=" + text +
                             " is not an integer in [" + std::to_string(min) +
                             ", " + std::to_string(max) + "]");
  return std::optional<int64_t>(value);
}

std::vector<std::string> plans::rolesOf(const Manifest &m, KernelKind kind,
                                        bool (*pick)(const KindRole &),
                                        bool withExtras) {
  std::vector<std::string> roles;
  KindRoles table = kindRoles(kind);
  for (const KindRole &entry : table)
    if (pick(entry))
      roles.push_back(entry.name);
  if (withExtras)
    for (const ManifestArg &arg : m.args) {
      std::optional<Role> role = findRole(arg.role);
      if (!role || !table.find(*role))
        roles.push_back(arg.role);
    }
  return roles;
}
