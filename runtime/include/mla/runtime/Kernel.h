//===- Kernel.h - A loaded kernel and its launch API ------------*- C++ -*-===//

#ifndef MLA_RUNTIME_KERNEL_H
#define MLA_RUNTIME_KERNEL_H

#include "mla/runtime/Manifest.h"
#include "mla/runtime/Status.h"
#include "mla/runtime/Tensor.h"

#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mla::rt {

/// Workspaces are laid out one after the other, each starting at a multiple
/// of this many bytes from the workspace base.
constexpr size_t kWorkspaceAlignment = 256;

struct LaunchOptions {
  /// Check every argument against the manifest (and the kernel kind's rules,
  /// e.g. block-table entries and lengths for decode) before launching.
  /// Turning it off saves the checks' cost for callers that have already
  /// validated; what the runtime itself relies on is still checked: the
  /// argument count, tensor vs scalar, dtypes, ranks, non-negative dims and
  /// the data alignment (kGpuTensorAlignment).
  bool validate = true;

  /// GPU devices: the stream the launches are enqueued on, in manifest order
  /// (a CUstream of the device's primary context for CUDA, e.g. from
  /// Backend::createStream or cudaStreamCreate; a hipStream_t of the device
  /// for HIP); nullptr is the default stream. The host ignores it.
  void *stream = nullptr;

  /// Caller-owned workspace memory on the device: `workspaceBytes` bytes at
  /// `workspace`, 256-byte aligned, at least Kernel::workspaceBytes(args).
  /// It must not be used by another launch that may run at the same time.
  /// nullptr: the kernel's reserved workspace on GPU devices
  /// (Kernel::reserveWorkspace), a pooled buffer on the host.
  void *workspace = nullptr;
  size_t workspaceBytes = 0;

  /// Host-memory copies of the block_table and seq_lens arguments (same
  /// shape and dtype) for a decode launch on a device whose memory the host
  /// cannot read (GPU devices): with them, validation also checks lengths
  /// and used block-table entries; without them those content checks are
  /// skipped. The host device reads the tensors and ignores these.
  const void *hostBlockTable = nullptr;
  const void *hostSeqLens = nullptr;

  /// Host-memory copies of any memref arguments, by manifest role (same
  /// shape and dtype), for the content checks on GPU devices: e.g.
  /// {"cu_seqlens_q", ...}, {"cu_seqlens_k", ...} for prefill,
  /// {"slot_mapping", ...} for append_kv, {"seq_lens", ...} for decode. An
  /// entry here takes precedence over hostBlockTable / hostSeqLens; roles
  /// the kernel does not have are ignored. The host device ignores it.
  std::map<std::string, const void *> hostData = {};

  /// Skip the launches of the kernel's plan (Kernel::planLaunches: the plan
  /// of chunks of decode's length-aware schedule, computed from seq_lens
  /// alone) and read the plan that an earlier launch of this kernel left in
  /// the same workspace, as FlashMLA's callers reuse one scheduler metadata
  /// for every layer of a decode step. The earlier launch must have had the
  /// same seq_lens (batch and values; q, kv, block_table and the outputs may
  /// differ), on the same stream or ordered before this one, and no launch
  /// of another kernel may have used the workspace in between; nothing
  /// checks this (the kernels read whatever plan is there). The workspace
  /// is `workspace` or, on GPU devices without one, the reserved workspace;
  /// on the host without `workspace` (a pooled buffer, which holds no
  /// earlier plan) the plan is computed as usual. For a kernel without a
  /// plan this changes nothing.
  bool reusePlan = false;
};

/// Base-address alignment validation requires of tensor arguments: every
/// tensor's data is aligned to its element size on every device; on GPU
/// devices floating-point tensors are also aligned to this many bytes (the
/// kernels move them in 16-byte vectors: cp.async on NVIDIA, dwordx4 buffer
/// loads on AMD). Checked even when LaunchOptions::validate is false.
constexpr size_t kGpuTensorAlignment = 16;

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
  /// Softmax scale applied to q.k. Required: there is no default value.
  /// NaN, what it starts as, means "not set" and bindDecode (so
  /// launchDecode and workspaceBytes(DecodeArgs)) rejects it ("scale: not
  /// set ...").
  float scale = std::numeric_limits<float>::quiet_NaN();
  /// Output [batch, q_len, heads, latent_dim], manifest dtype.
  TensorView o;
  /// Output f32 [batch, q_len, heads]: natural-log sum of exp(scores).
  TensorView lse;
};

/// A kernel loaded for one target of a package on a device. A Kernel is a
/// cheap, copyable handle; copies share the loaded code and workspaces.
/// It keeps its device's backend alive and copies what it needs from the
/// package, which may be destroyed after loading. Every method is safe to
/// call from several threads at once.
class Kernel {
public:
  const Manifest &getManifest() const;
  const TargetSpec &getTarget() const;

  /// Checks `args` (one per manifest `arg`, by index) without launching:
  /// count, kind, dtype, rank, static dims, non-null data, then the rules of
  /// the manifest's kernel kind. The message names the argument. Content
  /// checks on a GPU device use options.hostData (or hostBlockTable /
  /// hostSeqLens).
  Status validate(const std::vector<ArgValue> &args) const;
  Status validate(const std::vector<ArgValue> &args,
                  const LaunchOptions &options) const;

  /// Validates (unless disabled), lays out the target's workspaces and runs
  /// its launches in order. Nothing is launched when an argument is invalid
  /// or the workspace is too small.
  ///  * Host: returns when the outputs are written.
  ///  * GPU: enqueues the launches on options.stream and returns; it never
  ///    allocates device memory and never waits for the device, so it can be
  ///    captured into a graph. Tensor data pointers are device addresses.
  Status launch(const std::vector<ArgValue> &args,
                const LaunchOptions &options = {}) const;

  /// The target's leading launches that compute a plan from seq_lens alone
  /// and that LaunchOptions::reusePlan skips: 1 for decode's length-aware
  /// schedule (the plan of chunks), 0 for every other kernel.
  size_t planLaunches() const;

  /// Bytes of workspace a launch with these argument shapes needs: the sum
  /// of the target's workspace sizes, each rounded up to
  /// kWorkspaceAlignment. Only shapes are read; data may be null.
  Expected<size_t> workspaceBytes(const std::vector<ArgValue> &args) const;
  Expected<size_t> workspaceBytes(const DecodeArgs &args) const;

  /// Sets aside at least `bytes` of device workspace for launches that pass
  /// no LaunchOptions::workspace, so that they never allocate. GPU devices:
  /// one buffer shared by all copies of this Kernel, grown (never shrunk)
  /// here; launches using it must not overlap in time (use one stream, or
  /// pass per-stream workspaces), and it may only grow while none of them
  /// is running. Host: adds a buffer to the kernel's pool.
  Status reserveWorkspace(size_t bytes) const;

  /// The arguments of launch() for a `kernel decode` manifest.
  Expected<std::vector<ArgValue>> bindDecode(const DecodeArgs &args) const;

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
