//===- Kernel.cpp - Loading, validating and launching kernels -------------===//

#include "mla/runtime/Kernel.h"
#include "mla/runtime/Device.h"

#include "KernelKinds.h"

#include <algorithm>
#include <mutex>

using namespace mla::rt;

namespace {

Status argError(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, message);
}

/// Reusable workspace buffers. A launch takes a buffer that is large enough
/// (or allocates one) and gives it back when done, so concurrent launches
/// never share scratch memory and steady-state launches do not allocate. At
/// most one buffer per concurrently running launch is kept.
class WorkspacePool {
public:
  Expected<std::unique_ptr<DeviceBuffer>> acquire(Backend &backend,
                                                  size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto fits = std::find_if(free.begin(), free.end(), [&](const auto &b) {
        return b->size() >= bytes;
      });
      if (fits != free.end()) {
        std::unique_ptr<DeviceBuffer> buffer = std::move(*fits);
        free.erase(fits);
        return buffer;
      }
      // Nothing fits: drop one too-small buffer so the pool does not grow.
      if (!free.empty())
        free.pop_back();
    }
    return backend.allocate(bytes);
  }

  void release(std::unique_ptr<DeviceBuffer> buffer) {
    std::lock_guard<std::mutex> lock(mutex);
    free.push_back(std::move(buffer));
  }

private:
  std::mutex mutex;
  std::vector<std::unique_ptr<DeviceBuffer>> free;
};

/// Returns a workspace buffer to its pool when the launch ends.
class WorkspaceLease {
public:
  WorkspaceLease(WorkspacePool &pool, std::unique_ptr<DeviceBuffer> buffer)
      : pool(pool), buffer(std::move(buffer)) {}
  ~WorkspaceLease() {
    if (buffer)
      pool.release(std::move(buffer));
  }
  WorkspaceLease(const WorkspaceLease &) = delete;
  WorkspaceLease &operator=(const WorkspaceLease &) = delete;

  uint8_t *data() const {
    return buffer ? static_cast<uint8_t *>(buffer->data()) : nullptr;
  }

private:
  WorkspacePool &pool;
  std::unique_ptr<DeviceBuffer> buffer;
};

int64_t evalDim(const DimExpr &expr, const std::vector<ArgValue> &args) {
  if (expr.isConstant())
    return expr.constant;
  return args[expr.argIndex].tensor().shape[expr.dim];
}

} // namespace

struct Kernel::Impl {
  std::shared_ptr<Backend> backend;
  Manifest manifest;
  size_t targetIndex = 0;
  /// Destroyed before `backend`.
  std::unique_ptr<Module> module;
  /// Module entry of each launch.
  std::vector<size_t> launchEntries;
  const KernelKindRules *rules = nullptr;
  WorkspacePool workspaces;

  const TargetSpec &target() const { return manifest.targets[targetIndex]; }
  Status checkStructure(const std::vector<ArgValue> &args) const;
  Status validate(const std::vector<ArgValue> &args) const;
};

/// The checks the runtime itself relies on: count, kind, dtype, rank.
Status Kernel::Impl::checkStructure(const std::vector<ArgValue> &args) const {
  if (args.size() != manifest.args.size())
    return argError("expected " + std::to_string(manifest.args.size()) +
                    " arguments, got " + std::to_string(args.size()));
  for (const ManifestArg &expected : manifest.args) {
    const ArgValue &arg = args[expected.index];
    const std::string &role = expected.role;
    if (expected.kind == ArgKind::Scalar) {
      if (!arg.isScalar())
        return argError(role + ": expected a scalar, got a tensor");
      if (arg.scalar().getDType() != expected.dtype)
        return argError(role + ": expected dtype " + dtypeName(expected.dtype) +
                        ", got " + dtypeName(arg.scalar().getDType()));
      continue;
    }
    if (!arg.isTensor())
      return argError(role + ": expected a tensor, got a scalar");
    const TensorView &t = arg.tensor();
    if (t.dtype != expected.dtype)
      return argError(role + ": expected dtype " + dtypeName(expected.dtype) +
                      ", got " + dtypeName(t.dtype));
    if (t.shape.size() != expected.dims.size())
      return argError(role + ": expected rank " +
                      std::to_string(expected.dims.size()) + ", got " +
                      std::to_string(t.shape.size()));
    int64_t bytes = static_cast<int64_t>(dtypeSize(t.dtype));
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] < 0)
        return argError(role + ": dim " + std::to_string(d) + " is " +
                        std::to_string(t.shape[d]) + " (negative)");
      if (__builtin_mul_overflow(bytes, t.shape[d], &bytes))
        return argError(role + ": shape " + shapeToString(t.shape) +
                        " is too large");
    }
  }
  return Status::success();
}

Status Kernel::Impl::validate(const std::vector<ArgValue> &args) const {
  if (Status status = checkStructure(args); !status.ok())
    return status;
  for (const ManifestArg &expected : manifest.args) {
    if (expected.kind != ArgKind::Memref)
      continue;
    const TensorView &t = args[expected.index].tensor();
    const std::string &role = expected.role;
    for (size_t d = 0; d < t.shape.size(); ++d)
      if (expected.dims[d] != kDynamicDim && t.shape[d] != expected.dims[d])
        return argError(role + ": dim " + std::to_string(d) + " is " +
                        std::to_string(t.shape[d]) + ", expected " +
                        std::to_string(expected.dims[d]));
    if (!t.data && t.numElements() > 0)
      return argError(role + ": data is null");
  }
  if (rules)
    return rules->validateArgs(manifest, args, *backend);
  return Status::success();
}

const Manifest &Kernel::getManifest() const { return impl->manifest; }

const TargetSpec &Kernel::getTarget() const { return impl->target(); }

Status Kernel::validate(const std::vector<ArgValue> &args) const {
  return impl->validate(args);
}

Status Kernel::launch(const std::vector<ArgValue> &args,
                      const LaunchOptions &options) const {
  Impl &k = *impl;
  Status status = options.validate ? k.validate(args) : k.checkStructure(args);
  if (!status.ok())
    return status;

  // Lay the workspaces out in one buffer, each 64-byte aligned.
  const TargetSpec &target = k.target();
  std::vector<ArgValue> workspaces;
  std::vector<size_t> offsets;
  size_t totalBytes = 0;
  for (const WorkspaceSpec &spec : target.workspaces) {
    TensorView view{nullptr, spec.dtype, {}};
    int64_t bytes = static_cast<int64_t>(dtypeSize(spec.dtype));
    for (const DimExpr &dim : spec.dims) {
      view.shape.push_back(evalDim(dim, args));
      if (__builtin_mul_overflow(bytes, view.shape.back(), &bytes))
        return argError("workspace " + std::to_string(spec.index) + ": shape " +
                        shapeToString(view.shape) + " is too large");
    }
    offsets.push_back(totalBytes);
    totalBytes += (static_cast<size_t>(bytes) + 63) / 64 * 64;
    workspaces.emplace_back(std::move(view));
  }
  std::unique_ptr<DeviceBuffer> buffer;
  if (totalBytes) {
    Expected<std::unique_ptr<DeviceBuffer>> acquired =
        k.workspaces.acquire(*k.backend, totalBytes);
    if (!acquired.ok())
      return acquired.status().withContext("allocating workspaces");
    buffer = acquired.take();
  }
  WorkspaceLease lease(k.workspaces, std::move(buffer));
  for (size_t i = 0; i < workspaces.size(); ++i) {
    TensorView view = workspaces[i].tensor();
    view.data = lease.data() + offsets[i];
    workspaces[i] = ArgValue(std::move(view));
  }

  for (size_t l = 0; l < target.launches.size(); ++l) {
    const LaunchSpec &spec = target.launches[l];
    std::vector<const ArgValue *> launchArgs;
    for (int index : spec.args)
      launchArgs.push_back(index < static_cast<int>(args.size())
                               ? &args[index]
                               : &workspaces[index - args.size()]);
    Grid grid;
    for (int d = 0; d < 3; ++d)
      grid[d] = evalDim(spec.grid[d], args);
    if (Status status =
            k.backend->launch(*k.module, k.launchEntries[l], grid, launchArgs);
        !status.ok())
      return status.withContext("launch '" + spec.entry + "'");
  }
  return Status::success();
}

Expected<std::vector<ArgValue>>
Kernel::bindByRole(const std::map<std::string, ArgValue> &argsByRole) const {
  const Manifest &manifest = impl->manifest;
  std::vector<ArgValue> args;
  for (const ManifestArg &expected : manifest.args) {
    auto it = argsByRole.find(expected.role);
    if (it == argsByRole.end())
      return argError("missing argument for role '" + expected.role + "'");
    args.push_back(it->second);
  }
  for (const auto &entry : argsByRole)
    if (!manifest.findArg(entry.first))
      return argError("unknown role '" + entry.first + "' (kernel '" +
                      manifest.kernel + "' has no such argument)");
  return args;
}

Status Kernel::launchByRole(const std::map<std::string, ArgValue> &argsByRole,
                            const LaunchOptions &options) const {
  Expected<std::vector<ArgValue>> args = bindByRole(argsByRole);
  if (!args.ok())
    return args.status();
  return launch(*args, options);
}

Status Kernel::launchDecode(const DecodeArgs &args,
                            const LaunchOptions &options) const {
  const Manifest &manifest = impl->manifest;
  if (manifest.kernel != "decode")
    return Status::error(ErrorCode::Unsupported,
                         "launchDecode needs a 'decode' kernel, this one is '" +
                             manifest.kernel + "'");
  // The decode rules guarantee a floating-point scale.
  Scalar scale = Scalar::ofFloat(manifest.findArg("scale")->dtype, args.scale);
  return launchByRole({{"q", args.q},
                       {"kv", args.kv},
                       {"block_table", args.blockTable},
                       {"seq_lens", args.seqLens},
                       {"scale", scale},
                       {"o", args.o},
                       {"lse", args.lse}},
                      options);
}

Expected<Kernel> Device::loadKernel(const Package &package,
                                    std::string_view targetName) const {
  const Manifest &manifest = package.manifest;
  const TargetSpec *target = manifest.findTarget(targetName);
  if (!target)
    return Status::error(ErrorCode::InvalidArgument,
                         "the package has no target '" +
                             std::string(targetName) + "'");
  if (!backend->supportsTarget(targetName))
    return Status::error(ErrorCode::Unsupported,
                         "device '" + std::string(getName()) +
                             "' cannot run target '" + target->name + "'");
  const std::vector<uint8_t> *code = package.findSection(target->section);
  if (!code)
    return Status::error(ErrorCode::InvalidPackage,
                         "the package has no section '" + target->section +
                             "' for target '" + target->name + "'");

  auto impl = std::make_shared<Kernel::Impl>();
  impl->backend = backend;
  impl->manifest = manifest;
  impl->targetIndex = target - manifest.targets.data();
  impl->rules = findKernelKindRules(manifest.kernel);
  std::vector<std::string> entries;
  for (const LaunchSpec &launch : target->launches) {
    auto it = std::find(entries.begin(), entries.end(), launch.entry);
    impl->launchEntries.push_back(it - entries.begin());
    if (it == entries.end())
      entries.push_back(launch.entry);
  }
  Expected<std::unique_ptr<Module>> module =
      backend->loadModule(*code, entries);
  if (!module.ok())
    return module.status().withContext("target '" + target->name + "'");
  impl->module = module.take();
  return Kernel(std::move(impl));
}

Expected<Kernel> Device::loadKernel(const Package &package) const {
  std::string targets;
  for (const TargetSpec &target : package.manifest.targets) {
    if (backend->supportsTarget(target.name))
      return loadKernel(package, target.name);
    targets += (targets.empty() ? "" : ", ") + target.name;
  }
  return Status::error(ErrorCode::Unsupported,
                       "the package has no target for device '" +
                           std::string(getName()) +
                           "' (its targets: " + targets + ")");
}
