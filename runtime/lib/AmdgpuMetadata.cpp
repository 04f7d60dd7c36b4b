//===- AmdgpuMetadata.cpp - AMDGPU code object notes and checks -----------===//
//
// The ELF notes of an AMDGPU code object, the metadata map in their
// MessagePack (read by AmdgpuMsgPack.cpp) and the checks of a code object
// against a manifest target. Every read goes through a bounds-checked
// cursor: malformed input of any length yields an error value, never an
// out-of-range access.
//
//===----------------------------------------------------------------------===//

#include "mla/runtime/AmdgpuMetadata.h"

#include "AmdgpuMsgPack.h"

#include <algorithm>
#include <cstring>
#include <map>

using namespace mla::rt;
using namespace mla::rt::amdgpu;

namespace {

/// Little-endian loads; the caller has checked the bounds.
uint64_t loadLE(const uint8_t *p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i)
    value = (value << 8) | p[i];
  return value;
}

/// Whether [offset, offset + length) lies within `size` bytes.
bool inBounds(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

//===----------------------------------------------------------------------===//
// ELF
//===----------------------------------------------------------------------===//

constexpr uint32_t kPtNote = 4;
constexpr uint32_t kShtNote = 7;

/// The descriptor of the first NT_AMDGPU_METADATA note in
/// [data + offset, data + offset + length); nullptr when there is none.
Expected<std::pair<const uint8_t *, size_t>>
findMetadataNote(const uint8_t *data, size_t size, uint64_t offset,
                 uint64_t length, uint64_t align, const std::string &where) {
  if (!inBounds(offset, length, size))
    return fail(where + " (offset " + std::to_string(offset) + ", " +
                std::to_string(length) + " bytes) lies outside the file (" +
                std::to_string(size) + " bytes)");
  // Notes are 4-byte aligned in AMDGPU code objects; an 8-aligned note
  // table pads to 8.
  uint64_t pad = align == 8 ? 8 : 4;
  auto padded = [&](uint64_t n) { return (n + pad - 1) / pad * pad; };
  uint64_t pos = 0;
  while (pos < length) {
    if (length - pos < 12)
      return fail("truncated note header at offset " +
                  std::to_string(offset + pos) + " in " + where);
    const uint8_t *note = data + offset + pos;
    uint64_t nameSize = loadLE(note, 4);
    uint64_t descSize = loadLE(note + 4, 4);
    uint64_t type = loadLE(note + 8, 4);
    // As LLVM's Elf_Note: the descriptor starts at the header and name
    // padded to the alignment, the next note after the padded descriptor.
    uint64_t nameStart = pos + 12;
    uint64_t descStart = pos + padded(12 + nameSize);
    if (!inBounds(nameStart, nameSize, length) ||
        !inBounds(descStart, descSize, length))
      return fail("note at offset " + std::to_string(offset + pos) + " in " +
                  where + " is truncated (name " + std::to_string(nameSize) +
                  " bytes, descriptor " + std::to_string(descSize) + " bytes)");
    const char *name =
        reinterpret_cast<const char *>(data + offset + nameStart);
    // "AMDGPU" with its terminating NUL.
    if (type == kNoteAmdgpuMetadata && nameSize == 7 &&
        std::memcmp(name, "AMDGPU", 7) == 0)
      return std::pair<const uint8_t *, size_t>{data + offset + descStart,
                                                static_cast<size_t>(descSize)};
    pos = descStart + padded(descSize);
  }
  return std::pair<const uint8_t *, size_t>{nullptr, 0};
}

struct ElfInfo {
  uint32_t flags = 0;
  const uint8_t *metadata = nullptr;
  size_t metadataSize = 0;
};

Expected<ElfInfo> readElf(const uint8_t *data, size_t size) {
  if (size < 4 || std::memcmp(data,
                              "\x7f"
                              "ELF",
                              4) != 0)
    return fail("not an ELF file (bad magic)");
  if (size < 64)
    return fail("truncated ELF header (" + std::to_string(size) +
                " bytes, need 64)");
  if (data[4] != 2 || data[5] != 1)
    return fail("not a 64-bit little-endian ELF file (class " +
                std::to_string(data[4]) + ", data encoding " +
                std::to_string(data[5]) + ")");
  if (data[6] != 1)
    return fail("ELF version " + std::to_string(data[6]) + " (expected 1)");
  uint64_t machine = loadLE(data + 18, 2);
  if (machine != kElfMachineAmdgpu)
    return fail("ELF machine " + std::to_string(machine) + ", expected " +
                std::to_string(kElfMachineAmdgpu) + " (EM_AMDGPU)");
  ElfInfo info;
  info.flags = static_cast<uint32_t>(loadLE(data + 48, 4));
  uint64_t phoff = loadLE(data + 32, 8), shoff = loadLE(data + 40, 8);
  uint64_t phentsize = loadLE(data + 54, 2), phnum = loadLE(data + 56, 2);
  uint64_t shentsize = loadLE(data + 58, 2), shnum = loadLE(data + 60, 2);

  auto search = [&](uint64_t offset, uint64_t length, uint64_t align,
                    const std::string &where) -> Status {
    Expected<std::pair<const uint8_t *, size_t>> note =
        findMetadataNote(data, size, offset, length, align, where);
    if (!note.ok())
      return note.status();
    if (!info.metadata && note->first) {
      info.metadata = note->first;
      info.metadataSize = note->second;
    }
    return Status::success();
  };

  // Program headers first (what a loader reads), then sections.
  if (phnum) {
    if (phentsize < 56)
      return fail("program header entries of " + std::to_string(phentsize) +
                  " bytes (expected 56)");
    if (!inBounds(phoff, phnum * phentsize, size))
      return fail(
          "the program header table (offset " + std::to_string(phoff) + ", " +
          std::to_string(phnum) + " x " + std::to_string(phentsize) +
          " bytes) lies outside the file (" + std::to_string(size) + " bytes)");
    for (uint64_t i = 0; i < phnum && !info.metadata; ++i) {
      const uint8_t *ph = data + phoff + i * phentsize;
      if (loadLE(ph, 4) != kPtNote)
        continue;
      if (Status status =
              search(loadLE(ph + 8, 8), loadLE(ph + 32, 8), loadLE(ph + 48, 8),
                     "PT_NOTE segment " + std::to_string(i));
          !status.ok())
        return status;
    }
  }
  if (!info.metadata && shnum) {
    if (shentsize < 64)
      return fail("section header entries of " + std::to_string(shentsize) +
                  " bytes (expected 64)");
    if (!inBounds(shoff, shnum * shentsize, size))
      return fail(
          "the section header table (offset " + std::to_string(shoff) + ", " +
          std::to_string(shnum) + " x " + std::to_string(shentsize) +
          " bytes) lies outside the file (" + std::to_string(size) + " bytes)");
    for (uint64_t i = 0; i < shnum && !info.metadata; ++i) {
      const uint8_t *sh = data + shoff + i * shentsize;
      if (loadLE(sh + 4, 4) != kShtNote)
        continue;
      if (Status status =
              search(loadLE(sh + 24, 8), loadLE(sh + 32, 8), loadLE(sh + 48, 8),
                     "SHT_NOTE section " + std::to_string(i));
          !status.ok())
        return status;
    }
  }
  if (!info.metadata)
    return fail("no NT_AMDGPU_METADATA note (owner \"AMDGPU\", type 32; code "
                "object v3 or newer)");
  return info;
}

//===----------------------------------------------------------------------===//
// The metadata map
//===----------------------------------------------------------------------===//

/// Typed lookups in a map, with messages naming the key and `owner`.
class Fields {
public:
  Fields(const MsgValue &map, std::string owner)
      : map(map), owner(std::move(owner)) {}

  Status string(const char *key, std::string &out, bool required = true) {
    const MsgValue *value = lookup(key, required);
    if (!value)
      return status;
    if (value->kind != MsgValue::Str)
      return wrongType(key, *value, "a string");
    out = value->bytes;
    return Status::success();
  }

  Status uint(const char *key, uint64_t &out, bool *present = nullptr) {
    const MsgValue *value = lookup(key, !present);
    if (present)
      *present = value != nullptr;
    if (!value)
      return status;
    return toUInt(key, *value, out);
  }

  Status boolean(const char *key, bool &out) {
    const MsgValue *value = lookup(key, true);
    if (!value)
      return status;
    if (value->kind != MsgValue::Bool)
      return wrongType(key, *value, "a boolean");
    out = value->boolean;
    return Status::success();
  }

  /// An array of non-negative integers.
  Status uints(const char *key, std::vector<uint64_t> &out,
               bool *present = nullptr) {
    const MsgValue *value = lookup(key, !present);
    if (present)
      *present = value != nullptr;
    if (!value)
      return status;
    if (value->kind != MsgValue::Array)
      return wrongType(key, *value, "an array of integers");
    out.clear();
    for (const MsgValue &item : value->items) {
      uint64_t n;
      if (Status s = toUInt(key, item, n); !s.ok())
        return s;
      out.push_back(n);
    }
    return Status::success();
  }

  /// An array (of maps, checked by the caller).
  Status array(const char *key, const std::vector<MsgValue> *&out) {
    const MsgValue *value = lookup(key, true);
    if (!value)
      return status;
    if (value->kind != MsgValue::Array)
      return wrongType(key, *value, "an array");
    out = &value->items;
    return Status::success();
  }

private:
  const MsgValue *lookup(const char *key, bool required) {
    status = Status::success();
    const MsgValue *value = map.find(key);
    if (!value && required)
      status = fail(owner + " has no '" + key + "'");
    return value;
  }

  Status toUInt(const char *key, const MsgValue &value, uint64_t &out) {
    if (value.kind == MsgValue::UInt) {
      out = value.uint;
      return Status::success();
    }
    if (value.kind == MsgValue::Int && value.sint >= 0) {
      out = static_cast<uint64_t>(value.sint);
      return Status::success();
    }
    if (value.kind == MsgValue::Int)
      return fail("'" + std::string(key) + "' of " + owner + " is " +
                  std::to_string(value.sint) +
                  ", expected a non-negative integer");
    return wrongType(key, value, "a non-negative integer");
  }

  Status wrongType(const char *key, const MsgValue &value,
                   const char *expected) const {
    return fail("'" + std::string(key) + "' of " + owner + " is " +
                kindName(value.kind) + ", expected " + expected);
  }

  const MsgValue &map;
  std::string owner;
  Status status;
};

Status readArg(const MsgValue &value, const std::string &owner,
               AmdgpuKernelArg &arg) {
  if (value.kind != MsgValue::Map)
    return fail(owner + " is " + kindName(value.kind) + ", expected a map");
  Fields f(value, owner);
  for (Status status :
       {f.uint(".offset", arg.offset), f.uint(".size", arg.size),
        f.string(".value_kind", arg.valueKind),
        f.string(".name", arg.name, /*required=*/false),
        f.string(".address_space", arg.addressSpace, /*required=*/false)})
    if (!status.ok())
      return status;
  return Status::success();
}

Status readKernel(const MsgValue &value, size_t index,
                  AmdgpuKernelMetadata &kernel) {
  std::string owner = "kernel " + std::to_string(index);
  if (value.kind != MsgValue::Map)
    return fail(owner + " is " + kindName(value.kind) + ", expected a map");
  // Name the kernel in later messages once its name is known.
  if (Status status = Fields(value, owner).string(".name", kernel.name);
      !status.ok())
    return status;
  owner = "kernel '" + kernel.name + "'";
  Fields f(value, owner);
  bool hasAgpr = false, hasReqd = false;
  uint64_t agpr = 0;
  std::vector<uint64_t> reqd;
  const std::vector<MsgValue> *args = nullptr;
  for (Status status :
       {f.string(".symbol", kernel.symbol),
        f.uint(".kernarg_segment_size", kernel.kernargSegmentSize),
        f.uint(".kernarg_segment_align", kernel.kernargSegmentAlign),
        f.uint(".group_segment_fixed_size", kernel.groupSegmentFixedSize),
        f.uint(".private_segment_fixed_size", kernel.privateSegmentFixedSize),
        f.uint(".wavefront_size", kernel.wavefrontSize),
        f.uint(".sgpr_count", kernel.sgprCount),
        f.uint(".vgpr_count", kernel.vgprCount),
        f.uint(".agpr_count", agpr, &hasAgpr),
        f.uint(".max_flat_workgroup_size", kernel.maxFlatWorkgroupSize),
        f.boolean(".uses_dynamic_stack", kernel.usesDynamicStack),
        f.uints(".reqd_workgroup_size", reqd, &hasReqd)})
    if (!status.ok())
      return status;
  if (hasAgpr)
    kernel.agprCount = agpr;
  if (hasReqd) {
    if (reqd.size() != 3)
      return fail("'.reqd_workgroup_size' of " + owner + " has " +
                  std::to_string(reqd.size()) + " entries, expected 3");
    kernel.reqdWorkgroupSize =
        std::array<uint64_t, 3>{reqd[0], reqd[1], reqd[2]};
  }
  // `.args` is absent in kernels without arguments.
  if (value.find(".args")) {
    if (Status status = f.array(".args", args); !status.ok())
      return status;
    for (size_t i = 0; i < args->size(); ++i) {
      AmdgpuKernelArg arg;
      if (Status status =
              readArg((*args)[i], owner + " arg " + std::to_string(i), arg);
          !status.ok())
        return status;
      kernel.args.push_back(std::move(arg));
    }
  }
  return Status::success();
}

Expected<AmdgpuMetadata> readMetadata(const MsgValue &root) {
  if (root.kind != MsgValue::Map)
    return fail(std::string("metadata is ") + kindName(root.kind) +
                ", expected a map");
  AmdgpuMetadata metadata;
  Fields f(root, "the metadata");
  const std::vector<MsgValue> *kernels = nullptr;
  for (Status status : {f.uints("amdhsa.version", metadata.version),
                        f.string("amdhsa.target", metadata.target),
                        f.array("amdhsa.kernels", kernels)})
    if (!status.ok())
      return status;
  for (size_t i = 0; i < kernels->size(); ++i) {
    AmdgpuKernelMetadata kernel;
    if (Status status = readKernel((*kernels)[i], i, kernel); !status.ok())
      return status;
    metadata.kernels.push_back(std::move(kernel));
  }
  return metadata;
}

/// "gfx942:sramecc+:xnack-" -> ("gfx942", {sramecc: '+', xnack: '-'}).
std::pair<std::string, std::map<std::string, char>>
splitTargetId(std::string_view id) {
  std::string_view prefix = "amdgcn-amd-amdhsa--";
  if (id.substr(0, prefix.size()) == prefix)
    id.remove_prefix(prefix.size());
  size_t colon = id.find(':');
  std::pair<std::string, std::map<std::string, char>> result;
  result.first = std::string(id.substr(0, colon));
  while (colon != std::string_view::npos) {
    size_t next = id.find(':', colon + 1);
    std::string_view feature = id.substr(colon + 1, next - colon - 1);
    if (!feature.empty() && (feature.back() == '+' || feature.back() == '-'))
      result.second[std::string(feature.substr(0, feature.size() - 1))] =
          feature.back();
    colon = next;
  }
  return result;
}

} // namespace

const AmdgpuKernelMetadata *
AmdgpuMetadata::findKernel(std::string_view name) const {
  for (const AmdgpuKernelMetadata &kernel : kernels)
    if (kernel.name == name)
      return &kernel;
  return nullptr;
}

std::string AmdgpuMetadata::processor() const {
  return amdgpuProcessor(target);
}

std::string mla::rt::amdgpuProcessor(std::string_view targetId) {
  return splitTargetId(targetId).first;
}

bool mla::rt::amdgpuTargetRuns(std::string_view codeTarget,
                               std::string_view deviceArch) {
  auto code = splitTargetId(codeTarget);
  auto device = splitTargetId(deviceArch);
  if (code.first.empty() || code.first != device.first)
    return false;
  for (const auto &[feature, setting] : code.second) {
    auto it = device.second.find(feature);
    if (it != device.second.end() && it->second != setting)
      return false;
  }
  return true;
}

Expected<AmdgpuMetadata> mla::rt::parseAmdgpuMetadata(const uint8_t *data,
                                                      size_t size) {
  if (!data)
    size = 0;
  Expected<ElfInfo> elf = readElf(data, size);
  if (!elf.ok())
    return elf.status();
  Expected<MsgValue> root = readMsgPack(elf->metadata, elf->metadataSize);
  if (!root.ok())
    return root.status();
  Expected<AmdgpuMetadata> metadata = readMetadata(*root);
  if (!metadata.ok())
    return metadata.status();
  metadata->elfFlags = elf->flags;
  return metadata;
}

Status mla::rt::checkKernargLayout(const AmdgpuKernelMetadata &kernel,
                                   const std::vector<LaunchParam> &params) {
  auto mismatch = [&](const std::string &message) {
    return Status::error(ErrorCode::InvalidPackage,
                         "kernel '" + kernel.name + "': " + message);
  };
  std::vector<KernargSlot> expected = kernargLayout(params);
  std::vector<const AmdgpuKernelArg *> explicitArgs;
  for (const AmdgpuKernelArg &arg : kernel.args)
    if (!arg.isHidden())
      explicitArgs.push_back(&arg);
  size_t common = std::min(explicitArgs.size(), expected.size());
  for (size_t i = 0; i < common; ++i) {
    const AmdgpuKernelArg &arg = *explicitArgs[i];
    const KernargSlot &slot = expected[i];
    const char *kind = slot.isPointer ? "global_buffer" : "by_value";
    if (arg.offset == slot.offset && arg.size == slot.size &&
        arg.valueKind == kind)
      continue;
    return mismatch(describeKernargSlot(expected, i, params) +
                    " is at offset " + std::to_string(arg.offset) + " (" +
                    std::to_string(arg.size) + " bytes, " + arg.valueKind +
                    ") in the code object, the runtime packs it at offset " +
                    std::to_string(slot.offset) + " (" +
                    std::to_string(slot.size) + " bytes, " + kind + ")");
  }
  if (explicitArgs.size() != expected.size())
    return mismatch("the code object declares " +
                    std::to_string(explicitArgs.size()) +
                    " explicit kernel arguments, the runtime packs " +
                    std::to_string(expected.size()) + " for this launch");
  size_t bytes = kernargBufferBytes(expected);
  if (!expected.empty() &&
      kernel.kernargSegmentSize < expected.back().offset + expected.back().size)
    return mismatch(".kernarg_segment_size " +
                    std::to_string(kernel.kernargSegmentSize) +
                    " is smaller than the " + std::to_string(bytes) +
                    " bytes of its explicit arguments");
  return Status::success();
}

Status mla::rt::checkAmdgpuCodeObject(const AmdgpuMetadata &metadata,
                                      const Manifest &manifest,
                                      const TargetSpec &target,
                                      const AmdgpuDeviceLimits &limits) {
  for (const LaunchSpec &launch : target.launches) {
    auto error = [&](ErrorCode code, const std::string &message) {
      return Status::error(code, "launch '" + launch.entry + "': " + message);
    };
    const AmdgpuKernelMetadata *kernel = metadata.findKernel(launch.entry);
    if (!kernel) {
      std::string names;
      for (const AmdgpuKernelMetadata &k : metadata.kernels)
        names += (names.empty() ? "" : ", ") + k.name;
      return error(ErrorCode::InvalidPackage,
                   "the code object has no kernel '" + launch.entry +
                       "' (its kernels: " + (names.empty() ? "none" : names) +
                       ")");
    }
    if (limits.wavefrontSize &&
        kernel->wavefrontSize != static_cast<uint64_t>(limits.wavefrontSize))
      return error(ErrorCode::Unsupported,
                   "the kernel runs in wavefronts of " +
                       std::to_string(kernel->wavefrontSize) +
                       " lanes, the device's are " +
                       std::to_string(limits.wavefrontSize));
    if (!limits.allowScratch &&
        (kernel->privateSegmentFixedSize || kernel->usesDynamicStack))
      return error(ErrorCode::Unsupported,
                   "the kernel uses scratch memory (" +
                       std::to_string(kernel->privateSegmentFixedSize) +
                       " private bytes per work-item" +
                       (kernel->usesDynamicStack ? ", a dynamic stack" : "") +
                       "): register spills the runtime does not accept");
    const std::array<int64_t, 3> &b = launch.block;
    uint64_t threads = static_cast<uint64_t>(b[0] * b[1] * b[2]);
    std::string block = std::to_string(b[0]) + "," + std::to_string(b[1]) +
                        "," + std::to_string(b[2]);
    if (threads > kernel->maxFlatWorkgroupSize)
      return error(ErrorCode::InvalidPackage,
                   "block " + block + " has " + std::to_string(threads) +
                       " threads, the kernel allows at most " +
                       std::to_string(kernel->maxFlatWorkgroupSize) +
                       " (.max_flat_workgroup_size)");
    if (const auto &reqd = kernel->reqdWorkgroupSize;
        reqd && ((*reqd)[0] != static_cast<uint64_t>(b[0]) ||
                 (*reqd)[1] != static_cast<uint64_t>(b[1]) ||
                 (*reqd)[2] != static_cast<uint64_t>(b[2])))
      return error(ErrorCode::InvalidPackage,
                   "block " + block +
                       " differs from the kernel's "
                       ".reqd_workgroup_size " +
                       std::to_string((*reqd)[0]) + "," +
                       std::to_string((*reqd)[1]) + "," +
                       std::to_string((*reqd)[2]));
    uint64_t lds = kernel->groupSegmentFixedSize +
                   static_cast<uint64_t>(launch.sharedBytes);
    if (limits.ldsBytes && lds > static_cast<uint64_t>(limits.ldsBytes))
      return error(ErrorCode::Unsupported,
                   std::to_string(launch.sharedBytes) +
                       " bytes of dynamic LDS (shared) plus " +
                       std::to_string(kernel->groupSegmentFixedSize) +
                       " static exceed the device's " +
                       std::to_string(limits.ldsBytes) +
                       " bytes per workgroup");
    if (Status status =
            checkKernargLayout(*kernel, launchParams(manifest, target, launch));
        !status.ok())
      return status;
  }
  return Status::success();
}
