//===- Kernel.cpp - Loading, validating and launching kernels -------------===//

#include "mla/runtime/Kernel.h"
#include "mla/runtime/Device.h"
#include "mla/runtime/GridLimits.h"

#include "KernelKinds.h"

#include <algorithm>
#include <cmath>
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

  /// Makes sure an idle buffer of at least `bytes` is in the pool.
  Status reserve(Backend &backend, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (const auto &buffer : free)
        if (buffer->size() >= bytes)
          return Status::success();
    }
    Expected<std::unique_ptr<DeviceBuffer>> buffer = backend.allocate(bytes);
    if (!buffer.ok())
      return buffer.status();
    release(buffer.take());
    return Status::success();
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

/// A manifest size for these argument shapes (saturating at INT64_MAX, so
/// that a size beyond every limit is reported as such).
int64_t evalDim(const DimExpr &expr, const std::vector<ArgValue> &args) {
  if (expr.isConstant())
    return expr.constant;
  int64_t v;
  if (__builtin_add_overflow(args[expr.argIndex].tensor().shape[expr.dim],
                             expr.addend, &v))
    v = expr.addend > 0 ? INT64_MAX : 0;
  return v <= 0 ? 0 : v / expr.divisor + (v % expr.divisor != 0);
}

/// Where a grid size comes from, for messages: "x dim 1", "ceil((q dim 0
/// + 3) / 64)", "cu_seqlens_q dim 0 - 1", "a constant".
std::string sizeSource(const Manifest &m, const DimExpr &expr) {
  if (expr.isConstant())
    return "a constant";
  std::string out =
      m.args[expr.argIndex].role + " dim " + std::to_string(expr.dim);
  if (expr.addend)
    out += (expr.addend > 0 ? " + " : " - ") +
           std::to_string(expr.addend > 0 ? expr.addend : -expr.addend);
  if (expr.divisor == 1)
    return out;
  return "ceil(" + (expr.addend ? "(" + out + ")" : out) + " / " +
         std::to_string(expr.divisor) + ")";
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
  /// KernelKindRules::planLaunches of the target.
  size_t planLaunches = 0;
  /// Synchronous backends: buffers handed to one launch at a time.
  WorkspacePool workspaces;
  /// Asynchronous backends: the buffer of reserveWorkspace.
  std::mutex reservedMutex;
  std::shared_ptr<DeviceBuffer> reserved;

  const TargetSpec &target() const { return manifest.targets[targetIndex]; }
  Status checkStructure(const std::vector<ArgValue> &args) const;
  /// Base-address alignment of the tensors (see kGpuTensorAlignment).
  Status checkAlignment(const std::vector<ArgValue> &args) const;
  Status validate(const std::vector<ArgValue> &args,
                  const LaunchOptions *options) const;
  /// The workspace views (data relative to the workspace base, i.e. the
  /// offsets) and the total size.
  Expected<size_t> layoutWorkspaces(const std::vector<ArgValue> &args,
                                    std::vector<TensorView> &views) const;
  /// The target's `max-bytes` limits on the memref args and the workspaces
  /// (laid out by layoutWorkspaces).
  Status checkMaxBytes(const std::vector<ArgValue> &args,
                       const std::vector<TensorView> &workspaces) const;
  /// The grid of every launch for these argument shapes, each within the
  /// limits of the target's kind of code (GridLimits.h).
  Expected<std::vector<Grid>>
  launchGrids(const std::vector<ArgValue> &args) const;
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

Status Kernel::Impl::checkAlignment(const std::vector<ArgValue> &args) const {
  bool gpu = !backend->usesHostMemory();
  for (const ManifestArg &expected : manifest.args) {
    if (expected.kind != ArgKind::Memref)
      continue;
    const TensorView &t = args[expected.index].tensor();
    uintptr_t address = reinterpret_cast<uintptr_t>(t.data);
    size_t element = dtypeSize(t.dtype);
    bool vectors = gpu && isFloatingPoint(t.dtype);
    size_t alignment = vectors ? kGpuTensorAlignment : element;
    if (address % alignment == 0)
      continue;
    return argError(
        expected.role + ": data is not " + std::to_string(alignment) +
        "-byte aligned (address % " + std::to_string(alignment) + " = " +
        std::to_string(address % alignment) +
        (vectors ? "; GPU kernels move floating-point tensors in 16-byte "
                   "vectors)"
                 : std::string("; ") + dtypeName(t.dtype) + " elements)"));
  }
  return Status::success();
}

Status Kernel::Impl::validate(const std::vector<ArgValue> &args,
                              const LaunchOptions *options) const {
  if (Status status = checkStructure(args); !status.ok())
    return status;
  if (Status status = checkAlignment(args); !status.ok())
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
  if (!rules)
    return Status::success();
  // What the content checks may read: the tensors themselves when they live
  // in host memory, otherwise the host copies the caller passed.
  std::vector<const void *> hostData(args.size(), nullptr);
  for (const ManifestArg &arg : manifest.args) {
    if (arg.kind != ArgKind::Memref)
      continue;
    if (backend->usesHostMemory()) {
      hostData[arg.index] = args[arg.index].tensor().data;
      continue;
    }
    if (!options)
      continue;
    if (auto copy = options->hostData.find(arg.role);
        copy != options->hostData.end())
      hostData[arg.index] = copy->second;
    else if (arg.role == roles::kBlockTable)
      hostData[arg.index] = options->hostBlockTable;
    else if (arg.role == roles::kSeqLens)
      hostData[arg.index] = options->hostSeqLens;
  }
  return rules->validateArgs(manifest, args, hostData);
}

Expected<size_t>
Kernel::Impl::layoutWorkspaces(const std::vector<ArgValue> &args,
                               std::vector<TensorView> &views) const {
  size_t total = 0;
  for (const WorkspaceSpec &spec : target().workspaces) {
    TensorView view{nullptr, spec.dtype, {}};
    int64_t bytes = static_cast<int64_t>(dtypeSize(spec.dtype));
    for (const DimExpr &dim : spec.dims) {
      view.shape.push_back(evalDim(dim, args));
      if (__builtin_mul_overflow(bytes, view.shape.back(), &bytes))
        return argError("workspace " + std::to_string(spec.index) + ": shape " +
                        shapeToString(view.shape) + " is too large");
    }
    // Offsets from the base; launch() adds the base address.
    view.data = reinterpret_cast<void *>(total);
    size_t padded = (static_cast<size_t>(bytes) + kWorkspaceAlignment - 1) /
                    kWorkspaceAlignment * kWorkspaceAlignment;
    if (__builtin_add_overflow(total, padded, &total))
      return argError("the workspaces are too large");
    views.push_back(std::move(view));
  }
  return total;
}

Status
Kernel::Impl::checkMaxBytes(const std::vector<ArgValue> &args,
                            const std::vector<TensorView> &workspaces) const {
  const TargetSpec &spec = target();
  for (const MaxBytesSpec &limit : spec.maxBytes) {
    size_t index = static_cast<size_t>(limit.index);
    bool isArg = index < args.size();
    const TensorView &t =
        isArg ? args[index].tensor() : workspaces[index - args.size()];
    // checkStructure and layoutWorkspaces bound the size by INT64_MAX.
    int64_t bytes = static_cast<int64_t>(t.sizeInBytes());
    if (bytes <= limit.bytes)
      continue;
    std::string what = isArg ? manifest.args[index].role
                             : "workspace " + std::to_string(index);
    return argError(what + ": " + std::to_string(bytes) + " bytes exceed the " +
                    std::to_string(limit.bytes) + "-byte limit of the " +
                    spec.name + " code object (32-bit buffer offsets)");
  }
  return Status::success();
}

Expected<std::vector<Grid>>
Kernel::Impl::launchGrids(const std::vector<ArgValue> &args) const {
  const TargetSpec &spec = target();
  const GridLimits *limits = gridLimitsOf(spec.name);
  std::vector<Grid> grids;
  for (const LaunchSpec &launch : spec.launches) {
    Grid grid;
    for (int d = 0; d < 3; ++d) {
      grid[d] = evalDim(launch.grid[d], args);
      int64_t max = limits ? limits->maxAlong(d, launch.block[d]) : INT64_MAX;
      if (grid[d] <= max)
        continue;
      bool perItem = limits->maxWorkItems > 0 && launch.block[d] > 1;
      return argError(
          "launch '" + launch.entry + "': grid " + "xyz"[d] + " is " +
          std::to_string(grid[d]) + " (" +
          sizeSource(manifest, launch.grid[d]) + "), more than the " +
          std::to_string(max) + " workgroups" +
          (perItem ? " of " + std::to_string(launch.block[d]) + " work-items"
                   : std::string()) +
          " target '" + spec.name + "' can launch (" + limits->what +
          "); nothing was launched");
    }
    grids.push_back(grid);
  }
  return grids;
}

const Manifest &Kernel::getManifest() const { return impl->manifest; }

const TargetSpec &Kernel::getTarget() const { return impl->target(); }

Status Kernel::validate(const std::vector<ArgValue> &args) const {
  return validate(args, LaunchOptions());
}

Status Kernel::validate(const std::vector<ArgValue> &args,
                        const LaunchOptions &options) const {
  if (Status status = impl->validate(args, &options); !status.ok())
    return status;
  std::vector<TensorView> layout;
  Expected<size_t> totalBytes = impl->layoutWorkspaces(args, layout);
  if (!totalBytes.ok())
    return totalBytes.status();
  if (Status status = impl->checkMaxBytes(args, layout); !status.ok())
    return status;
  return impl->launchGrids(args).status();
}

Expected<size_t>
Kernel::workspaceBytes(const std::vector<ArgValue> &args) const {
  if (Status status = impl->checkStructure(args); !status.ok())
    return status;
  std::vector<TensorView> views;
  return impl->layoutWorkspaces(args, views);
}

size_t Kernel::planLaunches() const { return impl->planLaunches; }

Expected<size_t> Kernel::workspaceBytes(const DecodeArgs &args) const {
  Expected<std::vector<ArgValue>> bound = bindDecode(args);
  if (!bound.ok())
    return bound.status();
  return workspaceBytes(*bound);
}

Status Kernel::reserveWorkspace(size_t bytes) const {
  Impl &k = *impl;
  if (bytes == 0)
    return Status::success();
  if (!k.backend->isAsynchronous())
    return k.workspaces.reserve(*k.backend, bytes)
        .withContext("reserving the workspace");
  std::lock_guard<std::mutex> lock(k.reservedMutex);
  if (k.reserved && k.reserved->size() >= bytes)
    return Status::success();
  Expected<std::unique_ptr<DeviceBuffer>> buffer = k.backend->allocate(bytes);
  if (!buffer.ok())
    return buffer.status().withContext("reserving the workspace");
  k.reserved = buffer.take();
  return Status::success();
}

Status Kernel::launch(const std::vector<ArgValue> &args,
                      const LaunchOptions &options) const {
  Impl &k = *impl;
  Status status =
      options.validate ? k.validate(args, &options) : k.checkStructure(args);
  if (status.ok() && !options.validate)
    status = k.checkAlignment(args);
  if (!status.ok())
    return status;

  std::vector<TensorView> layout;
  Expected<size_t> totalBytes = k.layoutWorkspaces(args, layout);
  if (!totalBytes.ok())
    return totalBytes.status();
  // Even without validation: past the limit the code would address the
  // wrong memory, and a grid beyond the device's limits would fail (or run
  // wrong) after the launches before it.
  if (Status status = k.checkMaxBytes(args, layout); !status.ok())
    return status;
  Expected<std::vector<Grid>> grids = k.launchGrids(args);
  if (!grids.ok())
    return grids.status();

  // Where the workspaces live: the caller's buffer, the reserved buffer
  // (asynchronous backends never allocate here) or a pooled one.
  uint8_t *base = nullptr;
  std::shared_ptr<DeviceBuffer> reserved;
  std::unique_ptr<DeviceBuffer> pooled;
  if (*totalBytes && options.workspace) {
    if (reinterpret_cast<uintptr_t>(options.workspace) % kWorkspaceAlignment)
      return argError("LaunchOptions::workspace must be " +
                      std::to_string(kWorkspaceAlignment) + "-byte aligned");
    if (options.workspaceBytes < *totalBytes)
      return argError("workspace too small: this launch needs " +
                      std::to_string(*totalBytes) +
                      " bytes, LaunchOptions::workspace has " +
                      std::to_string(options.workspaceBytes));
    base = static_cast<uint8_t *>(options.workspace);
  } else if (*totalBytes && k.backend->isAsynchronous()) {
    {
      std::lock_guard<std::mutex> lock(k.reservedMutex);
      reserved = k.reserved;
    }
    size_t have = reserved ? reserved->size() : 0;
    if (have < *totalBytes)
      return argError("workspace too small: this launch needs " +
                      std::to_string(*totalBytes) + " bytes, the kernel has " +
                      std::to_string(have) +
                      " reserved (call Kernel::reserveWorkspace or pass "
                      "LaunchOptions::workspace)");
    base = static_cast<uint8_t *>(reserved->data());
  } else if (*totalBytes) {
    Expected<std::unique_ptr<DeviceBuffer>> acquired =
        k.workspaces.acquire(*k.backend, *totalBytes);
    if (!acquired.ok())
      return acquired.status().withContext("allocating workspaces");
    pooled = acquired.take();
  }
  const bool fromPool = pooled != nullptr;
  WorkspaceLease lease(k.workspaces, std::move(pooled));
  if (!base)
    base = lease.data();
  std::vector<ArgValue> workspaces;
  workspaces.reserve(layout.size());
  for (TensorView &view : layout) {
    view.data = base + reinterpret_cast<uintptr_t>(view.data);
    workspaces.emplace_back(std::move(view));
  }

  const TargetSpec &target = k.target();
  // A pooled buffer holds no earlier plan: the plan is computed there.
  const size_t first = options.reusePlan && !fromPool ? k.planLaunches : 0;
  std::vector<const ArgValue *> launchArgs;
  for (size_t l = first; l < target.launches.size(); ++l) {
    const LaunchSpec &spec = target.launches[l];
    launchArgs.clear();
    for (int index : spec.args)
      launchArgs.push_back(index < static_cast<int>(args.size())
                               ? &args[index]
                               : &workspaces[index - args.size()]);
    LaunchConfig config;
    config.grid = (*grids)[l];
    config.block = spec.block;
    config.sharedBytes = spec.sharedBytes;
    config.dependent = spec.dependent;
    config.stream = options.stream;
    if (Status status = k.backend->launch(*k.module, k.launchEntries[l], config,
                                          launchArgs);
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

Expected<std::vector<ArgValue>>
Kernel::bindDecode(const DecodeArgs &args) const {
  const Manifest &manifest = impl->manifest;
  if (manifest.kernel != kernels::kDecode)
    return Status::error(ErrorCode::Unsupported,
                         "launchDecode needs a 'decode' kernel, this one is '" +
                             manifest.kernel + "'");
  if (std::isnan(args.scale))
    return argError("scale: not set (DecodeArgs::scale starts as NaN, not a "
                    "default value: set the softmax scale the model uses)");
  // The decode rules guarantee a floating-point scale.
  Scalar scale =
      Scalar::ofFloat(manifest.findArg(roles::kScale)->dtype, args.scale);
  return bindByRole({{roles::kQ, args.q},
                     {roles::kKv, args.kv},
                     {roles::kBlockTable, args.blockTable},
                     {roles::kSeqLens, args.seqLens},
                     {roles::kScale, scale},
                     {roles::kO, args.o},
                     {roles::kLse, args.lse}});
}

Status Kernel::launchDecode(const DecodeArgs &args,
                            const LaunchOptions &options) const {
  Expected<std::vector<ArgValue>> bound = bindDecode(args);
  if (!bound.ok())
    return bound.status();
  return launch(*bound, options);
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

  if (Status status = backend->checkCodeObject(*code, manifest, *target);
      !status.ok())
    return status.withContext("target '" + target->name + "'");

  auto impl = std::make_shared<Kernel::Impl>();
  impl->backend = backend;
  impl->manifest = manifest;
  impl->targetIndex = target - manifest.targets.data();
  impl->rules = findKernelKindRules(manifest.kernel);
  if (impl->rules && impl->rules->planLaunches)
    impl->planLaunches = impl->rules->planLaunches(manifest, *target);
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
  for (size_t l = 0; l < target->launches.size(); ++l) {
    const LaunchSpec &launch = target->launches[l];
    LaunchConfig config;
    config.block = launch.block;
    config.sharedBytes = launch.sharedBytes;
    if (Status status = backend->prepareLaunch(*impl->module,
                                               impl->launchEntries[l], config);
        !status.ok())
      return status.withContext("target '" + target->name + "': launch '" +
                                launch.entry + "'");
  }
  return Kernel(std::move(impl));
}

Expected<Kernel> Device::loadKernel(const Package &package) const {
  std::vector<std::string> targets;
  for (const TargetSpec &target : package.manifest.targets)
    targets.push_back(target.name);
  Expected<std::string> target = backend->selectTarget(targets);
  if (!target.ok())
    return target.status();
  return loadKernel(package, *target);
}
