//===- KernelParams.cpp - GPU kernel parameter packing --------------------===//

#include "mla/runtime/KernelParams.h"

#include <cstring>

using namespace mla::rt;

void mla::rt::packKernelParams(const std::vector<const ArgValue *> &args,
                               KernelParams &params) {
  size_t count = 0;
  for (const ArgValue *arg : args)
    count += arg->isTensor() ? 3 + 2 * arg->tensor().shape.size() : 1;
  // Sized before any pointer is taken: the slots never move afterwards.
  params.values.assign(count, 0);
  params.sizes.assign(count, 8);
  params.pointers.resize(count);

  size_t i = 0;
  for (const ArgValue *arg : args) {
    if (arg->isScalar()) {
      const Scalar &scalar = arg->scalar();
      size_t bytes = dtypeSize(scalar.getDType());
      std::memcpy(&params.values[i], scalar.data(), bytes);
      params.sizes[i++] = static_cast<uint8_t>(bytes);
      continue;
    }
    const TensorView &t = arg->tensor();
    size_t rank = t.shape.size();
    uint64_t address = reinterpret_cast<uintptr_t>(t.data);
    params.values[i] = address;     // allocated
    params.values[i + 1] = address; // aligned
    params.values[i + 2] = 0;       // offset
    int64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      params.values[i + 3 + d] = static_cast<uint64_t>(t.shape[d]);
      params.values[i + 3 + rank + d] = static_cast<uint64_t>(stride);
      stride *= t.shape[d];
    }
    i += 3 + 2 * rank;
  }
  for (size_t p = 0; p < count; ++p)
    params.pointers[p] = &params.values[p];
}

std::vector<LaunchParam> mla::rt::launchParams(const Manifest &manifest,
                                               const TargetSpec &target,
                                               const LaunchSpec &launch) {
  std::vector<LaunchParam> params;
  for (int index : launch.args) {
    LaunchParam param;
    if (index < static_cast<int>(manifest.args.size())) {
      const ManifestArg &arg = manifest.args[index];
      param.isTensor = arg.kind == ArgKind::Memref;
      param.dtype = arg.dtype;
      param.rank = static_cast<int>(arg.dims.size());
      param.name = "'" + arg.role + "'";
    } else {
      const WorkspaceSpec &workspace =
          target.workspaces[index - manifest.args.size()];
      param.dtype = workspace.dtype;
      param.rank = static_cast<int>(workspace.dims.size());
      param.name = "workspace " + std::to_string(index);
    }
    params.push_back(std::move(param));
  }
  return params;
}

std::vector<KernargSlot>
mla::rt::kernargLayout(const std::vector<LaunchParam> &params) {
  std::vector<KernargSlot> layout;
  size_t offset = 0;
  auto add = [&](size_t param, size_t size, KernargPart part, int dim) {
    offset = (offset + size - 1) / size * size;
    layout.push_back(
        {offset, size, part <= KernargPart::Aligned, param, part, dim});
    offset += size;
  };
  for (size_t p = 0; p < params.size(); ++p) {
    const LaunchParam &param = params[p];
    if (!param.isTensor) {
      add(p, dtypeSize(param.dtype), KernargPart::Scalar, 0);
      continue;
    }
    add(p, 8, KernargPart::Allocated, 0);
    add(p, 8, KernargPart::Aligned, 0);
    add(p, 8, KernargPart::Offset, 0);
    for (int d = 0; d < param.rank; ++d)
      add(p, 8, KernargPart::Size, d);
    for (int d = 0; d < param.rank; ++d)
      add(p, 8, KernargPart::Stride, d);
  }
  return layout;
}

size_t mla::rt::kernargBufferBytes(const std::vector<KernargSlot> &layout) {
  if (layout.empty())
    return 0;
  size_t end = layout.back().offset + layout.back().size;
  return (end + 7) / 8 * 8;
}

std::string
mla::rt::describeKernargSlot(const std::vector<KernargSlot> &layout,
                             size_t index,
                             const std::vector<LaunchParam> &params) {
  std::string text = "kernel argument " + std::to_string(index);
  if (index >= layout.size())
    return text;
  const KernargSlot &slot = layout[index];
  if (slot.param >= params.size())
    return text;
  const std::string &name = params[slot.param].name;
  std::string dim = std::to_string(slot.dim);
  switch (slot.part) {
  case KernargPart::Allocated:
    return text + " (the allocated pointer of " + name + ")";
  case KernargPart::Aligned:
    return text + " (the aligned pointer of " + name + ")";
  case KernargPart::Offset:
    return text + " (the offset of " + name + ")";
  case KernargPart::Size:
    return text + " (size " + dim + " of " + name + ")";
  case KernargPart::Stride:
    return text + " (stride " + dim + " of " + name + ")";
  case KernargPart::Scalar:
    return text + " (scalar " + name + ", " +
           dtypeName(params[slot.param].dtype) + ")";
  }
  return text;
}

Status mla::rt::packKernargBuffer(const KernelParams &params,
                                  const std::vector<KernargSlot> &layout,
                                  size_t bytes, std::vector<uint8_t> &buffer) {
  auto fail = [](const std::string &message) {
    return Status::error(ErrorCode::InvalidArgument, message);
  };
  if (params.size() != layout.size())
    return fail("the launch has " + std::to_string(params.size()) +
                " kernel arguments, the kernel takes " +
                std::to_string(layout.size()));
  for (size_t i = 0; i < layout.size(); ++i) {
    if (params.sizeOf(i) != layout[i].size)
      return fail("kernel argument " + std::to_string(i) + " has " +
                  std::to_string(params.sizeOf(i)) +
                  " bytes, the kernel takes " + std::to_string(layout[i].size));
    if (layout[i].offset > bytes || layout[i].size > bytes - layout[i].offset)
      return fail("kernel argument " + std::to_string(i) + " ends past the " +
                  std::to_string(bytes) + "-byte kernarg buffer");
  }
  buffer.assign(bytes, 0);
  for (size_t i = 0; i < layout.size(); ++i) {
    uint64_t value = params.rawValue(i);
    // Little-endian: the value's low bytes are its bytes.
    std::memcpy(buffer.data() + layout[i].offset, &value, layout[i].size);
  }
  return Status::success();
}
