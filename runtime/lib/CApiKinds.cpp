//===- CApiKinds.cpp - The C API's kind table and dtype conversion --------===//
//
// mla_num_kinds, mla_kind_name, mla_kind_num_roles and mla_kind_role (the
// Kinds.def table as C), and mla_convert (convertElements).
//
//===----------------------------------------------------------------------===//

#include "CApiInternal.h"

#include "mla/runtime/Kinds.h"

#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>

using namespace mla::rt;
using namespace mla::rt::capi;

namespace {

/// The kind named `name`, or an error naming the known ones.
Status findKindNamed(const char *function, const char *name, KernelKind &kind) {
  if (!name)
    return nullArg(function, "kind");
  if (std::optional<KernelKind> found = findKind(name)) {
    kind = *found;
    return Status::success();
  }
  std::string known;
  for (KernelKind k : kKernelKinds)
    known += (known.empty() ? "" : ", ") + std::string(kindName(k));
  return invalid(std::string(function) + ": unknown kernel kind '" + name +
                 "' (known: " + known + ")");
}

mla_role_use toCUse(RoleUse use) {
  switch (use) {
  case RoleUse::Input:
    return MLA_ROLE_INPUT;
  case RoleUse::Output:
    return MLA_ROLE_OUTPUT;
  case RoleUse::InOut:
    return MLA_ROLE_INOUT;
  }
  return MLA_ROLE_INPUT;
}

/// Reads a C caller's dtype as its underlying type (any int may be stored
/// there) and checks it; `what` names it in the error.
Status readDType(const char *what, const mla_dtype &dtype, DType &out) {
  std::underlying_type_t<mla_dtype> value;
  std::memcpy(&value, &dtype, sizeof(value));
  if (!validDType(static_cast<int>(value)))
    return invalid(std::string("mla_convert: ") + what + " " +
                   std::to_string(value) + " is not an mla_dtype");
  out = toDType(static_cast<mla_dtype>(value));
  return Status::success();
}

} // namespace

extern "C" mla_status mla_convert(const void *src, mla_dtype src_dtype,
                                  void *dst, mla_dtype dst_dtype,
                                  size_t count) {
  return guarded("mla_convert", [&]() -> Status {
    DType from, to;
    if (Status status = readDType("src_dtype", src_dtype, from); !status.ok())
      return status;
    if (Status status = readDType("dst_dtype", dst_dtype, to); !status.ok())
      return status;
    if (count == 0)
      return Status::success();
    MLA_REQUIRE("mla_convert", src);
    MLA_REQUIRE("mla_convert", dst);
    return convertElements(src, from, dst, to, count)
        .withContext("mla_convert");
  });
}

extern "C" size_t mla_num_kinds(void) { return std::size(kKernelKinds); }

extern "C" const char *mla_kind_name(size_t index) {
  return index < std::size(kKernelKinds) ? kindName(kKernelKinds[index])
                                         : nullptr;
}

extern "C" mla_status mla_kind_num_roles(const char *kind, size_t *out) {
  return guarded("mla_kind_num_roles", [&]() -> Status {
    KernelKind found;
    if (Status status = findKindNamed("mla_kind_num_roles", kind, found);
        !status.ok())
      return status;
    MLA_REQUIRE("mla_kind_num_roles", out);
    *out = kindRoles(found).size();
    return Status::success();
  });
}

extern "C" mla_status mla_kind_role(const char *kind, size_t index,
                                    mla_role_info *out) {
  return guarded("mla_kind_role", [&]() -> Status {
    KernelKind found;
    if (Status status = findKindNamed("mla_kind_role", kind, found);
        !status.ok())
      return status;
    MLA_REQUIRE("mla_kind_role", out);
    KindRoles roles = kindRoles(found);
    if (index >= roles.size())
      return invalid("mla_kind_role: index " + std::to_string(index) +
                     " is out of range (kind '" + kind + "' has " +
                     std::to_string(roles.size()) + " arguments)");
    const KindRole &role = roles.begin()[index];
    mla_role_info info;
    std::memset(&info, 0, sizeof(info));
    info.role = role.name;
    info.is_scalar = role.argKind == ArgKind::Scalar;
    info.rank = role.rank;
    info.use = toCUse(role.use);
    *out = info;
    return Status::success();
  });
}
