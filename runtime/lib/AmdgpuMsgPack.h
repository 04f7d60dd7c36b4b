//===- AmdgpuMsgPack.h - MessagePack of AMDGPU metadata notes ---*- C++ -*-===//
//
// The MessagePack reader behind parseAmdgpuMetadata (AmdgpuMetadata.cpp):
// a document decodes into a MsgValue tree (maps keep their string keys in
// order). Every read goes through a bounds-checked cursor: malformed input
// of any length yields an error value, never an out-of-range access.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LIB_AMDGPUMSGPACK_H
#define MLA_RUNTIME_LIB_AMDGPUMSGPACK_H

#include "mla/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mla::rt::amdgpu {

/// An InvalidArgument error prefixed "AMDGPU code object: ".
inline Status fail(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument,
                       "AMDGPU code object: " + message);
}

struct MsgValue {
  enum Kind { Nil, Bool, UInt, Int, Float, Str, Bin, Array, Map } kind = Nil;
  bool boolean = false;
  uint64_t uint = 0;
  int64_t sint = 0;
  double real = 0;
  /// Str and Bin.
  std::string bytes;
  std::vector<MsgValue> items;
  /// Map entries in order; keys are strings.
  std::vector<std::pair<std::string, MsgValue>> entries;

  const MsgValue *find(std::string_view key) const {
    for (const auto &entry : entries)
      if (entry.first == key)
        return &entry.second;
    return nullptr;
  }
};

/// "a string", "an integer", ...: a kind in messages.
const char *kindName(MsgValue::Kind kind);

/// Decodes the MessagePack document that fills [data, data + size): fixmap,
/// map16/32 (string keys), fixarray, array16/32, fixstr, str8/16/32,
/// bin8/16/32, nil, bool, the fixints, uint8..64, int8..64, float32/64;
/// ext and fixext types are rejected, as are bytes after the document.
Expected<MsgValue> readMsgPack(const uint8_t *data, size_t size);

} // namespace mla::rt::amdgpu

#endif // MLA_RUNTIME_LIB_AMDGPUMSGPACK_H
