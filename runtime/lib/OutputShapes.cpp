//===- OutputShapes.cpp - The shapes of a kernel's outputs ----------------===//
//
// The one table of where each output dim of a kind comes from.
//
//===----------------------------------------------------------------------===//

#include "mla/runtime/OutputShapes.h"

using namespace mla::rt;

namespace {

/// Where a dynamic output dim comes from: dim `dim` of input `role`
/// (nullptr: the manifest must fix the dim).
struct DimSource {
  const char *role;
  int dim;
};

/// How one output role of a kind is sized (Kinds.def lists the kinds'
/// roles; this adds the input dims that size each output).
struct OutputDims {
  KernelKind kind;
  const char *role;
  /// One per dim of the output.
  std::vector<DimSource> dims;
};

const std::vector<OutputDims> &outputDims() {
  static const std::vector<OutputDims> table = {
      {KernelKind::Decode,
       roles::kO,
       {{roles::kQ, 0}, {roles::kQ, 1}, {roles::kQ, 2}, {nullptr, 3}}},
      {KernelKind::Decode,
       roles::kLse,
       {{roles::kQ, 0}, {roles::kQ, 1}, {roles::kQ, 2}}},
      {KernelKind::Prefill,
       roles::kO,
       {{roles::kQ, 0}, {roles::kQ, 1}, {roles::kV, 2}}},
      {KernelKind::Prefill, roles::kLse, {{roles::kQ, 1}, {roles::kQ, 0}}},
      {KernelKind::Merge,
       roles::kO,
       {{roles::kOParts, 1}, {roles::kOParts, 2}, {roles::kOParts, 3}}},
      {KernelKind::Merge,
       roles::kLse,
       {{roles::kOParts, 2}, {roles::kOParts, 1}}},
  };
  return table;
}

const OutputDims *findOutputDims(KernelKind kind, std::string_view role) {
  for (const OutputDims &entry : outputDims())
    if (entry.kind == kind && role == entry.role)
      return &entry;
  return nullptr;
}

Status unsupported(std::string_view role, const std::string &why) {
  return Status::error(ErrorCode::Unsupported, "cannot size output '" +
                                                   std::string(role) +
                                                   "': " + why);
}

} // namespace

bool mla::rt::canSizeOutputs(KernelKind kind) {
  for (const KindRole &role : kindRoles(kind))
    if (role.use == RoleUse::Output && !findOutputDims(kind, role.name))
      return false;
  return true;
}

Expected<std::vector<int64_t>> mla::rt::outputShape(
    const Manifest &manifest, std::string_view role,
    const std::map<std::string, std::vector<int64_t>> &inputShapes) {
  std::optional<KernelKind> kind = findKind(manifest.kernel);
  if (!kind)
    return unsupported(role, "kernel kind '" + manifest.kernel +
                                 "' is not in the kind table");
  std::optional<Role> known = findRole(role);
  const KindRole *entry = known ? kindRoles(*kind).find(*known) : nullptr;
  if (!entry || entry->use != RoleUse::Output)
    return Status::error(ErrorCode::InvalidArgument,
                         "'" + std::string(role) + "' is not an output of a " +
                             manifest.kernel + " kernel");
  const OutputDims *dims = findOutputDims(*kind, role);
  if (!dims)
    return unsupported(role, "the runtime has no sizes for it");
  const ManifestArg *arg = manifest.findArg(role);
  if (!arg)
    return unsupported(role, "the manifest has no arg with this role");
  std::vector<int64_t> shape = arg->dims;
  if (shape.size() != dims->dims.size())
    return unsupported(role, "it has rank " + std::to_string(shape.size()) +
                                 ", expected " +
                                 std::to_string(dims->dims.size()));
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != kDynamicDim)
      continue;
    DimSource source = dims->dims[d];
    if (!source.role)
      return unsupported(role, "dim " + std::to_string(d) +
                                   " is dynamic in the manifest");
    auto from = inputShapes.find(source.role);
    if (from == inputShapes.end())
      return Status::error(ErrorCode::InvalidArgument,
                           "cannot size output '" + std::string(role) +
                               "': input '" + source.role + "' is missing");
    if (static_cast<size_t>(source.dim) >= from->second.size())
      return Status::error(ErrorCode::InvalidArgument,
                           "cannot size output '" + std::string(role) + "': '" +
                               source.role + "' has no dim " +
                               std::to_string(source.dim));
    shape[d] = from->second[source.dim];
  }
  return shape;
}
