//===- CApiLaunch.cpp - The C API's argument binding and launches ---------===//
//
// mla_launch, its validation, workspace and output-shape queries, and the
// per-kind convenience launchers (mla_launch_decode, ...), which bind their
// kind's Kinds.def roles in table order and take mla_launch's path.
//
//===----------------------------------------------------------------------===//

#include "CApiInternal.h"

#include "mla/runtime/Kinds.h"
#include "mla/runtime/OutputShapes.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

using namespace mla::rt;
using namespace mla::rt::capi;

namespace {

/// The C++ view of a C tensor; `what` names it in errors.
Status toView(const mla_tensor &t, const std::string &what, TensorView &view) {
  // Read as the underlying type: a C caller may store any int there.
  std::underlying_type_t<mla_dtype> dtype;
  std::memcpy(&dtype, &t.dtype, sizeof(dtype));
  if (!validDType(static_cast<int>(dtype)))
    return invalid(what + ": dtype " + std::to_string(dtype) +
                   " is not an mla_dtype");
  if (t.rank < 0 || t.rank > MLA_MAX_RANK)
    return invalid(what + ": rank " + std::to_string(t.rank) +
                   " is outside [0, " + std::to_string(MLA_MAX_RANK) + "]");
  view.data = t.data;
  view.dtype = toDType(t.dtype);
  view.shape.assign(t.shape, t.shape + t.rank);
  return Status::success();
}

/// Binds C arguments by role into the kernel's order.
Status bindArgs(const Kernel &kernel, const mla_arg *args, size_t numArgs,
                std::vector<ArgValue> &bound) {
  if (!args && numArgs)
    return invalid("args is null (num_args is " + std::to_string(numArgs) +
                   ")");
  const Manifest &manifest = kernel.getManifest();
  std::map<std::string, ArgValue> byRole;
  for (size_t i = 0; i < numArgs; ++i) {
    const mla_arg &arg = args[i];
    std::string where = "args[" + std::to_string(i) + "]";
    if (!arg.role)
      return invalid(where + ".role is null");
    std::string role = arg.role;
    if (byRole.count(role))
      return invalid(where + ": role '" + role + "' is given twice");
    const ManifestArg *expected = manifest.findArg(role);
    // A C caller may store any int in the enum: read it as its underlying
    // type (loading an out-of-range value as the enum is undefined in C++).
    std::underlying_type_t<mla_arg_kind> kind;
    std::memcpy(&kind, &arg.kind, sizeof(kind));
    switch (kind) {
    case MLA_ARG_TENSOR: {
      TensorView view;
      if (Status status = toView(arg.tensor, role, view); !status.ok())
        return status;
      byRole.emplace(role, ArgValue(std::move(view)));
      break;
    }
    case MLA_ARG_F32: {
      // Floating-point manifest scalars take the value in their dtype; any
      // other role gets an f32 scalar and the launch checks report it.
      if (expected && expected->kind == ArgKind::Scalar &&
          !isFloatingPoint(expected->dtype))
        return invalid(role + ": expected an integer scalar (" +
                       dtypeName(expected->dtype) +
                       ", MLA_ARG_INT), got MLA_ARG_F32");
      DType dtype = expected && expected->kind == ArgKind::Scalar
                        ? expected->dtype
                        : DType::F32;
      byRole.emplace(role, ArgValue(Scalar::ofFloat(dtype, arg.f32)));
      break;
    }
    case MLA_ARG_INT: {
      if (expected && expected->kind == ArgKind::Scalar &&
          isFloatingPoint(expected->dtype))
        return invalid(role + ": expected a floating-point scalar (" +
                       dtypeName(expected->dtype) +
                       ", MLA_ARG_F32), got MLA_ARG_INT");
      if (expected && expected->kind == ArgKind::Scalar &&
          expected->dtype == DType::I32) {
        if (arg.i64 < std::numeric_limits<int32_t>::min() ||
            arg.i64 > std::numeric_limits<int32_t>::max())
          return invalid(role + ": " + std::to_string(arg.i64) +
                         " does not fit in i32");
        byRole.emplace(role,
                       ArgValue(Scalar::i32(static_cast<int32_t>(arg.i64))));
      } else {
        byRole.emplace(role, ArgValue(Scalar::i64(arg.i64)));
      }
      break;
    }
    default:
      return invalid(where + " ('" + role + "'): kind " + std::to_string(kind) +
                     " is not an mla_arg_kind");
    }
  }
  Expected<std::vector<ArgValue>> ordered = kernel.bindByRole(byRole);
  if (!ordered.ok())
    return ordered.status();
  bound = ordered.take();
  return Status::success();
}

LaunchOptions toOptions(const mla_launch_options *options) {
  LaunchOptions out;
  if (!options)
    return out;
  out.validate = options->skip_validation == 0;
  out.stream = options->stream;
  out.workspace = options->workspace;
  out.workspaceBytes = options->workspace_bytes;
  out.hostBlockTable = options->host_block_table;
  out.hostSeqLens = options->host_seq_lens;
  for (size_t i = 0; i < options->num_host_copies; ++i)
    out.hostData[options->host_copies[i].role] = options->host_copies[i].data;
  return out;
}

/// Checks what toOptions reads.
Status checkOptions(const mla_launch_options *options) {
  if (!options)
    return Status::success();
  if (options->num_host_copies && !options->host_copies)
    return invalid("options->host_copies is null (num_host_copies is " +
                   std::to_string(options->num_host_copies) + ")");
  for (size_t i = 0; i < options->num_host_copies; ++i)
    if (!options->host_copies[i].role)
      return invalid("options->host_copies[" + std::to_string(i) +
                     "].role is null");
  return Status::success();
}

mla_arg tensorArg(const char *role, const mla_tensor &tensor) {
  mla_arg arg;
  std::memset(&arg, 0, sizeof(arg));
  arg.role = role;
  arg.kind = MLA_ARG_TENSOR;
  arg.tensor = tensor;
  return arg;
}

mla_arg floatArg(const char *role, float value) {
  mla_arg arg;
  std::memset(&arg, 0, sizeof(arg));
  arg.role = role;
  arg.kind = MLA_ARG_F32;
  arg.f32 = value;
  return arg;
}

/// The convenience launchers: the kind check, then mla_launch's path.
Status launchKind(const char *function, KernelKind kernelKind,
                  const mla_kernel *kernel, const void *args,
                  const std::vector<mla_arg> &cArgs,
                  const mla_launch_options *options) {
  MLA_REQUIRE(function, kernel);
  MLA_REQUIRE(function, args);
  assert(cArgs.size() == kindRoles(kernelKind).size() &&
         std::equal(cArgs.begin(), cArgs.end(), kindRoles(kernelKind).begin(),
                    [](const mla_arg &arg, const KindRole &role) {
                      return std::strcmp(arg.role, role.name) == 0;
                    }) &&
         "a launcher binds its kind's Kinds.def roles in table order");
  const char *kind = kindName(kernelKind);
  const std::string &actual = kernel->kernel.getManifest().kernel;
  if (actual != kind)
    return Status::error(ErrorCode::Unsupported,
                         std::string(function) + " needs " +
                             (std::strchr("aeiou", kind[0]) ? "an '" : "a '") +
                             kind + "' kernel, this one is '" + actual + "'");
  std::vector<ArgValue> bound;
  if (Status status =
          bindArgs(kernel->kernel, cArgs.data(), cArgs.size(), bound);
      !status.ok())
    return status;
  if (Status status = checkOptions(options); !status.ok())
    return status;
  return kernel->kernel.launch(bound, toOptions(options));
}

} // namespace

//===----------------------------------------------------------------------===//
// Launching
//===----------------------------------------------------------------------===//

extern "C" mla_status mla_kernel_validate(const mla_kernel *kernel,
                                          const mla_arg *args, size_t num_args,
                                          const mla_launch_options *options) {
  return guarded("mla_kernel_validate", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_validate", kernel);
    std::vector<ArgValue> bound;
    if (Status status = bindArgs(kernel->kernel, args, num_args, bound);
        !status.ok())
      return status;
    if (Status status = checkOptions(options); !status.ok())
      return status;
    return kernel->kernel.validate(bound, toOptions(options));
  });
}

extern "C" mla_status mla_kernel_workspace_bytes(const mla_kernel *kernel,
                                                 const mla_arg *args,
                                                 size_t num_args, size_t *out) {
  return guarded("mla_kernel_workspace_bytes", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_workspace_bytes", kernel);
    MLA_REQUIRE("mla_kernel_workspace_bytes", out);
    std::vector<ArgValue> bound;
    if (Status status = bindArgs(kernel->kernel, args, num_args, bound);
        !status.ok())
      return status;
    Expected<size_t> bytes = kernel->kernel.workspaceBytes(bound);
    if (!bytes.ok())
      return bytes.status();
    *out = *bytes;
    return Status::success();
  });
}

extern "C" mla_status
mla_kernel_output_shape(const mla_kernel *kernel, const char *role,
                        const mla_arg *args, size_t num_args, mla_tensor *out) {
  return guarded("mla_kernel_output_shape", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_output_shape", kernel);
    MLA_REQUIRE("mla_kernel_output_shape", role);
    MLA_REQUIRE("mla_kernel_output_shape", out);
    if (!args && num_args)
      return invalid("args is null (num_args is " + std::to_string(num_args) +
                     ")");
    std::map<std::string, std::vector<int64_t>> shapes;
    for (size_t i = 0; i < num_args; ++i) {
      if (!args[i].role)
        return invalid("args[" + std::to_string(i) + "].role is null");
      std::underlying_type_t<mla_arg_kind> kind;
      std::memcpy(&kind, &args[i].kind, sizeof(kind));
      if (kind != MLA_ARG_TENSOR)
        continue;
      TensorView view;
      if (Status status = toView(args[i].tensor, args[i].role, view);
          !status.ok())
        return status;
      shapes[args[i].role] = std::move(view.shape);
    }
    const Manifest &manifest = kernel->kernel.getManifest();
    Expected<std::vector<int64_t>> shape = outputShape(manifest, role, shapes);
    if (!shape.ok())
      return shape.status();
    if (shape->size() > MLA_MAX_RANK)
      return Status::error(ErrorCode::Unsupported,
                           std::string(role) + ": rank " +
                               std::to_string(shape->size()) +
                               " exceeds MLA_MAX_RANK");
    mla_tensor tensor;
    std::memset(&tensor, 0, sizeof(tensor));
    tensor.dtype = fromDType(manifest.findArg(role)->dtype);
    tensor.rank = static_cast<int32_t>(shape->size());
    std::copy(shape->begin(), shape->end(), tensor.shape);
    *out = tensor;
    return Status::success();
  });
}

extern "C" mla_status mla_kernel_reserve_workspace(const mla_kernel *kernel,
                                                   size_t bytes) {
  return guarded("mla_kernel_reserve_workspace", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_reserve_workspace", kernel);
    return kernel->kernel.reserveWorkspace(bytes);
  });
}

/// mla_launch and mla_launch_with_flags.
static Status launchWithFlags(const char *function, const mla_kernel *kernel,
                              const mla_arg *args, size_t num_args,
                              const mla_launch_options *options,
                              uint32_t flags) {
  MLA_REQUIRE(function, kernel);
  constexpr uint32_t kKnownFlags = MLA_LAUNCH_REUSE_PLAN;
  if (const uint32_t unknown = flags & ~kKnownFlags) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%x", unknown);
    return invalid(std::string("flags: unknown bits ") + hex +
                   " (known: MLA_LAUNCH_REUSE_PLAN = 0x1)");
  }
  std::vector<ArgValue> bound;
  if (Status status = bindArgs(kernel->kernel, args, num_args, bound);
      !status.ok())
    return status;
  if (Status status = checkOptions(options); !status.ok())
    return status;
  LaunchOptions launchOptions = toOptions(options);
  launchOptions.reusePlan = (flags & MLA_LAUNCH_REUSE_PLAN) != 0;
  return kernel->kernel.launch(bound, launchOptions);
}

extern "C" mla_status mla_launch(const mla_kernel *kernel, const mla_arg *args,
                                 size_t num_args,
                                 const mla_launch_options *options) {
  return guarded("mla_launch", [&]() -> Status {
    return launchWithFlags("mla_launch", kernel, args, num_args, options, 0);
  });
}

extern "C" mla_status mla_launch_with_flags(const mla_kernel *kernel,
                                            const mla_arg *args,
                                            size_t num_args,
                                            const mla_launch_options *options,
                                            uint32_t flags) {
  return guarded("mla_launch_with_flags", [&]() -> Status {
    return launchWithFlags("mla_launch_with_flags", kernel, args, num_args,
                           options, flags);
  });
}

extern "C" mla_status mla_kernel_plan_launches(const mla_kernel *kernel,
                                               size_t *out) {
  return guarded("mla_kernel_plan_launches", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_plan_launches", kernel);
    MLA_REQUIRE("mla_kernel_plan_launches", out);
    *out = kernel->kernel.planLaunches();
    return Status::success();
  });
}

extern "C" mla_status mla_launch_decode(const mla_kernel *kernel,
                                        const mla_decode_args *args,
                                        const mla_launch_options *options) {
  return guarded("mla_launch_decode", [&]() -> Status {
    std::vector<mla_arg> cArgs;
    if (args)
      cArgs = {tensorArg(roles::kQ, args->q),
               tensorArg(roles::kKv, args->kv),
               tensorArg(roles::kBlockTable, args->block_table),
               tensorArg(roles::kSeqLens, args->seq_lens),
               floatArg(roles::kScale, args->scale),
               tensorArg(roles::kO, args->o),
               tensorArg(roles::kLse, args->lse)};
    return launchKind("mla_launch_decode", KernelKind::Decode, kernel, args,
                      cArgs, options);
  });
}

extern "C" mla_status mla_launch_prefill(const mla_kernel *kernel,
                                         const mla_prefill_args *args,
                                         const mla_launch_options *options) {
  return guarded("mla_launch_prefill", [&]() -> Status {
    std::vector<mla_arg> cArgs;
    if (args)
      cArgs = {tensorArg(roles::kQ, args->q),
               tensorArg(roles::kK, args->k),
               tensorArg(roles::kV, args->v),
               tensorArg(roles::kCuSeqlensQ, args->cu_seqlens_q),
               tensorArg(roles::kCuSeqlensK, args->cu_seqlens_k),
               floatArg(roles::kScale, args->scale),
               tensorArg(roles::kO, args->o),
               tensorArg(roles::kLse, args->lse)};
    return launchKind("mla_launch_prefill", KernelKind::Prefill, kernel, args,
                      cArgs, options);
  });
}

extern "C" mla_status mla_launch_merge(const mla_kernel *kernel,
                                       const mla_merge_args *args,
                                       const mla_launch_options *options) {
  return guarded("mla_launch_merge", [&]() -> Status {
    std::vector<mla_arg> cArgs;
    if (args)
      cArgs = {tensorArg(roles::kOParts, args->o_parts),
               tensorArg(roles::kLseParts, args->lse_parts),
               tensorArg(roles::kO, args->o),
               tensorArg(roles::kLse, args->lse)};
    return launchKind("mla_launch_merge", KernelKind::Merge, kernel, args,
                      cArgs, options);
  });
}

extern "C" mla_status mla_launch_append_kv(const mla_kernel *kernel,
                                           const mla_append_kv_args *args,
                                           const mla_launch_options *options) {
  return guarded("mla_launch_append_kv", [&]() -> Status {
    std::vector<mla_arg> cArgs;
    if (args)
      cArgs = {tensorArg(roles::kKvNew, args->kv_new),
               tensorArg(roles::kSlotMapping, args->slot_mapping),
               tensorArg(roles::kKv, args->kv)};
    return launchKind("mla_launch_append_kv", KernelKind::AppendKv, kernel,
                      args, cArgs, options);
  });
}
