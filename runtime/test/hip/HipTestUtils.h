//===- HipTestUtils.h - Helpers of the HIP backend tests --------*- C++ -*-===//
//
// The HIP tests are compiled twice: into mla-runtime-hip-tests against the
// real HIP runtime (libamdhip64; ctest label `rocm`; every test skips on a
// machine without ROCm or an AMD GPU, i.e. everywhere this project has run
// so far), and into mla-runtime-fakehip-tests against the fake runtime of
// FakeHipRuntime.cpp (label `fakedriver`; runs everywhere, never executes
// AMD code). MLA_TEST_HIP_LIBRARY names the library ("" = the backend's
// default search).
//
// Kernels come from the checked-in gfx942 decode code object of test/data
// (mla-compile output: the project's own kernels; no AMD assembly is written
// by hand).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_TEST_HIP_HIPTESTUTILS_H
#define MLA_RUNTIME_TEST_HIP_HIPTESTUTILS_H

#include "../TestUtils.h"

#include "mla/runtime/HipBackend.h"

#include <string>
#include <vector>

namespace mla::rt::test {

/// The HIP runtime library the tests load ("" for the default search).
const char *testHipLibraryPath();
bool usingFakeHip();

/// Opens HIP device `ordinal` through the test library.
Expected<Device> openTestHipDevice(int ordinal = 0);

/// Declares `Device NAME` for the test HIP device, or skips the test with
/// the one-line reason it cannot be opened.
#define MLA_HIP_DEVICE_OR_SKIP(NAME)                                           \
  ::mla::rt::Expected<::mla::rt::Device> NAME##Opened =                        \
      ::mla::rt::test::openTestHipDevice();                                    \
  if (!NAME##Opened.ok())                                                      \
    GTEST_SKIP() << NAME##Opened.status().message();                           \
  ::mla::rt::Device NAME = NAME##Opened.take()

/// test/data/decode_h1_gfx942.hsaco and its manifest (target gfx942).
std::vector<uint8_t> fixtureCodeObject();
std::string fixtureManifest();

/// The decode shape of the fixture: bf16, 1 head, q_len 1, latent 16,
/// rope 16, page size 64.
DecodeShape fixtureShape();

/// A package of `manifest` whose targets' sections all hold `code`.
Package codePackage(const std::string &manifest,
                    const std::vector<uint8_t> &code);

/// The fixture's package, with `edit` applied to its manifest: the first
/// occurrence of `from` replaced by `to` (nothing when `from` is empty).
Package fixturePackage(const std::string &from = "",
                       const std::string &to = "");

} // namespace mla::rt::test

#endif // MLA_RUNTIME_TEST_HIP_HIPTESTUTILS_H
