//===- CApi.cpp - The C API (mla_runtime.h) over the C++ runtime ----------===//
//
// Every entry point runs inside `guarded`, which turns a Status into an
// mla_status plus the thread-local message and catches any C++ exception
// (out of host memory) at the C boundary.
//
//===----------------------------------------------------------------------===//

#include "mla/runtime/mla_runtime.h"

#include "mla/runtime/Device.h"
#include "mla/runtime/Kernel.h"
#include "mla/runtime/Kinds.h"
#include "mla/runtime/Package.h"
#include "mla/runtime/PagePool.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

using namespace mla::rt;

struct mla_device {
  Device device;
  std::string name;
};

struct mla_package {
  Package package;
};

struct mla_kernel {
  Kernel kernel;
};

struct mla_page_pool {
  PagePool pool;
};

namespace {

thread_local std::string lastError;

Status invalid(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, message);
}

mla_status toCStatus(ErrorCode code) {
  switch (code) {
  case ErrorCode::Ok:
    return MLA_OK;
  case ErrorCode::InvalidArgument:
    return MLA_ERROR_INVALID_ARGUMENT;
  case ErrorCode::InvalidPackage:
    return MLA_ERROR_INVALID_PACKAGE;
  case ErrorCode::InvalidManifest:
    return MLA_ERROR_INVALID_MANIFEST;
  case ErrorCode::Unsupported:
    return MLA_ERROR_UNSUPPORTED;
  case ErrorCode::IOError:
    return MLA_ERROR_IO;
  case ErrorCode::BackendError:
    return MLA_ERROR_BACKEND;
  }
  return MLA_ERROR_INTERNAL;
}

mla_status record(mla_status code, std::string message) {
  lastError = std::move(message);
  return code;
}

/// Runs `body` (returning a Status) and records its outcome.
template <typename Body> mla_status guarded(const char *function, Body &&body) {
  try {
    Status status = body();
    if (status.ok())
      return record(MLA_OK, std::string());
    return record(toCStatus(status.code()), status.message());
  } catch (const std::bad_alloc &) {
    return record(MLA_ERROR_INTERNAL,
                  std::string(function) + ": out of host memory");
  } catch (const std::exception &e) {
    return record(MLA_ERROR_INTERNAL,
                  std::string(function) + ": internal error: " + e.what());
  } catch (...) {
    return record(MLA_ERROR_INTERNAL,
                  std::string(function) + ": internal error");
  }
}

/// A null pointer argument named `what` of `function`.
Status nullArg(const char *function, const char *what) {
  return invalid(std::string(function) + ": " + what + " is null");
}

#define MLA_REQUIRE(function, pointer)                                         \
  do {                                                                         \
    if (!(pointer))                                                            \
      return nullArg(function, #pointer);                                      \
  } while (0)

bool validDType(int dtype) {
  return dtype >= MLA_DTYPE_BF16 && dtype <= MLA_DTYPE_I64;
}

DType toDType(mla_dtype dtype) {
  switch (dtype) {
  case MLA_DTYPE_BF16:
    return DType::BF16;
  case MLA_DTYPE_F16:
    return DType::F16;
  case MLA_DTYPE_F32:
    return DType::F32;
  case MLA_DTYPE_I32:
    return DType::I32;
  case MLA_DTYPE_I64:
    return DType::I64;
  }
  return DType::F32;
}

mla_dtype fromDType(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return MLA_DTYPE_BF16;
  case DType::F16:
    return MLA_DTYPE_F16;
  case DType::F32:
    return MLA_DTYPE_F32;
  case DType::I32:
    return MLA_DTYPE_I32;
  case DType::I64:
    return MLA_DTYPE_I64;
  }
  return MLA_DTYPE_F32;
}

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

/// Copies a manifest argument into the C description.
Status describeArg(const ManifestArg &arg, mla_arg_info *out) {
  if (arg.dims.size() > MLA_MAX_RANK)
    return Status::error(ErrorCode::Unsupported,
                         arg.role + ": rank " +
                             std::to_string(arg.dims.size()) +
                             " exceeds MLA_MAX_RANK");
  mla_arg_info info;
  std::memset(&info, 0, sizeof(info));
  info.index = arg.index;
  info.role = arg.role.c_str();
  info.is_scalar = arg.kind == ArgKind::Scalar;
  info.dtype = fromDType(arg.dtype);
  info.rank = static_cast<int32_t>(arg.dims.size());
  for (size_t d = 0; d < arg.dims.size(); ++d)
    info.dims[d] = arg.dims[d] == kDynamicDim ? MLA_DYNAMIC_DIM : arg.dims[d];
  *out = info;
  return Status::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Errors and versions
//===----------------------------------------------------------------------===//

extern "C" const char *mla_last_error(void) { return lastError.c_str(); }

extern "C" const char *mla_status_name(mla_status status) {
  switch (status) {
  case MLA_OK:
    return "ok";
  case MLA_ERROR_INVALID_ARGUMENT:
    return "invalid argument";
  case MLA_ERROR_INVALID_PACKAGE:
    return "invalid package";
  case MLA_ERROR_INVALID_MANIFEST:
    return "invalid manifest";
  case MLA_ERROR_UNSUPPORTED:
    return "unsupported";
  case MLA_ERROR_IO:
    return "I/O error";
  case MLA_ERROR_BACKEND:
    return "backend error";
  case MLA_ERROR_INTERNAL:
    return "internal error";
  }
  return "unknown status";
}

extern "C" int mla_version(void) {
  return MLA_RUNTIME_VERSION_MAJOR * 10000 + MLA_RUNTIME_VERSION_MINOR * 100 +
         MLA_RUNTIME_VERSION_PATCH;
}

#define MLA_STRINGIFY2(x) #x
#define MLA_STRINGIFY(x) MLA_STRINGIFY2(x)

extern "C" const char *mla_version_string(void) {
  return MLA_STRINGIFY(MLA_RUNTIME_VERSION_MAJOR) "." MLA_STRINGIFY(
      MLA_RUNTIME_VERSION_MINOR) "." MLA_STRINGIFY(MLA_RUNTIME_VERSION_PATCH);
}

extern "C" uint32_t mla_package_format_version(void) {
  return kPackageFormatVersion;
}

extern "C" size_t mla_dtype_size(mla_dtype dtype) {
  return validDType(dtype) ? dtypeSize(toDType(dtype)) : 0;
}

extern "C" const char *mla_dtype_name(mla_dtype dtype) {
  return validDType(dtype) ? dtypeName(toDType(dtype)) : "unknown";
}

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

extern "C" mla_status mla_device_open(const char *name,
                                      const mla_device_options *options,
                                      mla_device **out) {
  return guarded("mla_device_open", [&]() -> Status {
    MLA_REQUIRE("mla_device_open", name);
    MLA_REQUIRE("mla_device_open", out);
    DeviceOptions deviceOptions;
    if (options)
      deviceOptions.hostThreads = options->host_threads;
    Expected<Device> device = Device::open(name, deviceOptions);
    if (!device.ok())
      return device.status();
    auto handle =
        std::make_unique<mla_device>(mla_device{device.take(), std::string()});
    handle->name = std::string(handle->device.getName());
    *out = handle.release();
    return Status::success();
  });
}

extern "C" void mla_device_close(mla_device *device) { delete device; }

extern "C" mla_status mla_device_name(const mla_device *device,
                                      const char **out) {
  return guarded("mla_device_name", [&]() -> Status {
    MLA_REQUIRE("mla_device_name", device);
    MLA_REQUIRE("mla_device_name", out);
    *out = device->name.c_str();
    return Status::success();
  });
}

extern "C" mla_status mla_device_synchronize(const mla_device *device,
                                             void *stream) {
  return guarded("mla_device_synchronize", [&]() -> Status {
    MLA_REQUIRE("mla_device_synchronize", device);
    return device->device.getBackend().synchronize(stream);
  });
}

//===----------------------------------------------------------------------===//
// Packages
//===----------------------------------------------------------------------===//

extern "C" mla_status mla_package_load_file(const char *path,
                                            mla_package **out) {
  return guarded("mla_package_load_file", [&]() -> Status {
    MLA_REQUIRE("mla_package_load_file", path);
    MLA_REQUIRE("mla_package_load_file", out);
    Expected<Package> package = readPackage(path);
    if (!package.ok())
      return package.status();
    *out = new mla_package{package.take()};
    return Status::success();
  });
}

extern "C" mla_status mla_package_load_memory(const void *data, size_t size,
                                              mla_package **out) {
  return guarded("mla_package_load_memory", [&]() -> Status {
    if (!data && size)
      return nullArg("mla_package_load_memory", "data");
    MLA_REQUIRE("mla_package_load_memory", out);
    static const uint8_t kEmpty = 0;
    Expected<Package> package =
        parsePackage(data ? static_cast<const uint8_t *>(data) : &kEmpty, size);
    if (!package.ok())
      return package.status();
    *out = new mla_package{package.take()};
    return Status::success();
  });
}

extern "C" void mla_package_close(mla_package *package) { delete package; }

extern "C" mla_status mla_package_kind(const mla_package *package,
                                       const char **out) {
  return guarded("mla_package_kind", [&]() -> Status {
    MLA_REQUIRE("mla_package_kind", package);
    MLA_REQUIRE("mla_package_kind", out);
    *out = package->package.manifest.kernel.c_str();
    return Status::success();
  });
}

extern "C" mla_status mla_package_num_targets(const mla_package *package,
                                              size_t *out) {
  return guarded("mla_package_num_targets", [&]() -> Status {
    MLA_REQUIRE("mla_package_num_targets", package);
    MLA_REQUIRE("mla_package_num_targets", out);
    *out = package->package.manifest.targets.size();
    return Status::success();
  });
}

extern "C" mla_status mla_package_target(const mla_package *package,
                                         size_t index, const char **out) {
  return guarded("mla_package_target", [&]() -> Status {
    MLA_REQUIRE("mla_package_target", package);
    MLA_REQUIRE("mla_package_target", out);
    const auto &targets = package->package.manifest.targets;
    if (index >= targets.size())
      return invalid("mla_package_target: index " + std::to_string(index) +
                     " is out of range (the package has " +
                     std::to_string(targets.size()) + " targets)");
    *out = targets[index].name.c_str();
    return Status::success();
  });
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

extern "C" mla_status mla_kernel_load(const mla_device *device,
                                      const mla_package *package,
                                      const char *target, mla_kernel **out) {
  return guarded("mla_kernel_load", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_load", device);
    MLA_REQUIRE("mla_kernel_load", package);
    MLA_REQUIRE("mla_kernel_load", out);
    Expected<Kernel> kernel =
        target ? device->device.loadKernel(package->package, target)
               : device->device.loadKernel(package->package);
    if (!kernel.ok())
      return kernel.status();
    *out = new mla_kernel{kernel.take()};
    return Status::success();
  });
}

extern "C" void mla_kernel_close(mla_kernel *kernel) { delete kernel; }

extern "C" mla_status mla_kernel_kind(const mla_kernel *kernel,
                                      const char **out) {
  return guarded("mla_kernel_kind", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_kind", kernel);
    MLA_REQUIRE("mla_kernel_kind", out);
    *out = kernel->kernel.getManifest().kernel.c_str();
    return Status::success();
  });
}

extern "C" mla_status mla_kernel_target(const mla_kernel *kernel,
                                        const char **out) {
  return guarded("mla_kernel_target", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_target", kernel);
    MLA_REQUIRE("mla_kernel_target", out);
    *out = kernel->kernel.getTarget().name.c_str();
    return Status::success();
  });
}

extern "C" mla_status mla_kernel_num_args(const mla_kernel *kernel,
                                          size_t *out) {
  return guarded("mla_kernel_num_args", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_num_args", kernel);
    MLA_REQUIRE("mla_kernel_num_args", out);
    *out = kernel->kernel.getManifest().args.size();
    return Status::success();
  });
}

extern "C" mla_status mla_kernel_arg(const mla_kernel *kernel, size_t index,
                                     mla_arg_info *out) {
  return guarded("mla_kernel_arg", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_arg", kernel);
    MLA_REQUIRE("mla_kernel_arg", out);
    const auto &args = kernel->kernel.getManifest().args;
    if (index >= args.size())
      return invalid("mla_kernel_arg: index " + std::to_string(index) +
                     " is out of range (the kernel has " +
                     std::to_string(args.size()) + " arguments)");
    return describeArg(args[index], out);
  });
}

extern "C" mla_status mla_kernel_find_arg(const mla_kernel *kernel,
                                          const char *role, mla_arg_info *out) {
  return guarded("mla_kernel_find_arg", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_find_arg", kernel);
    MLA_REQUIRE("mla_kernel_find_arg", role);
    MLA_REQUIRE("mla_kernel_find_arg", out);
    const Manifest &manifest = kernel->kernel.getManifest();
    const ManifestArg *arg = manifest.findArg(role);
    if (!arg)
      return invalid("mla_kernel_find_arg: kernel '" + manifest.kernel +
                     "' has no argument with role '" + role + "'");
    return describeArg(*arg, out);
  });
}

extern "C" mla_status mla_kernel_header_int(const mla_kernel *kernel,
                                            const char *key, int64_t *out) {
  return guarded("mla_kernel_header_int", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_header_int", kernel);
    MLA_REQUIRE("mla_kernel_header_int", key);
    MLA_REQUIRE("mla_kernel_header_int", out);
    const Manifest &m = kernel->kernel.getManifest();
    const std::pair<const char *, int64_t> values[] = {
        {"heads", m.heads},          {"q_len", m.qLen},
        {"latent_dim", m.latentDim}, {"rope_dim", m.ropeDim},
        {"page_size", m.pageSize},   {"qk_dim", m.qkDim},
        {"v_dim", m.vDim},           {"causal", m.causal},
        {"parts", m.parts}};
    std::string known;
    for (auto [name, value] : values) {
      known += known.empty() ? name : std::string(", ") + name;
      if (std::strcmp(name, key) != 0)
        continue;
      if (value < 0)
        return invalid("mla_kernel_header_int: the manifest has no '" +
                       std::string(key) + "' line");
      *out = value;
      return Status::success();
    }
    return invalid("mla_kernel_header_int: unknown key '" + std::string(key) +
                   "' (integer keys: " + known + ")");
  });
}

extern "C" mla_status mla_kernel_header_string(const mla_kernel *kernel,
                                               const char *key,
                                               const char **out) {
  return guarded("mla_kernel_header_string", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_header_string", kernel);
    MLA_REQUIRE("mla_kernel_header_string", key);
    MLA_REQUIRE("mla_kernel_header_string", out);
    const Manifest &m = kernel->kernel.getManifest();
    std::string name = key;
    if (name == "kernel") {
      *out = m.kernel.c_str();
    } else if (name == "function") {
      *out = m.function.c_str();
    } else if (name == "target") {
      *out = kernel->kernel.getTarget().name.c_str();
    } else if (name == "dtype") {
      if (!m.dtype)
        return invalid("mla_kernel_header_string: the manifest has no "
                       "'dtype' line");
      *out = dtypeName(*m.dtype);
    } else if (name.rfind("config.", 0) == 0) {
      auto it = m.config.find(name.substr(7));
      if (it == m.config.end())
        return invalid("mla_kernel_header_string: the manifest's config has "
                       "no '" +
                       name.substr(7) + "'");
      *out = it->second.c_str();
    } else {
      return invalid("mla_kernel_header_string: unknown key '" + name +
                     "' (string keys: kernel, function, dtype, target, "
                     "config.NAME)");
    }
    return Status::success();
  });
}

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

extern "C" mla_status mla_kernel_reserve_workspace(const mla_kernel *kernel,
                                                   size_t bytes) {
  return guarded("mla_kernel_reserve_workspace", [&]() -> Status {
    MLA_REQUIRE("mla_kernel_reserve_workspace", kernel);
    return kernel->kernel.reserveWorkspace(bytes);
  });
}

extern "C" mla_status mla_launch(const mla_kernel *kernel, const mla_arg *args,
                                 size_t num_args,
                                 const mla_launch_options *options) {
  return guarded("mla_launch", [&]() -> Status {
    MLA_REQUIRE("mla_launch", kernel);
    std::vector<ArgValue> bound;
    if (Status status = bindArgs(kernel->kernel, args, num_args, bound);
        !status.ok())
      return status;
    if (Status status = checkOptions(options); !status.ok())
      return status;
    return kernel->kernel.launch(bound, toOptions(options));
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

//===----------------------------------------------------------------------===//
// Page pool
//===----------------------------------------------------------------------===//

extern "C" mla_status mla_page_pool_create(int64_t num_pages, int64_t page_size,
                                           mla_page_pool **out) {
  return guarded("mla_page_pool_create", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_create", out);
    Expected<PagePool> pool = PagePool::create(num_pages, page_size);
    if (!pool.ok())
      return pool.status();
    *out = new mla_page_pool{pool.take()};
    return Status::success();
  });
}

extern "C" void mla_page_pool_destroy(mla_page_pool *pool) { delete pool; }

extern "C" mla_status mla_page_pool_append_tokens(mla_page_pool *pool,
                                                  int64_t request,
                                                  int64_t count,
                                                  int32_t *slots) {
  return guarded("mla_page_pool_append_tokens", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_append_tokens", pool);
    if (count > 0 && !slots)
      return nullArg("mla_page_pool_append_tokens", "slots");
    return pool->pool.appendTokens(request, count, slots);
  });
}

extern "C" mla_status mla_page_pool_free_request(mla_page_pool *pool,
                                                 int64_t request) {
  return guarded("mla_page_pool_free_request", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_free_request", pool);
    return pool->pool.freeRequest(request);
  });
}

extern "C" mla_status mla_page_pool_allocate_pages(mla_page_pool *pool,
                                                   int64_t count,
                                                   int32_t *pages) {
  return guarded("mla_page_pool_allocate_pages", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_allocate_pages", pool);
    if (count > 0 && !pages)
      return nullArg("mla_page_pool_allocate_pages", "pages");
    Expected<std::vector<int32_t>> taken = pool->pool.allocatePages(count);
    if (!taken.ok())
      return taken.status();
    std::copy(taken->begin(), taken->end(), pages);
    return Status::success();
  });
}

extern "C" mla_status mla_page_pool_free_pages(mla_page_pool *pool,
                                               const int32_t *pages,
                                               int64_t count) {
  return guarded("mla_page_pool_free_pages", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_free_pages", pool);
    if (count < 0)
      return invalid("mla_page_pool_free_pages: count is " +
                     std::to_string(count));
    if (count > 0 && !pages)
      return nullArg("mla_page_pool_free_pages", "pages");
    return pool->pool.freePages(std::vector<int32_t>(pages, pages + count));
  });
}

extern "C" mla_status mla_page_pool_get_info(const mla_page_pool *pool,
                                             mla_page_pool_info *out) {
  return guarded("mla_page_pool_get_info", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_get_info", pool);
    MLA_REQUIRE("mla_page_pool_get_info", out);
    const PagePool &p = pool->pool;
    *out = {p.getNumPages(), p.getPageSize(), p.numFreePages(),
            p.numRequests()};
    return Status::success();
  });
}

extern "C" mla_status mla_page_pool_request_info(const mla_page_pool *pool,
                                                 int64_t request,
                                                 mla_request_info *out) {
  return guarded("mla_page_pool_request_info", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_request_info", pool);
    MLA_REQUIRE("mla_page_pool_request_info", out);
    const PagePool &p = pool->pool;
    *out = {p.hasRequest(request), p.length(request),
            static_cast<int64_t>(p.pages(request).size()),
            p.tokensWithoutNewPages(request), p.tokensThatFit(request)};
    return Status::success();
  });
}

extern "C" mla_status mla_page_pool_max_pages(const mla_page_pool *pool,
                                              const int64_t *requests,
                                              size_t count, int64_t *out) {
  return guarded("mla_page_pool_max_pages", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_max_pages", pool);
    MLA_REQUIRE("mla_page_pool_max_pages", out);
    if (count && !requests)
      return nullArg("mla_page_pool_max_pages", "requests");
    *out =
        pool->pool.maxPages(std::vector<int64_t>(requests, requests + count));
    return Status::success();
  });
}

extern "C" mla_status mla_page_pool_export_block_table(
    const mla_page_pool *pool, const int64_t *requests, size_t count,
    int64_t max_pages_per_seq, int32_t *block_table, int32_t *seq_lens) {
  return guarded("mla_page_pool_export_block_table", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_export_block_table", pool);
    if (count && !requests)
      return nullArg("mla_page_pool_export_block_table", "requests");
    return pool->pool.exportBlockTable(
        std::vector<int64_t>(requests, requests + count), max_pages_per_seq,
        block_table, seq_lens);
  });
}
