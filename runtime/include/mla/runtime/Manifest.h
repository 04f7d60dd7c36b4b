//===- Manifest.h - The kernel manifest of an .mlapkg -----------*- C++ -*-===//
//
// The manifest describes one compiled kernel: its parameters (in order), and
// per target, the scratch buffers and the sequence of grid launches that
// implement it. docs/Runtime.md has the full grammar.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_MANIFEST_H
#define MLA_RUNTIME_MANIFEST_H

#include "mla/runtime/DType.h"
#include "mla/runtime/Kinds.h"
#include "mla/runtime/Status.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mla::rt {

/// The only manifest version this runtime reads (`mla-manifest 1`).
constexpr int kManifestVersion = 1;

/// Marks a dynamic (`?`) dim in ManifestArg::dims.
constexpr int64_t kDynamicDim = -1;
/// The DIMS of a rank-0 memref (an arg or workspace holding one element):
/// `arg 7 cap memref f32 ()`.
constexpr std::string_view kRankZeroDims = "()";

/// A workspace or grid size: a constant, or `argI.D[+C|-C][/K]` = ceil((dim D
/// of memref argument I + C) / K), never below 0.
struct DimExpr {
  int64_t constant = 0;
  /// -1 for a constant; otherwise the memref argument index.
  int argIndex = -1;
  int dim = 0;
  /// `+C` / `-C` (added before dividing) and `/K` (ceiling division, K > 0).
  int64_t addend = 0;
  int64_t divisor = 1;

  bool isConstant() const { return argIndex < 0; }
  bool operator==(const DimExpr &o) const {
    return constant == o.constant && argIndex == o.argIndex && dim == o.dim &&
           addend == o.addend && divisor == o.divisor;
  }
  bool operator!=(const DimExpr &o) const { return !(*this == o); }
};

/// `arg INDEX ROLE memref DTYPE DIMS` or `arg INDEX ROLE scalar DTYPE`.
struct ManifestArg {
  int index = 0;
  std::string role;
  ArgKind kind = ArgKind::Memref;
  DType dtype = DType::F32;
  /// Memref dims; kDynamicDim for `?`. Empty for scalars and rank-0
  /// memrefs (DIMS `()`).
  std::vector<int64_t> dims;
  /// 1-based manifest line, for messages.
  int line = 0;
};

/// `workspace INDEX DTYPE DIMS`: a scratch buffer the runtime allocates.
struct WorkspaceSpec {
  int index = 0;
  DType dtype = DType::F32;
  std::vector<DimExpr> dims;
  /// 1-based manifest line, for messages.
  int line = 0;
};

/// Most threads a `block` may have (its product), on every GPU target.
constexpr int64_t kMaxBlockThreads = 1024;

/// `launch ENTRY args I,J,... grid X,Y,Z [block BX,BY,BZ] [shared BYTES]
/// [dependent]`.
struct LaunchSpec {
  std::string entry;
  /// Argument and workspace indices, in the entry's parameter order.
  std::vector<int> args;
  std::array<DimExpr, 3> grid;
  /// Threads per workgroup (GPU targets; the host backend ignores it).
  std::array<int64_t, 3> block = {1, 1, 1};
  /// Dynamic shared memory bytes per workgroup (GPU targets).
  int64_t sharedBytes = 0;
  /// `dependent`: the kernel waits, before its first memory access, for the
  /// launches before it to finish (PTX griddepcontrol.wait), so a backend
  /// may start it while they run (CUDA's programmatic dependent launch).
  /// Never on a target's first launch.
  bool dependent = false;
  /// 1-based manifest line, for messages.
  int line = 0;
};

/// `max-bytes INDEX BYTES`: argument or workspace INDEX may span at most
/// BYTES bytes for this target's code (e.g. AMD kernels address buffers with
/// 32-bit offsets). Checked before every launch of the target.
struct MaxBytesSpec {
  /// An arg index (memref) or a workspace index of the target.
  int index = 0;
  int64_t bytes = 0;
  /// 1-based manifest line, for messages.
  int line = 0;
};

/// `target NAME SECTION` ... `end-target`.
struct TargetSpec {
  std::string name;
  std::string section;
  /// `config KEY=VALUE ...` inside the block: the compiler's choices for
  /// this target. The kind's plan reads some (decode: kv_splits,
  /// head_group; prefill: tile_q), falling back to Manifest::config.
  std::map<std::string, std::string> config;
  /// Indices continue the arg numbering: workspaces[i].index ==
  /// args.size() + i.
  std::vector<WorkspaceSpec> workspaces;
  /// In execution order; each finishes before the next starts.
  std::vector<LaunchSpec> launches;
  /// Size limits, in manifest order, at most one per index.
  std::vector<MaxBytesSpec> maxBytes;
  /// 1-based manifest line of the `target` line, for messages.
  int line = 0;

  /// nullptr when INDEX has no limit.
  const MaxBytesSpec *findMaxBytes(int index) const;
};

struct Manifest {
  /// `kernel KIND`, e.g. "decode"; selects the kind-specific checks.
  std::string kernel;
  /// `function NAME`: the source-level kernel function.
  std::string function;
  /// `compiler TEXT ...`: what wrote the package, e.g. "mla-compile 1.0.0
  /// LLVM 22.1.8" (informational: its tokens joined by single spaces);
  /// empty when the manifest has no such line.
  std::string compiler;
  /// Header values; heads/qLen/latentDim/ropeDim/pageSize are -1 when the
  /// key is absent. `q_len 0` and `page_size 0` mean dynamic.
  std::optional<DType> dtype;
  int64_t heads = -1;
  int64_t qLen = -1;
  int64_t latentDim = -1;
  int64_t ropeDim = -1;
  int64_t pageSize = -1;
  /// Prefill/merge header values (-1 when absent): `qk_dim`, `v_dim`,
  /// `causal` (0 or 1), `parts` (merged partial results).
  int64_t qkDim = -1;
  int64_t vDim = -1;
  int64_t causal = -1;
  int64_t parts = -1;
  /// `config key=value ...` (compiler tuning choices): the defaults of the
  /// targets' configs.
  std::map<std::string, std::string> config;
  std::vector<ManifestArg> args;
  std::vector<TargetSpec> targets;

  /// nullptr when absent.
  const ManifestArg *findArg(std::string_view role) const;
  const TargetSpec *findTarget(std::string_view name) const;
};

/// Parses and checks manifest text. Errors are InvalidManifest, prefixed with
/// "manifest line N: " when they concern one line.
Expected<Manifest> parseManifest(std::string_view text);

/// Writes `m` as canonical manifest text, the inverse of parseManifest: for
/// every manifest `m` that parseManifest returned, parseManifest(
/// printManifest(m)) succeeds and gives back `m` (all fields but the `line`
/// numbers, which follow the printed text). The canonical form is the layout
/// mla-compile writes, one line per item, single spaces, no comments or blank
/// lines, '\n' after every line:
///
///   mla-manifest 1
///   kernel KIND
///   function NAME
///   compiler TEXT              (when m.compiler is not empty)
///   the header keys present, sorted by name: causal dtype heads latent_dim
///     page_size parts q_len qk_dim rope_dim v_dim
///   config KEY=VALUE ...       (when m.config is not empty; keys sorted)
///   arg lines, in index order
///   per target: `target NAME SECTION`, its `config KEY=VALUE ...` (when
///     not empty; keys sorted), its workspaces, its launches, its max-bytes
///     lines (in m's order), `end-target`
///
/// A launch writes `block BX,BY,BZ shared BYTES` (both) unless both are the
/// defaults (block 1,1,1 and shared 0), then neither. A size writes `argI.D`,
/// then `+C` or `-C` unless C is 0, then `/K` unless K is 1. The parser
/// accepts more (comments, blank lines, tabs, other key orders, max-bytes
/// lines between launches, `block` without `shared`); printManifest(
/// parseManifest(T)) == T exactly when T is already canonical. Comments are
/// not kept. mla-compile writes every manifest through this function.
std::string printManifest(const Manifest &m);

/// The pieces of printManifest's lines (what mla-compile writes from the
/// IR's launch plan): a SIZE (`INT`, or `argI.D` then `+C`/`-C` unless C
/// is 0, then `/K` unless K is 1), an arg's DIMS (`?` for kDynamicDim,
/// kRankZeroDims for none), a workspace's DIMS, and a `launch` line.
std::string printDimExpr(const DimExpr &expr);
std::string printArgDims(const std::vector<int64_t> &dims);
std::string printSizes(const std::vector<DimExpr> &dims);
std::string printLaunch(const LaunchSpec &launch);

} // namespace mla::rt

#endif // MLA_RUNTIME_MANIFEST_H
