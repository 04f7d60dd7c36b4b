//===- KindValidationUtils.h - helpers of the kind tests -----*- C++ -*-===//
#ifndef MLA_RUNTIME_TEST_KINDVALIDATIONUTILS_H
#define MLA_RUNTIME_TEST_KINDVALIDATIONUTILS_H

#include "KindTestUtils.h"
#include "TestUtils.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

namespace mla::rt::test {

inline constexpr float kSentinel = 42.0f;

/// Fills an f32 output with the sentinel, so that tests can see whether a
/// kernel wrote it.
inline void fillSentinel(HostTensor &t) {
  std::fill_n(t.dataAs<float>(), t.numElements(), kSentinel);
}

inline void expectUntouched(const HostTensor &t) {
  for (int64_t i = 0; i < t.numElements(); ++i)
    ASSERT_EQ(t.dataAs<float>()[i], kSentinel) << "a kernel ran";
}

/// The tensor arguments of `args`, by role.
inline std::map<std::string, TensorView>
tensorsOf(const std::map<std::string, ArgValue> &args) {
  std::map<std::string, TensorView> views;
  for (const auto &[role, arg] : args)
    if (arg.isTensor())
      views.emplace(role, arg.tensor());
  return views;
}

/// `args` with its tensors replaced by `views`.
inline std::map<std::string, ArgValue>
withTensors(std::map<std::string, ArgValue> args,
            const std::map<std::string, TensorView> &views) {
  for (const auto &[role, view] : views)
    args.at(role) = view;
  return args;
}

inline Status launchError(const Kernel &kernel,
                          const std::map<std::string, ArgValue> &args,
                          const LaunchOptions &options = {}) {
  Status status = kernel.launchByRole(args, options);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument) << status.toString();
  return status;
}

/// The host backend under a GPU's rules: device memory the host cannot
/// read (as far as validation knows), launches still run on the host.
class HostAsGpuBackend : public Backend {
public:
  HostAsGpuBackend() : inner(createHostBackend({2})) {}
  std::string_view getName() const override { return "gpu-like"; }
  bool supportsTarget(std::string_view t) const override {
    return inner->supportsTarget(t);
  }
  bool usesHostMemory() const override { return false; }
  bool isAsynchronous() const override { return false; }
  Expected<std::unique_ptr<Module>>
  loadModule(const std::vector<uint8_t> &code,
             const std::vector<std::string> &entries) override {
    return inner->loadModule(code, entries);
  }
  Expected<std::unique_ptr<DeviceBuffer>> allocate(size_t bytes) override {
    return inner->allocate(bytes);
  }
  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    return inner->copyToHost(dst, src, bytes);
  }
  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    return inner->copyToDevice(dst, src, bytes);
  }
  Status fillBytes(void *dst, uint8_t value, size_t bytes) override {
    return inner->fillBytes(dst, value, bytes);
  }
  Status launch(const Module &module, size_t entry, const LaunchConfig &config,
                const std::vector<const ArgValue *> &args) override {
    return inner->launch(module, entry, config, args);
  }
  Status synchronize(void *stream) override {
    return inner->synchronize(stream);
  }

private:
  std::shared_ptr<Backend> inner;
};

inline Kernel loadOnGpuLike(const std::string &manifest) {
  Device device(std::make_shared<HostAsGpuBackend>());
  Expected<Kernel> kernel = device.loadKernel(kindPackage(manifest));
  EXPECT_TRUE(kernel.ok()) << kernel.status().toString();
  return kernel.take();
}

} // namespace mla::rt::test

#endif // MLA_RUNTIME_TEST_KINDVALIDATIONUTILS_H
