//===- ManifestExamples.h - manifests shared by manifest tests -*- C++ -*-===//
#ifndef MLA_RUNTIME_TEST_MANIFESTEXAMPLES_H
#define MLA_RUNTIME_TEST_MANIFESTEXAMPLES_H

#include <gtest/gtest.h>

#include <string>

namespace mla::rt::test {

/// The decode example of docs/Runtime.md.
inline const char *const kExample = R"(mla-manifest 1
kernel decode
function decode
dtype bf16
heads 16
q_len 1
latent_dim 512
rope_dim 64
page_size 64
config tile_kv=64 kv_splits=4 head_group=16
arg 0 q memref bf16 ?,1,16,576
arg 1 kv memref bf16 ?,64,576
arg 2 block_table memref i32 ?,?
arg 3 seq_lens memref i32 ?
arg 4 scale scalar f32
arg 5 o memref bf16 ?,1,16,512
arg 6 lse memref f32 ?,1,16
target host-x86_64 code.host-x86_64
workspace 7 f32 arg0.0,1,16,4,512
workspace 8 f32 arg0.0,1,16,4
launch mla_decode_k0 args 0,1,2,3,4,7,8 grid arg0.0,1,4
launch mla_decode_k1 args 7,8,5,6 grid arg0.0,1,16
end-target
)";

/// kExample with the first occurrence of `from` replaced by `to`.
inline std::string edited(const std::string &from, const std::string &to,
                          const char *base = kExample) {
  std::string text = base;
  size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

/// kExample on GPU targets: block and shared, block alone, shared alone.
inline std::string gpuLaunchesText() {
  std::string text =
      edited("grid arg0.0,1,4", "grid arg0.0,1,4 block 128,2,1 shared 98304");
  std::string hostTarget = "target host-x86_64 code.host-x86_64";
  text.replace(text.find(hostTarget), hostTarget.size(),
               "target sm_90a code.sm_90a");
  text.replace(text.find("grid arg0.0,1,16"), 16,
               "grid arg0.0,1,16  block 64,1,1\t# no shared");
  return text + "target sm_80 code.sm_80\n"
                "workspace 7 f32 arg0.0,1,16,4,512\n"
                "workspace 8 f32 arg0.0,1,16,4\n"
                "launch k args 0,1,2,3,4,7,8 grid arg0.0,1,4 shared 0\n"
                "launch k1 args 7,8,5,6 grid arg0.0,1,16\n"
                "end-target\n";
}

/// kExample with max-bytes lines before a workspace, between the launches
/// and after them.
inline std::string maxBytesAnywhereText() {
  std::string text = edited("workspace 7", "max-bytes 8 4294967039\n"
                                           "workspace 7");
  text.replace(text.find("launch mla_decode_k1"), 20,
               "max-bytes 1 4294893567\nlaunch mla_decode_k1");
  text.replace(text.find("end-target"), 10,
               "max-bytes 0 0 # an empty q only\nend-target");
  return text;
}

inline std::string commentsText() {
  return edited("kernel decode\n",
                "\n# a comment\n\tkernel\t decode  # trailing\r\n\n");
}

inline std::string dynamicPageSizeText() {
  std::string text = edited("page_size 64", "page_size 0");
  return text.replace(text.find("?,64,576"), 8, "?,?,576");
}

/// A kind without rules (KernelKinds.h): any roles; two targets.
inline const char *const kMergeStatesText = R"(mla-manifest 1
kernel merge_states
function merge_states
arg 0 parts memref f32 ?,?,128
arg 1 weights_42 memref f32 ?,?
arg 2 out memref bf16 ?,128
target host-x86_64 code.host-x86_64
launch merge args 0,1,2 grid arg0.0,1,1
end-target
target sm_90a code.sm_90a
workspace 3 f32 arg0.1
launch merge_a args 0,1,3 grid 1,1,1
launch merge_b args 3,2 grid arg2.0,1,1
end-target
)";

/// The header keys parse for any kind; `custom` has no kind rules.
inline const char *const kSizeExpressionsText = R"(mla-manifest 1
kernel custom
function prefill
qk_dim 192
v_dim 128
causal 1
parts 3
arg 0 q memref bf16 ?,16,192
arg 1 cu_seqlens_q memref i32 ?
target host-x86_64 code.host-x86_64
launch k0 args 0,1 grid arg0.0/64,16,arg1.0-1
launch k1 args 0,1 grid arg0.0+3/4,arg0.1,1
end-target
)";

} // namespace mla::rt::test

#endif // MLA_RUNTIME_TEST_MANIFESTEXAMPLES_H
