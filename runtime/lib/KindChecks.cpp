//===- KindChecks.cpp - Table-driven checks shared by kernel kinds --------===//

#include "KindChecks.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

using namespace mla::rt;
using namespace mla::rt::kinds;

Status kinds::argError(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, message);
}

int64_t kinds::readIndex(const void *data, DType dtype, int64_t i) {
  if (dtype == DType::I64)
    return static_cast<const int64_t *>(data)[i];
  return static_cast<const int32_t *>(data)[i];
}

Status kinds::checkScale(const Manifest &m, const std::vector<ArgValue> &args) {
  const ManifestArg *arg = m.findArg(roles::kScale);
  const Scalar &scale = args[arg->index].scalar();
  float value;
  switch (scale.getDType()) {
  case DType::BF16:
    value = bf16ToFloat(*static_cast<const uint16_t *>(scale.data()));
    break;
  case DType::F16:
    value = f16ToFloat(*static_cast<const uint16_t *>(scale.data()));
    break;
  default:
    std::memcpy(&value, scale.data(), sizeof(value));
  }
  if (value == 0.0f)
    return argError("scale: 0 is not a softmax scale (every score would be "
                    "0); there is no default: pass the scale the model uses, "
                    "e.g. 1/sqrt of the q.k length");
  if (std::isfinite(value))
    return Status::success();
  return argError(std::string("scale: ") +
                  (std::isnan(value) ? "nan"
                   : value > 0       ? "inf"
                                     : "-inf") +
                  " is not a finite number (the softmax scale)");
}

namespace {

/// Why `arg`'s dtype breaks `rule` ("must have dtype ..."); empty if it
/// does not. `kernel` is the header's dtype.
std::string dtypeProblem(DTypeRule rule, const ManifestArg &arg, DType kernel) {
  std::string have = dtypeName(arg.dtype);
  std::string kernelType = dtypeName(kernel);
  switch (rule) {
  case DTypeRule::Kernel:
    if (arg.dtype != kernel)
      return "must have dtype " + kernelType + ", has " + have;
    break;
  case DTypeRule::KernelOrF32:
    if (arg.dtype != kernel && arg.dtype != DType::F32)
      return "must have dtype " + kernelType +
             (kernel == DType::F32 ? "" : " or f32") + ", has " + have;
    break;
  case DTypeRule::F32:
    if (arg.dtype != DType::F32)
      return "must have dtype f32, has " + have;
    break;
  case DTypeRule::Index:
    if (arg.dtype != DType::I32 && arg.dtype != DType::I64)
      return "must have dtype i32 or i64, has " + have;
    break;
  case DTypeRule::Float:
    if (!isFloatingPoint(arg.dtype))
      return "must have a floating-point dtype, has " + have;
    break;
  }
  return "";
}

/// Why `arg`'s dims break `dims` ("dim D ..."); empty if they do not.
std::string dimsProblem(const std::vector<DimRule> &dims,
                        const ManifestArg &arg) {
  for (size_t d = 0; d < dims.size() && d < arg.dims.size(); ++d) {
    auto [value, what] = dims[d];
    int64_t actual = arg.dims[d];
    if (value == kAnyDim || actual == value)
      continue;
    if (value == kDynamicDim)
      return "dim " + std::to_string(d) + " must be '?' because " + what +
             " is 0 (dynamic)";
    if (actual != kDynamicDim)
      return "dim " + std::to_string(d) + " is " + std::to_string(actual) +
             ", expected " + std::to_string(value) + " (" + what + ")";
  }
  return "";
}

} // namespace

Status kinds::checkManifestRoles(
    const Manifest &m, KernelKind kind,
    const std::vector<std::pair<const char *, int64_t>> &requiredKeys,
    const std::vector<RoleRule> &roles) {
  const char *kindText = kindName(kind);
  std::string prefix = std::string(kindText) + " manifest ";
  auto fail = [&](const std::string &message) {
    return Status::error(ErrorCode::InvalidManifest, prefix + message);
  };
  if (!m.dtype)
    return fail("needs a 'dtype' line");
  for (auto [key, value] : requiredKeys)
    if (value < 0)
      return fail(std::string("needs a '") + key + "' line");

  // Kinds.def says which args the kind has, their arg kind and rank; the
  // kind's rules add dtypes and header-implied dims.
  for (const KindRole &entry : kindRoles(kind)) {
    const ManifestArg *arg = m.findArg(entry.name);
    if (!arg)
      return fail(std::string("needs an arg with role '") + entry.name + "'");
    auto argFail = [&](const std::string &message) {
      return Status::error(ErrorCode::InvalidManifest,
                           "manifest line " + std::to_string(arg->line) + ": " +
                               kindText + " arg '" + arg->role + "' " +
                               message);
    };
    if (arg->kind != entry.argKind)
      return argFail(entry.argKind == ArgKind::Scalar ? "must be a scalar"
                                                      : "must be a memref");
    auto rule =
        std::find_if(roles.begin(), roles.end(),
                     [&](const RoleRule &r) { return r.role == entry.role; });
    assert(rule != roles.end() &&
           static_cast<size_t>(entry.rank) == rule->dims.size() &&
           "a kind's rules cover its Kinds.def roles, at the table's rank");
    if (rule != roles.end())
      if (std::string problem = dtypeProblem(rule->dtype, *arg, *m.dtype);
          !problem.empty())
        return argFail(problem);
    if (entry.argKind == ArgKind::Scalar)
      continue;
    if (arg->dims.size() != static_cast<size_t>(entry.rank))
      return argFail("must have rank " + std::to_string(entry.rank) + ", has " +
                     std::to_string(arg->dims.size()));
    if (rule != roles.end())
      if (std::string problem = dimsProblem(rule->dims, *arg); !problem.empty())
        return argFail(problem);
  }
  return Status::success();
}

const TensorView &kinds::tensorOf(const Manifest &m,
                                  const std::vector<ArgValue> &args,
                                  const char *role) {
  return args[m.findArg(role)->index].tensor();
}

Status kinds::checkDim(const char *role, const TensorView &t, size_t d,
                       int64_t value, const std::string &what) {
  if (t.shape[d] == value)
    return Status::success();
  return argError(std::string(role) + ": dim " + std::to_string(d) + " is " +
                  std::to_string(t.shape[d]) + ", expected " +
                  std::to_string(value) + " (" + what + ")");
}

Status kinds::checkHeaderDims(const char *role, const TensorView &t,
                              const std::vector<DimRule> &rules) {
  for (size_t d = 0; d < rules.size() && d < t.shape.size(); ++d)
    if (rules[d].value >= 0)
      if (Status s = checkDim(role, t, d, rules[d].value, rules[d].what);
          !s.ok())
        return s;
  return Status::success();
}
