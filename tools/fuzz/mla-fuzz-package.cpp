//===- mla-fuzz-package.cpp - libFuzzer target: package bytes -> load -----===//
//
// One input is the bytes of an .mlapkg. The runtime parses it
// (parsePackage: container, checksum, manifest, the kernel kind's manifest
// rules); the manifest it accepts must print and parse again to the same
// text. Every code section goes through the AMDGPU metadata reader. Then
// every target is loaded on a device whose backend loads nothing
// (Device::loadKernel with the backend's code-object check, which for gfx*
// targets is the HIP backend's: metadata against the manifest) and
// validated: arguments shaped as the manifest declares (dynamic dims 2,
// zero contents) through Kernel::validate, workspaceBytes and the output
// shapes. Launching is out of scope: no code object is ever loaded or run
// (the host and emulator backends dlopen theirs).
//
// Errors are the expected answer to a bad package; the bugs are what the
// sanitizers and assertions catch, and a manifest whose printed form the
// parser rejects or reads differently (abort).
//
//===----------------------------------------------------------------------===//

#include "mla/runtime/AmdgpuMetadata.h"
#include "mla/runtime/Backend.h"
#include "mla/runtime/Device.h"
#include "mla/runtime/Kernel.h"
#include "mla/runtime/Manifest.h"
#include "mla/runtime/OutputShapes.h"
#include "mla/runtime/Package.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace mla::rt;

namespace {

/// Larger inputs are refused (the seed packages are tens of KB: AMD code
/// objects).
constexpr size_t kMaxInputBytes = 512 * 1024;
/// Arguments of more bytes than this in all are not allocated (the
/// validation of that target is skipped).
constexpr uint64_t kMaxArgBytes = 1 << 20;

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "mla-fuzz-package: %s\n", what.c_str());
  std::abort();
}

struct NullModule : Module {
  explicit NullModule(const Backend &backend) : Module(backend) {}
};

/// Takes every target, checks AMD code objects as the HIP backend does,
/// loads nothing and runs nothing.
class NullBackend : public Backend {
public:
  std::string_view getName() const override { return "fuzz"; }
  bool supportsTarget(std::string_view) const override { return true; }
  bool usesHostMemory() const override { return true; }
  bool isAsynchronous() const override { return false; }

  Status checkCodeObject(const std::vector<uint8_t> &code,
                         const Manifest &manifest,
                         const TargetSpec &target) const override {
    if (target.name.rfind("gfx", 0) != 0)
      return Status::success();
    Expected<AmdgpuMetadata> metadata =
        parseAmdgpuMetadata(code.data(), code.size());
    if (!metadata.ok())
      return metadata.status();
    (void)amdgpuTargetRuns(metadata->target, target.name);
    AmdgpuDeviceLimits limits;
    limits.ldsBytes = 64 * 1024;
    return checkAmdgpuCodeObject(*metadata, manifest, target, limits);
  }
  Expected<std::unique_ptr<Module>>
  loadModule(const std::vector<uint8_t> &,
             const std::vector<std::string> &) override {
    return std::unique_ptr<Module>(std::make_unique<NullModule>(*this));
  }
  Expected<std::unique_ptr<DeviceBuffer>> allocate(size_t) override {
    return unsupported();
  }
  Status copyToHost(void *, const void *, size_t) override {
    return unsupported();
  }
  Status copyToDevice(void *, const void *, size_t) override {
    return unsupported();
  }
  Status fillBytes(void *, uint8_t, size_t) override { return unsupported(); }
  Status launch(const Module &, size_t, const LaunchConfig &,
                const std::vector<const ArgValue *> &) override {
    fail("a launch reached the backend");
  }
  Status synchronize(void *) override { return Status::success(); }

private:
  static Status unsupported() {
    return Status::error(ErrorCode::Unsupported, "fuzz backend");
  }
};

Scalar scalarOf(DType dtype) {
  switch (dtype) {
  case DType::I32:
    return Scalar::i32(1);
  case DType::I64:
    return Scalar::i64(1);
  default:
    return Scalar::ofFloat(dtype, 0.5f);
  }
}

/// Arguments as the manifest declares them, or false when they would be too
/// large. `storage` owns the (zeroed) tensor contents.
bool buildArgs(const Manifest &m, std::vector<ArgValue> &args,
               std::vector<std::vector<uint8_t>> &storage,
               std::map<std::string, std::vector<int64_t>> &shapes) {
  uint64_t total = 0;
  for (const ManifestArg &arg : m.args) {
    if (arg.kind == ArgKind::Scalar) {
      args.emplace_back(scalarOf(arg.dtype));
      continue;
    }
    std::vector<int64_t> shape;
    uint64_t elements = 1;
    for (int64_t d : arg.dims) {
      int64_t dim = d == kDynamicDim ? 2 : d;
      if (dim < 0 || (dim && elements > kMaxArgBytes / dim))
        return false;
      elements *= dim;
      shape.push_back(dim);
    }
    uint64_t bytes = elements * dtypeSize(arg.dtype);
    total += bytes;
    if (total > kMaxArgBytes)
      return false;
    storage.emplace_back(bytes + 1, 0); // + 1: never a null data pointer.
    args.emplace_back(TensorView{storage.back().data(), arg.dtype, shape});
    shapes[arg.role] = shape;
  }
  return true;
}

void validateTarget(const Device &device, const Package &package,
                    const TargetSpec &target) {
  Expected<Kernel> kernel = device.loadKernel(package, target.name);
  if (!kernel.ok())
    return;
  const Manifest &m = kernel->getManifest();
  std::vector<ArgValue> args;
  std::vector<std::vector<uint8_t>> storage;
  std::map<std::string, std::vector<int64_t>> shapes;
  storage.reserve(m.args.size());
  if (!buildArgs(m, args, storage, shapes))
    return;
  (void)kernel->validate(args);
  (void)kernel->workspaceBytes(args);
  for (const ManifestArg &arg : m.args)
    (void)outputShape(m, arg.role, shapes);
}

/// What a package the runtime accepted must also pass.
void checkPackage(const Package &package) {
  // The printed manifest is what the runtime writes (mla-compile does):
  // it must read back as itself.
  std::string printed = printManifest(package.manifest);
  Expected<Manifest> reparsed = parseManifest(printed);
  if (!reparsed.ok())
    fail("the printed manifest does not parse: " +
         reparsed.status().toString() + "\n" + printed);
  if (printManifest(*reparsed) != printed)
    fail("the printed manifest reads back differently:\n" + printed);

  for (const auto &section : package.codeSections) {
    Expected<AmdgpuMetadata> metadata =
        parseAmdgpuMetadata(section.second.data(), section.second.size());
    if (metadata.ok())
      (void)amdgpuProcessor(metadata->target);
  }

  Device device(std::make_shared<NullBackend>());
  (void)device.loadKernel(package);
  for (const TargetSpec &target : package.manifest.targets)
    validateTarget(device, package, target);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInputBytes)
    return -1;
  Expected<Package> package = parsePackage(data, size);
  if (package.ok()) {
    checkPackage(*package);
    return 0;
  }
  // Nearly every mutation breaks the checksum (the last 8 bytes): parse
  // the input again with it recomputed, so that the search gets past it.
  if (size < 8)
    return 0;
  std::vector<uint8_t> fixed(data, data + size);
  uint64_t hash = fnv1a64(fixed.data(), size - 8);
  for (int i = 0; i < 8; ++i)
    fixed[size - 8 + i] = static_cast<uint8_t>(hash >> (8 * i));
  if (std::memcmp(fixed.data(), data, size) == 0)
    return 0;
  package = parsePackage(fixed.data(), size);
  if (package.ok())
    checkPackage(*package);
  return 0;
}
