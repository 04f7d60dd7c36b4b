// package_info.cpp - the C++ API of an installed mla runtime (the static
// archive, target mla::runtime_static).
//
//   package_info PACKAGE.mlapkg
//
// Reads a package, prints its kind, targets and arguments, loads its kernel
// on the host and prints the outputs' shapes for a batch of 2 (decode) or
// 5 query rows (prefill, merge). Exits 0 when the kernel loads.

#include "mla/runtime/Runtime.h"

#include <cstdio>
#include <map>
#include <string>
#include <vector>

using namespace mla::rt;

namespace {

std::string dims(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? ", " : "") +
            (shape[d] == kDynamicDim ? "?" : std::to_string(shape[d]));
  return text + "]";
}

int fail(const Status &status) {
  std::fprintf(stderr, "package_info: %s\n", status.toString().c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PACKAGE.mlapkg\n", argv[0]);
    return 2;
  }
  Expected<Package> package = readPackage(argv[1]);
  if (!package.ok())
    return fail(package.status());
  const Manifest &manifest = package->manifest;
  std::printf("package_info: kind %s, targets:", manifest.kernel.c_str());
  for (const TargetSpec &target : manifest.targets)
    std::printf(" %s", target.name.c_str());
  std::printf("\n");

  // Example input shapes: every dynamic dim 2 (decode's batch) or 5.
  std::map<std::string, std::vector<int64_t>> inputs;
  for (const ManifestArg &arg : manifest.args) {
    std::printf("package_info:   arg %d %s %s %s\n", arg.index,
                arg.role.c_str(), dtypeName(arg.dtype),
                arg.kind == ArgKind::Scalar ? "scalar"
                                            : dims(arg.dims).c_str());
    std::vector<int64_t> shape = arg.dims;
    for (int64_t &d : shape)
      if (d == kDynamicDim)
        d = manifest.kernel == kernels::kDecode ? 2 : 5;
    inputs[arg.role] = shape;
  }

  Expected<Device> device = Device::open("host");
  if (!device.ok())
    return fail(device.status());
  Expected<Kernel> kernel = device->loadKernel(*package);
  if (!kernel.ok())
    return fail(kernel.status());
  std::optional<KernelKind> kind = findKind(manifest.kernel);
  for (const KindRole &role : kindRoles(*kind)) {
    if (role.use != RoleUse::Output)
      continue;
    Expected<std::vector<int64_t>> shape =
        outputShape(manifest, role.name, inputs);
    if (!shape.ok())
      return fail(shape.status());
    std::printf("package_info: output %s %s\n", role.name,
                dims(*shape).c_str());
  }
  std::printf("package_info: loaded for %s: ok\n",
              kernel->getTarget().name.c_str());
  return 0;
}
