//===- KindPlans.h - What a kernel kind requires of a target's plan -*- C++
//-*-//
//
// A target block of a manifest says how the kernel runs: its workspaces and
// its launches (arguments, grid). For the kinds of Kinds.def that plan is
// not free: the kind and the target's config determine it (decode: two
// launches over (batch, ceil(heads / head_group), kv_splits) and (batch,
// q_len, heads) with two f32 workspaces of kv_splits partial results;
// prefill: one launch over (ceil(rows / tile_q), heads, requests); ...).
// A package is code, and the runtime does not verify what the code does;
// it does verify that the manifest's plan is the one the kind requires, so
// that a manifest whose grid skips work (unwritten outputs), whose grid or
// workspaces disagree (writes past a buffer) or whose launches pass the
// wrong arguments is refused at load, before anything runs.
//
// A kind's rules describe its plan (KindPlan) from the header and the
// config; checkTargetPlan compares a target block with it. Sizes are
// compared as expressions: a manifest size `argI.D[+C][/K]` matches a rule
// when dim D of arg I is one of the dims the rule's size names (dims that
// validation makes equal at launch, e.g. q dim 0 and lse dim 0 are both the
// batch) with the same C and K, or when both are known constants (static
// dims, header values) of the same value.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LIB_KINDPLANS_H
#define MLA_RUNTIME_LIB_KINDPLANS_H

#include "mla/runtime/Kinds.h"
#include "mla/runtime/Manifest.h"
#include "mla/runtime/Status.h"

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mla::rt::plans {

/// A size the kind names: dims of its arguments that hold one value at
/// launch (its validation makes them agree), and that value when the
/// header fixes it.
struct SizeSymbol {
  /// For messages: "batch", "heads".
  const char *name;
  std::vector<std::pair<Role, int>> dims;
  /// The header's value; -1 when only a launch knows it.
  int64_t value = -1;
};

/// A free constant of the plan (a config value the manifest does not
/// state): the first size that uses it binds it, every other use must
/// agree. Packages written before targets had a `config` line leave their
/// configs free.
struct FreeConstant {
  /// For messages: "kv_splits".
  const char *name;
  int64_t min = 1;
  int64_t max = INT64_MAX;
};

/// One size the kind requires: a constant, a free constant, or
/// ceil((symbol + addend) / divisor) (divisor possibly free).
struct SizeRule {
  enum Kind { Constant, Free, Symbol } kind = Constant;
  int64_t constant = 0;
  /// Free: the FreeConstant; Symbol: the SizeSymbol (indices into the
  /// plan's lists).
  int index = -1;
  int64_t addend = 0;
  int64_t divisor = 1;
  /// >= 0: the divisor is that FreeConstant.
  int freeDivisor = -1;
  /// How messages name it: "kv_splits", "ceil(heads / head_group)".
  std::string what;

  static SizeRule constantOf(int64_t value, std::string what);
  static SizeRule freeOf(int constant, std::string what);
  static SizeRule symbolOf(int symbol, std::string what, int64_t addend = 0,
                           int64_t divisor = 1);
};

struct WorkspaceRule {
  DType dtype;
  std::vector<SizeRule> dims;
  /// "o_part", for messages.
  const char *what;
};

/// A launch: its grid and the arguments it passes (each once, in any
/// order: the order is the code's parameter order, which the runtime
/// cannot see on every target).
struct LaunchRule {
  std::array<SizeRule, 3> grid;
  /// Manifest roles, and indices into KindPlan::workspaces.
  std::vector<std::string> roles;
  std::vector<int> workspaces;
  /// "the split-KV partial launch", for messages.
  const char *what;
  /// Reads seq_lens alone and writes only workspaces that no later launch
  /// writes (but decode's fused_merge counters, which the chunks launch
  /// returns to zero): a plan that a later launch with the same lengths
  /// can reuse (LaunchOptions::reusePlan skips the leading launches marked
  /// so).
  bool plan = false;
  /// The grid of packages written before `grid`'s order, still accepted
  /// (decode's key ranges before their head groups moved to dim 0).
  std::optional<std::array<SizeRule, 3>> earlierGrid = std::nullopt;
};

struct KindPlan {
  std::vector<SizeSymbol> symbols;
  std::vector<FreeConstant> freeConstants;
  std::vector<WorkspaceRule> workspaces;
  std::vector<LaunchRule> launches;
};

/// What every plan mismatch ends with: its likeliest cause, a package from
/// an mla-compile whose launch plans differ from this runtime's.
inline constexpr const char *kForeignPlanHint =
    " (not this runtime's launch plan: compile the package with the "
    "mla-compile of this runtime)";

/// Checks `target` of `m` against `plan` (InvalidManifest errors naming
/// the line and the field, then kForeignPlanHint: "manifest line 22: decode
/// target 'sm_90a' launch 'decode_k0' grid y is 0, expected 1 (ceil(heads /
/// head_group) = ceil(16 / 16)) (not this runtime's launch plan: ...)").
Status checkTargetPlan(const Manifest &m, const TargetSpec &target,
                       const KindPlan &plan);

/// Builds the plan of each target of `m` with `planOf` and checks the
/// target against it.
Status checkTargetPlans(const Manifest &m,
                        Expected<KindPlan> (*planOf)(const Manifest &,
                                                     const TargetSpec &));

/// The config value `key` of `target` (else of the manifest's own
/// `config`), nullopt when neither has it; an error when it is not an
/// integer in [min, max].
Expected<std::optional<int64_t>> configValue(const Manifest &m,
                                             const TargetSpec &target,
                                             const char *key, int64_t min,
                                             int64_t max);

/// A rolesOf pick that takes every role of the kind.
inline bool anyRole(const KindRole &) { return true; }

/// The manifest roles of `kind`'s table entries that `pick` accepts, then,
/// when `withExtras`, every manifest arg whose role is not in the table
/// (the inputs of a variant's regions).
std::vector<std::string> rolesOf(const Manifest &m, KernelKind kind,
                                 bool (*pick)(const KindRole &),
                                 bool withExtras);

} // namespace mla::rt::plans

#endif // MLA_RUNTIME_LIB_KINDPLANS_H
