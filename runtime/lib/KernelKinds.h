//===- KernelKinds.h - Rules of specific kernel kinds -----------*- C++ -*-===//
//
// The manifest parser and launch validation are role-agnostic; a kernel kind
// (the manifest's `kernel` value) can add manifest checks and argument checks
// on top. Kinds without rules get only the generic checks.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LIB_KERNELKINDS_H
#define MLA_RUNTIME_LIB_KERNELKINDS_H

#include "mla/runtime/Kinds.h"
#include "mla/runtime/Manifest.h"
#include "mla/runtime/Status.h"
#include "mla/runtime/Tensor.h"

#include <string_view>
#include <vector>

namespace mla::rt {

struct KernelKindRules {
  /// The kind (Kinds.def); its roles' arg kinds and ranks come from there.
  KernelKind kind;
  /// Checks a parsed manifest of this kind (InvalidManifest errors).
  Status (*checkManifest)(const Manifest &manifest);
  /// Checks launch arguments that already passed the generic checks
  /// (InvalidArgument errors naming the argument). `hostData[i]` is where
  /// the host can read the contents of memref argument i, or nullptr when
  /// it cannot (the content checks that need it are skipped).
  Status (*validateArgs)(const Manifest &manifest,
                         const std::vector<ArgValue> &args,
                         const std::vector<const void *> &hostData);
  /// The leading launches of `target` that compute a plan (LaunchRule::plan),
  /// for a manifest that passed checkManifest; nullptr: none for this kind.
  size_t (*planLaunches)(const Manifest &manifest,
                         const TargetSpec &target) = nullptr;
};

/// nullptr for kinds without rules.
const KernelKindRules *findKernelKindRules(std::string_view kind);

/// The rules of `kernel prefill` (PrefillKind.cpp), `kernel merge`
/// (MergeKind.cpp) and `kernel append_kv` (AppendKvKind.cpp).
Status checkPrefillManifest(const Manifest &manifest);
Status validatePrefillArgs(const Manifest &manifest,
                           const std::vector<ArgValue> &args,
                           const std::vector<const void *> &hostData);
Status checkMergeManifest(const Manifest &manifest);
Status validateMergeArgs(const Manifest &manifest,
                         const std::vector<ArgValue> &args,
                         const std::vector<const void *> &hostData);
Status checkAppendKvManifest(const Manifest &manifest);
Status validateAppendKvArgs(const Manifest &manifest,
                            const std::vector<ArgValue> &args,
                            const std::vector<const void *> &hostData);

} // namespace mla::rt

#endif // MLA_RUNTIME_LIB_KERNELKINDS_H
