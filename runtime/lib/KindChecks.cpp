//===- KindChecks.cpp - Table-driven checks shared by kernel kinds --------===//

#include "KindChecks.h"

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

Status kinds::checkManifestRoles(
    const Manifest &m, const char *kind,
    const std::vector<std::pair<const char *, int64_t>> &requiredKeys,
    const std::vector<RoleRule> &roles) {
  std::string prefix = std::string(kind) + " manifest ";
  auto fail = [&](const std::string &message) {
    return Status::error(ErrorCode::InvalidManifest, prefix + message);
  };
  if (!m.dtype)
    return fail("needs a 'dtype' line");
  for (auto [key, value] : requiredKeys)
    if (value < 0)
      return fail(std::string("needs a '") + key + "' line");

  for (const RoleRule &rule : roles) {
    const ManifestArg *arg = m.findArg(rule.role);
    if (!arg)
      return fail(std::string("needs an arg with role '") + rule.role + "'");
    auto argFail = [&](const std::string &message) {
      return Status::error(ErrorCode::InvalidManifest,
                           "manifest line " + std::to_string(arg->line) + ": " +
                               kind + " arg '" + arg->role + "' " + message);
    };
    if (arg->kind != rule.kind)
      return argFail(rule.kind == ArgKind::Scalar ? "must be a scalar"
                                                  : "must be a memref");
    std::string have = dtypeName(arg->dtype);
    std::string kernelType = dtypeName(*m.dtype);
    switch (rule.dtype) {
    case DTypeRule::Kernel:
      if (arg->dtype != *m.dtype)
        return argFail("must have dtype " + kernelType + ", has " + have);
      break;
    case DTypeRule::KernelOrF32:
      if (arg->dtype != *m.dtype && arg->dtype != DType::F32)
        return argFail("must have dtype " + kernelType +
                       (*m.dtype == DType::F32 ? "" : " or f32") + ", has " +
                       have);
      break;
    case DTypeRule::F32:
      if (arg->dtype != DType::F32)
        return argFail("must have dtype f32, has " + have);
      break;
    case DTypeRule::Index:
      if (arg->dtype != DType::I32 && arg->dtype != DType::I64)
        return argFail("must have dtype i32 or i64, has " + have);
      break;
    case DTypeRule::Float:
      if (!isFloatingPoint(arg->dtype))
        return argFail("must have a floating-point dtype, has " + have);
      break;
    }
    if (rule.kind == ArgKind::Scalar)
      continue;
    if (arg->dims.size() != rule.dims.size())
      return argFail("must have rank " + std::to_string(rule.dims.size()) +
                     ", has " + std::to_string(arg->dims.size()));
    for (size_t d = 0; d < rule.dims.size(); ++d) {
      auto [value, what] = rule.dims[d];
      int64_t actual = arg->dims[d];
      if (value == kAnyDim || actual == value)
        continue;
      if (value == kDynamicDim)
        return argFail("dim " + std::to_string(d) + " must be '?' because " +
                       what + " is 0 (dynamic)");
      if (actual != kDynamicDim)
        return argFail("dim " + std::to_string(d) + " is " +
                       std::to_string(actual) + ", expected " +
                       std::to_string(value) + " (" + what + ")");
    }
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
