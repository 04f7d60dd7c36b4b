//===- Kinds.h - Kernel kinds and argument roles ----------------*- C++ -*-===//
//
// The kinds and roles of Kinds.def as C++: role-name and kind-name
// constants (roles::kQ is "q", kernels::kDecode is "decode"), enums, and
// constexpr look-ups of a kind's arguments. Header-only and free of LLVM and
// MLIR, so that the compiler includes it as well as the runtime and tools.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_KINDS_H
#define MLA_RUNTIME_KINDS_H

#include <cstddef>
#include <iterator>
#include <optional>
#include <string_view>

namespace mla::rt {

/// A manifest arg: a memref (tensor) or a scalar.
enum class ArgKind { Memref, Scalar };

/// Whether the kernel reads an argument, writes it, or both.
enum class RoleUse { Input, Output, InOut };

enum class Role {
#define MLA_ROLE(Enumerator, Name) Enumerator,
#include "mla/runtime/Kinds.def"
};

enum class KernelKind {
#define MLA_KIND(Enumerator, Name) Enumerator,
#include "mla/runtime/Kinds.def"
};

/// The role names: roles::kBlockTable is "block_table".
namespace roles {
#define MLA_ROLE(Enumerator, Name) inline constexpr char k##Enumerator[] = Name;
#include "mla/runtime/Kinds.def"
} // namespace roles

/// The kind names: kernels::kAppendKv is "append_kv".
namespace kernels {
#define MLA_KIND(Enumerator, Name) inline constexpr char k##Enumerator[] = Name;
#include "mla/runtime/Kinds.def"
} // namespace kernels

/// One argument of a kind (an MLA_KIND_ROLE line).
struct KindRole {
  KernelKind kind;
  Role role;
  const char *name;
  ArgKind argKind;
  /// Memref rank; 0 for scalars.
  int rank;
  RoleUse use;

  constexpr bool isInput() const { return use != RoleUse::Output; }
  constexpr bool isOutput() const { return use != RoleUse::Input; }
};

namespace detail {
inline constexpr const char *kRoleNames[] = {
#define MLA_ROLE(Enumerator, Name) Name,
#include "mla/runtime/Kinds.def"
};
inline constexpr const char *kKindNames[] = {
#define MLA_KIND(Enumerator, Name) Name,
#include "mla/runtime/Kinds.def"
};
inline constexpr KindRole kKindRoles[] = {
#define MLA_KIND_ROLE(Kind, R, AK, Rank, Use)                                  \
  {KernelKind::Kind, Role::R, roles::k##R, ArgKind::AK, Rank, RoleUse::Use},
#include "mla/runtime/Kinds.def"
};
} // namespace detail

/// The kinds, in table order.
inline constexpr KernelKind kKernelKinds[] = {
#define MLA_KIND(Enumerator, Name) KernelKind::Enumerator,
#include "mla/runtime/Kinds.def"
};

constexpr const char *roleName(Role role) {
  return detail::kRoleNames[static_cast<size_t>(role)];
}

constexpr const char *kindName(KernelKind kind) {
  return detail::kKindNames[static_cast<size_t>(kind)];
}

/// The arguments of one kind, in kernel-argument order.
class KindRoles {
public:
  constexpr KindRoles(const KindRole *begin, const KindRole *end)
      : first(begin), last(end) {}
  constexpr const KindRole *begin() const { return first; }
  constexpr const KindRole *end() const { return last; }
  constexpr size_t size() const { return static_cast<size_t>(last - first); }

  /// The entry of `role`; nullptr when the kind does not take it.
  constexpr const KindRole *find(Role role) const {
    for (const KindRole *r = first; r != last; ++r)
      if (r->role == role)
        return r;
    return nullptr;
  }

private:
  const KindRole *first;
  const KindRole *last;
};

/// The arguments of `kind` (its MLA_KIND_ROLE lines, which Kinds.def keeps
/// together).
constexpr KindRoles kindRoles(KernelKind kind) {
  const KindRole *begin = std::end(detail::kKindRoles);
  const KindRole *end = begin;
  for (const KindRole &r : detail::kKindRoles) {
    if (r.kind != kind)
      continue;
    if (begin == std::end(detail::kKindRoles))
      begin = &r;
    end = &r + 1;
  }
  return {begin, end};
}

/// The kind named `name`, if the table has one.
constexpr std::optional<KernelKind> findKind(std::string_view name) {
  for (KernelKind kind : kKernelKinds)
    if (name == kindName(kind))
      return kind;
  return std::nullopt;
}

/// The role named `name`, if the table has one.
constexpr std::optional<Role> findRole(std::string_view name) {
  for (size_t i = 0; i < std::size(detail::kRoleNames); ++i)
    if (name == detail::kRoleNames[i])
      return static_cast<Role>(i);
  return std::nullopt;
}

namespace detail {
/// Whether every kind's MLA_KIND_ROLE lines are adjacent and name each role
/// at most once (kindRoles relies on the first).
constexpr bool kindRolesAreGrouped() {
  for (KernelKind kind : kKernelKinds) {
    KindRoles kindArgs = kindRoles(kind);
    size_t count = 0;
    for (const KindRole &r : kKindRoles)
      count += r.kind == kind;
    if (kindArgs.size() != count)
      return false;
    for (const KindRole &r : kindArgs)
      if (kindArgs.find(r.role) != &r)
        return false;
  }
  return true;
}
static_assert(kindRolesAreGrouped(),
              "Kinds.def: keep each kind's MLA_KIND_ROLE lines together and "
              "name each role once per kind");
} // namespace detail

/// The scalar the softmax scale sets, or nullptr for kinds without one.
constexpr const KindRole *scaleRole(KernelKind kind) {
  return kindRoles(kind).find(Role::Scale);
}

} // namespace mla::rt

#endif // MLA_RUNTIME_KINDS_H
