//===- KindsTest.cpp - The kind/role table of Kinds.def -------------------===//

#include "mla/runtime/Kinds.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mla::rt;

namespace {

std::vector<std::string> namesOf(KernelKind kind) {
  std::vector<std::string> names;
  for (const KindRole &role : kindRoles(kind))
    names.push_back(role.name);
  return names;
}

TEST(KindsTest, KindsInTableOrder) {
  std::vector<std::string> kinds;
  for (KernelKind kind : kKernelKinds)
    kinds.push_back(kindName(kind));
  EXPECT_EQ(kinds, (std::vector<std::string>{"decode", "prefill", "merge",
                                             "append_kv"}));
  EXPECT_EQ(findKind("append_kv"), KernelKind::AppendKv);
  EXPECT_FALSE(findKind("sparse").has_value());
  EXPECT_STREQ(kernels::kPrefill, "prefill");
}

TEST(KindsTest, RolesOfEachKind) {
  EXPECT_EQ(namesOf(KernelKind::Decode),
            (std::vector<std::string>{"q", "kv", "block_table", "seq_lens",
                                      "scale", "o", "lse"}));
  EXPECT_EQ(namesOf(KernelKind::Prefill),
            (std::vector<std::string>{"q", "k", "v", "cu_seqlens_q",
                                      "cu_seqlens_k", "scale", "o", "lse"}));
  EXPECT_EQ(namesOf(KernelKind::Merge),
            (std::vector<std::string>{"o_parts", "lse_parts", "o", "lse"}));
  EXPECT_EQ(namesOf(KernelKind::AppendKv),
            (std::vector<std::string>{"kv_new", "slot_mapping", "kv"}));
}

TEST(KindsTest, EntriesCarryKindRankAndUse) {
  const KindRole *q = kindRoles(KernelKind::Decode).find(Role::Q);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->argKind, ArgKind::Memref);
  EXPECT_EQ(q->rank, 4);
  EXPECT_TRUE(q->isInput());
  EXPECT_FALSE(q->isOutput());
  EXPECT_EQ(kindRoles(KernelKind::Prefill).find(Role::Q)->rank, 3);
  const KindRole *lse = kindRoles(KernelKind::Prefill).find(Role::Lse);
  EXPECT_EQ(lse->use, RoleUse::Output);
  EXPECT_EQ(lse->rank, 2);
  const KindRole *kv = kindRoles(KernelKind::AppendKv).find(Role::Kv);
  EXPECT_TRUE(kv->isInput() && kv->isOutput());
  EXPECT_EQ(scaleRole(KernelKind::Decode)->argKind, ArgKind::Scalar);
  EXPECT_EQ(scaleRole(KernelKind::Merge), nullptr);
  EXPECT_EQ(kindRoles(KernelKind::Merge).find(Role::Q), nullptr);
}

TEST(KindsTest, RoleNames) {
  EXPECT_STREQ(roles::kBlockTable, "block_table");
  EXPECT_STREQ(roleName(Role::CuSeqlensK), "cu_seqlens_k");
  EXPECT_EQ(findRole("slot_mapping"), Role::SlotMapping);
  EXPECT_FALSE(findRole("sinks").has_value());
}

} // namespace
