//===- CApi.cpp - The C API (mla_runtime.h) over the C++ runtime ----------===//
//
// Errors, versions, devices, packages and kernel queries; the kind table and
// dtype conversion are in CApiKinds.cpp, launching in CApiLaunch.cpp, the
// page pool in CApiPagePool.cpp, what they share in CApiInternal.h.
//
//===----------------------------------------------------------------------===//

#include "CApiInternal.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>

using namespace mla::rt;
using namespace mla::rt::capi;

namespace {

thread_local std::string lastError;

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

mla_status mla::rt::capi::toCStatus(ErrorCode code) {
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

mla_status mla::rt::capi::record(mla_status code, std::string message) {
  lastError = std::move(message);
  return code;
}

mla_dtype mla::rt::capi::fromDType(DType dtype) {
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

DType mla::rt::capi::toDType(mla_dtype dtype) {
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

extern "C" mla_status mla_device_uses_host_memory(const mla_device *device,
                                                  int32_t *out) {
  return guarded("mla_device_uses_host_memory", [&]() -> Status {
    MLA_REQUIRE("mla_device_uses_host_memory", device);
    MLA_REQUIRE("mla_device_uses_host_memory", out);
    *out = device->device.getBackend().usesHostMemory() ? 1 : 0;
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
