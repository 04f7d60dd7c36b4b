//===- CudaTestUtils.h - Helpers of the CUDA backend tests ------*- C++ -*-===//
//
// The CUDA tests are compiled twice: into mla-runtime-cuda-tests against the
// real driver (libcuda.so.1; ctest label `cuda`; every test skips on a
// machine without a driver or device), and into mla-runtime-fakecuda-tests
// against the fake driver of FakeCudaDriver.cpp (label `fakedriver`; runs
// everywhere). MLA_TEST_CUDA_DRIVER names the driver.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_TEST_CUDA_CUDATESTUTILS_H
#define MLA_RUNTIME_TEST_CUDA_CUDATESTUTILS_H

#include "../TestUtils.h"

#include "mla/runtime/CudaBackend.h"

#include <memory>
#include <string>
#include <vector>

namespace mla::rt::test {

/// The driver library the CUDA tests load.
const char *testCudaDriverPath();
bool usingFakeCudaDriver();

/// Opens CUDA device `ordinal` through the test driver.
Expected<Device> openTestCudaDevice(int ordinal = 0);

/// Declares `Device NAME` for the test CUDA device, or skips the test with
/// the one-line reason it cannot be opened.
#define MLA_CUDA_DEVICE_OR_SKIP(NAME)                                          \
  ::mla::rt::Expected<::mla::rt::Device> NAME##Opened =                        \
      ::mla::rt::test::openTestCudaDevice();                                   \
  if (!NAME##Opened.ok())                                                      \
    GTEST_SKIP() << NAME##Opened.status().message();                           \
  ::mla::rt::Device NAME = NAME##Opened.take()

/// PTX (.target sm_80) of
///   mla_test_scale(memref<?x?xf32> src, memref<?x?xf32> dst, f32 factor):
/// block x scales row x of src into dst; its threads stride over columns.
extern const char *const kScalePtx;

/// `hostManifest` (a host package of the test utilities) on target sm_80:
/// the same plan (the kinds require it), each launch with block 32,1,1.
std::string sm80Manifest(const std::string &hostManifest);

/// PTX (.target sm_80) with one do-nothing entry per launch entry of
/// `target`, each taking that launch's parameters (KernelParams.h).
std::string noopTargetPtx(const Manifest &manifest, const TargetSpec &target);

/// A package of `manifest` whose targets' sections all hold `ptx` (with a
/// trailing NUL when `trailingNul`).
Package ptxPackage(const std::string &manifest, const std::string &ptx,
                   bool trailingNul = false);

} // namespace mla::rt::test

#endif // MLA_RUNTIME_TEST_CUDA_CUDATESTUTILS_H
