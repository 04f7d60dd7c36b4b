//===- Kernel.h - A loaded kernel and its launch API ------------*- C++ -*-===//

#ifndef MLA_RUNTIME_KERNEL_H
#define MLA_RUNTIME_KERNEL_H

#include "mla/runtime/Manifest.h"
#include "mla/runtime/Status.h"
#include "mla/runtime/Tensor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mla::rt {

struct LaunchOptions {
  /// Check every argument against the manifest (and the kernel kind's rules,
  /// e.g. block-table entries and lengths for decode) before launching.
  /// Turning it off saves the checks' cost for callers that have already
  /// validated; what the runtime itself relies on is still checked: the
  /// argument count, tensor vs scalar, dtypes, ranks and non-negative dims.
  bool validate = true;
};

/// Arguments of a `kernel decode` manifest, by role.
struct DecodeArgs {
  /// [batch, q_len, heads, latent_dim + rope_dim], manifest dtype.
  TensorView q;
  /// Page pool [num_pages, page_size, latent_dim + rope_dim], manifest dtype.
  TensorView kv;
  /// i32 [batch, max_pages_per_seq]: page indices into kv.
  TensorView blockTable;
  /// i32 [batch]: tokens of each sequence in the cache.
  TensorView seqLens;
  /// Softmax scale applied to q.k.
  float scale = 1.0f;
  /// Output [batch, q_len, heads, latent_dim], manifest dtype.
  TensorView o;
  /// Output f32 [batch, q_len, heads]: natural-log sum of exp(scores).
  TensorView lse;
};

/// A kernel loaded for one target of a package on a device. A Kernel is a
/// cheap, copyable handle; copies share the loaded code and workspace pool.
/// It keeps its device's backend alive and copies what it needs from the
/// package, which may be destroyed after loading. Every method is safe to
/// call from several threads at once.
class Kernel {
public:
  const Manifest &getManifest() const;
  const TargetSpec &getTarget() const;

  /// Checks `args` (one per manifest `arg`, by index) without launching:
  /// count, kind, dtype, rank, static dims, non-null data, then the rules of
  /// the manifest's kernel kind. The message names the argument.
  Status validate(const std::vector<ArgValue> &args) const;

  /// Validates (unless disabled), allocates the target's workspaces and runs
  /// its launches in order. Returns when the outputs are written. Nothing is
  /// launched when an argument is invalid.
  Status launch(const std::vector<ArgValue> &args,
                const LaunchOptions &options = {}) const;

  /// Orders arguments given by manifest role into launch() order; every role
  /// must be given exactly once.
  Expected<std::vector<ArgValue>>
  bindByRole(const std::map<std::string, ArgValue> &argsByRole) const;

  Status launchByRole(const std::map<std::string, ArgValue> &argsByRole,
                      const LaunchOptions &options = {}) const;

  /// launchByRole for a `kernel decode` manifest (scale as a f32 scalar).
  Status launchDecode(const DecodeArgs &args,
                      const LaunchOptions &options = {}) const;

  struct Impl;

private:
  friend class Device;
  explicit Kernel(std::shared_ptr<Impl> impl) : impl(std::move(impl)) {}

  std::shared_ptr<Impl> impl;
};

} // namespace mla::rt

#endif // MLA_RUNTIME_KERNEL_H
