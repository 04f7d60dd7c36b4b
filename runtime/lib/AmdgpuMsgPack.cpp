//===- AmdgpuMsgPack.cpp - MessagePack of AMDGPU metadata notes -----------===//
//
// A recursive reader over a bounds-checked cursor, nesting limited to 64
// levels; see AmdgpuMsgPack.h for the types it takes.
//
//===----------------------------------------------------------------------===//

#include "AmdgpuMsgPack.h"

#include <cstring>

using namespace mla::rt;
using namespace mla::rt::amdgpu;

namespace {

std::string hex(uint64_t value) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  do {
    text.insert(text.begin(), digits[value & 15]);
    value >>= 4;
  } while (value);
  return "0x" + text;
}

class MsgPackReader {
public:
  MsgPackReader(const uint8_t *data, size_t size) : data(data), size(size) {}

  Expected<MsgValue> readDocument() {
    MsgValue value;
    if (Status status = read(value, 0); !status.ok())
      return status;
    if (pos != size)
      return fail("metadata: " + std::to_string(size - pos) +
                  " bytes after the MessagePack document");
    return value;
  }

private:
  static constexpr int kMaxDepth = 64;

  Status truncated(const char *what) const {
    return fail(std::string("metadata: MessagePack data truncated in ") + what +
                " at byte " + std::to_string(pos));
  }

  bool take(uint64_t bytes, const uint8_t *&out) {
    if (bytes > size - pos)
      return false;
    out = data + pos;
    pos += bytes;
    return true;
  }

  /// A big-endian unsigned of `bytes` bytes.
  bool readBE(int bytes, uint64_t &value) {
    const uint8_t *p;
    if (!take(bytes, p))
      return false;
    value = 0;
    for (int i = 0; i < bytes; ++i)
      value = (value << 8) | p[i];
    return true;
  }

  /// The big-endian length of `bytes` bytes that follows the tag of `what`.
  Status readLength(int bytes, const char *what, uint64_t &n) {
    if (!readBE(bytes, n))
      return truncated(what);
    return Status::success();
  }

  Status readBytes(uint64_t length, std::string &out, const char *what) {
    const uint8_t *p;
    if (!take(length, p))
      return truncated(what);
    out.assign(reinterpret_cast<const char *>(p), length);
    return Status::success();
  }

  /// One value: the tag, then its payload.
  Status read(MsgValue &value, int depth) {
    if (depth > kMaxDepth)
      return fail("metadata: MessagePack nesting deeper than " +
                  std::to_string(kMaxDepth) + " at byte " +
                  std::to_string(pos));
    size_t start = pos;
    uint64_t tag;
    if (!readBE(1, tag))
      return truncated("a value");
    if (tag <= 0x7f) {
      value.kind = MsgValue::UInt;
      value.uint = tag;
      return Status::success();
    }
    if (tag >= 0xe0) {
      value.kind = MsgValue::Int;
      value.sint = static_cast<int8_t>(tag);
      return Status::success();
    }
    if ((tag & 0xf0) == 0x80)
      return readMap(value, tag & 0x0f, depth);
    if ((tag & 0xf0) == 0x90)
      return readArray(value, tag & 0x0f, depth);
    if ((tag & 0xe0) == 0xa0) {
      value.kind = MsgValue::Str;
      return readBytes(tag & 0x1f, value.bytes, "a fixstr");
    }
    switch (tag) {
    case 0xc0:
      value.kind = MsgValue::Nil;
      return Status::success();
    case 0xc2:
    case 0xc3:
      value.kind = MsgValue::Bool;
      value.boolean = tag == 0xc3;
      return Status::success();
    case 0xc4:
    case 0xc5:
    case 0xc6:
      return readBin(value, tag);
    case 0xca:
    case 0xcb:
      return readFloat(value, tag);
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf:
      return readUInt(value, tag);
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3:
      return readInt(value, tag);
    case 0xd9:
    case 0xda:
    case 0xdb:
      return readStr(value, tag);
    case 0xdc:
    case 0xdd:
    case 0xde:
    case 0xdf:
      return readContainer(value, tag, depth);
    default:
      return unsupported(tag, start);
    }
  }

  /// bin8/16/32 (tags 0xc4..0xc6).
  Status readBin(MsgValue &value, uint64_t tag) {
    const char *what = tag == 0xc4   ? "a bin8"
                       : tag == 0xc5 ? "a bin16"
                                     : "a bin32";
    uint64_t n = 0;
    if (Status status = readLength(1 << (tag - 0xc4), what, n); !status.ok())
      return status;
    value.kind = MsgValue::Bin;
    return readBytes(n, value.bytes, what);
  }

  /// str8/16/32 (tags 0xd9..0xdb).
  Status readStr(MsgValue &value, uint64_t tag) {
    const char *what = tag == 0xd9   ? "a str8"
                       : tag == 0xda ? "a str16"
                                     : "a str32";
    uint64_t n = 0;
    if (Status status = readLength(1 << (tag - 0xd9), what, n); !status.ok())
      return status;
    value.kind = MsgValue::Str;
    return readBytes(n, value.bytes, what);
  }

  /// float32/64 (tags 0xca, 0xcb).
  Status readFloat(MsgValue &value, uint64_t tag) {
    uint64_t bits;
    if (!readBE(tag == 0xca ? 4 : 8, bits))
      return truncated(tag == 0xca ? "a float32" : "a float64");
    value.kind = MsgValue::Float;
    if (tag == 0xca) {
      uint32_t narrow = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &narrow, 4);
      value.real = f;
    } else {
      std::memcpy(&value.real, &bits, 8);
    }
    return Status::success();
  }

  /// uint8..64 (tags 0xcc..0xcf).
  Status readUInt(MsgValue &value, uint64_t tag) {
    static const char *names[] = {"a uint8", "a uint16", "a uint32",
                                  "a uint64"};
    if (!readBE(1 << (tag - 0xcc), value.uint))
      return truncated(names[tag - 0xcc]);
    value.kind = MsgValue::UInt;
    return Status::success();
  }

  /// int8..64 (tags 0xd0..0xd3).
  Status readInt(MsgValue &value, uint64_t tag) {
    static const char *names[] = {"an int8", "an int16", "an int32",
                                  "an int64"};
    int bytes = 1 << (tag - 0xd0);
    uint64_t bits;
    if (!readBE(bytes, bits))
      return truncated(names[tag - 0xd0]);
    // Sign-extend from `bytes` bytes.
    int shift = 64 - 8 * bytes;
    value.kind = MsgValue::Int;
    value.sint = static_cast<int64_t>(bits << shift) >> shift;
    return Status::success();
  }

  /// array16/32 and map16/32 (tags 0xdc..0xdf).
  Status readContainer(MsgValue &value, uint64_t tag, int depth) {
    bool isArray = tag == 0xdc || tag == 0xdd;
    bool wide = tag == 0xdd || tag == 0xdf;
    const char *what = isArray ? (wide ? "an array32" : "an array16")
                               : (wide ? "a map32" : "a map16");
    uint64_t n = 0;
    if (Status status = readLength(wide ? 4 : 2, what, n); !status.ok())
      return status;
    return isArray ? readArray(value, n, depth) : readMap(value, n, depth);
  }

  /// The error for a tag no case of `read` takes.
  Status unsupported(uint64_t tag, size_t start) const {
    const char *name = tag == 0xc1                  ? "never used"
                       : tag >= 0xc7 && tag <= 0xc9 ? "ext"
                       : tag >= 0xd4 && tag <= 0xd8 ? "fixext"
                                                    : "unknown";
    return fail("metadata: unsupported MessagePack type " + hex(tag) + " (" +
                name + ") at byte " + std::to_string(start));
  }

  Status readArray(MsgValue &value, uint64_t count, int depth) {
    value.kind = MsgValue::Array;
    // Every element takes at least one byte: no huge reservation from a
    // forged count.
    if (count > size - pos)
      return truncated("an array");
    value.items.resize(count);
    for (MsgValue &item : value.items)
      if (Status status = read(item, depth + 1); !status.ok())
        return status;
    return Status::success();
  }

  Status readMap(MsgValue &value, uint64_t count, int depth) {
    value.kind = MsgValue::Map;
    if (count > (size - pos) / 2)
      return truncated("a map");
    value.entries.resize(count);
    for (auto &entry : value.entries) {
      size_t keyAt = pos;
      MsgValue key;
      if (Status status = read(key, depth + 1); !status.ok())
        return status;
      if (key.kind != MsgValue::Str)
        return fail("metadata: map key at byte " + std::to_string(keyAt) +
                    " is " + kindName(key.kind) + ", expected a string");
      entry.first = std::move(key.bytes);
      if (Status status = read(entry.second, depth + 1); !status.ok())
        return status;
    }
    return Status::success();
  }

  const uint8_t *data;
  size_t size;
  size_t pos = 0;
};

} // namespace

const char *mla::rt::amdgpu::kindName(MsgValue::Kind kind) {
  switch (kind) {
  case MsgValue::Nil:
    return "nil";
  case MsgValue::Bool:
    return "a boolean";
  case MsgValue::UInt:
  case MsgValue::Int:
    return "an integer";
  case MsgValue::Float:
    return "a float";
  case MsgValue::Str:
    return "a string";
  case MsgValue::Bin:
    return "binary data";
  case MsgValue::Array:
    return "an array";
  case MsgValue::Map:
    return "a map";
  }
  return "?";
}

Expected<MsgValue> mla::rt::amdgpu::readMsgPack(const uint8_t *data,
                                                size_t size) {
  return MsgPackReader(data, size).readDocument();
}
