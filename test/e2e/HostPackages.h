//===- HostPackages.h - host packages for e2e tests ------------*- C++ -*-===//
//
// The end-to-end tests compile packages with the real mla-compile
// (MLA_COMPILE_PATH) into a per-process temporary folder and load them on
// the host device.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_TEST_E2E_HOSTPACKAGES_H
#define MLA_TEST_E2E_HOSTPACKAGES_H

#include "mla/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <unistd.h>

// The target the packages are compiled for and the device they run on:
// the host by default; the emulator executables build the same tests with
// an AMD emulation target (test/e2e/CMakeLists.txt).
#ifndef MLA_E2E_TARGET
#define MLA_E2E_TARGET "host"
#endif
#ifndef MLA_E2E_DEVICE
#define MLA_E2E_DEVICE "host"
#endif

namespace mla::rt::test {

/// A temporary folder of this test process.
inline std::string e2eTempDir() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/mla-e2e-XXXXXX";
    const char *d = mkdtemp(tmpl);
    return std::string(d ? d : "/tmp");
  }();
  return dir;
}

/// Runs `mla-compile --target=MLA_E2E_TARGET ARGS -o DIR/NAME.mlapkg`; returns the
/// package path. ARGS is an input file or --kernel flags.
inline std::string compileHostPackage(const std::string &name,
                                      const std::string &args) {
  std::string out = e2eTempDir() + "/" + name + ".mlapkg";
  std::string cmd = std::string(MLA_COMPILE_PATH) +
                    " --target=" MLA_E2E_TARGET " " + args + " -o " + out;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return out;
}

/// The package at `path` loaded on MLA_E2E_DEVICE.
inline Kernel loadHostKernel(const std::string &path) {
  Expected<Package> pkg = readPackage(path);
  EXPECT_TRUE(pkg.ok()) << pkg.status().toString();
  Expected<Device> dev = Device::open(MLA_E2E_DEVICE);
  EXPECT_TRUE(dev.ok()) << dev.status().toString();
  Expected<Kernel> kernel = dev->loadKernel(*pkg);
  EXPECT_TRUE(kernel.ok()) << kernel.status().toString();
  return *kernel;
}

} // namespace mla::rt::test

#endif // MLA_TEST_E2E_HOSTPACKAGES_H
