//===- HipUnitTest.cpp - HIP backend logic that needs no GPU --------------===//
//
// Device names, target selection and the errors of Device::open("hip") on a
// machine without ROCm. The backend on a (real or fake) device is tested in
// test/hip/.
//
//===----------------------------------------------------------------------===//

#include "mla/runtime/Device.h"
#include "mla/runtime/HipBackend.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace mla::rt;

TEST(HipDeviceNameTest, Parses) {
  EXPECT_EQ(parseHipDeviceName("hip"), 0);
  EXPECT_EQ(parseHipDeviceName("hip:0"), 0);
  EXPECT_EQ(parseHipDeviceName("hip:7"), 7);
  EXPECT_EQ(parseHipDeviceName("hip:12"), 12);
  EXPECT_EQ(parseHipDeviceName("hip:"), std::nullopt);
  EXPECT_EQ(parseHipDeviceName("hip:-1"), std::nullopt);
  EXPECT_EQ(parseHipDeviceName("hip:1x"), std::nullopt);
  EXPECT_EQ(parseHipDeviceName("hip:99999999"), std::nullopt);
  EXPECT_EQ(parseHipDeviceName("hip0"), std::nullopt);
  EXPECT_EQ(parseHipDeviceName("HIP"), std::nullopt);
  EXPECT_EQ(parseHipDeviceName("rocm"), std::nullopt);
  EXPECT_EQ(parseHipDeviceName("cuda"), std::nullopt);
}

TEST(HipTargetTest, SelectsTheDevicesProcessor) {
  std::vector<std::string> all = {"host-x86_64", "sm_90a", "gfx90a", "gfx942",
                                  "gfx950"};
  EXPECT_EQ(*selectHipTarget("gfx942:sramecc+:xnack-", all), "gfx942");
  EXPECT_EQ(*selectHipTarget("gfx90a:sramecc-:xnack-", all), "gfx90a");
  EXPECT_EQ(*selectHipTarget("gfx950", all), "gfx950");
  Expected<std::string> none = selectHipTarget("gfx1100", {"gfx942", "sm_80"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::Unsupported);
  EXPECT_EQ(none.status().message(),
            "the package has no target for gfx1100 (its targets: gfx942, "
            "sm_80)");
  EXPECT_EQ(
      selectHipTarget("gfx942:xnack+", {"host-x86_64"}).status().message(),
      "the package has no target for gfx942 (its targets: "
      "host-x86_64)");
}

TEST(HipOpenTest, OneLineErrorOrADevice) {
  // Here: no ROCm (or no AMD GPU), one line. On an AMD GPU machine: device 0.
  if (std::getenv("MLA_HIP_LIBRARY"))
    GTEST_SKIP() << "MLA_HIP_LIBRARY is set";
  Expected<Device> device = Device::open("hip");
  if (device.ok()) {
    EXPECT_EQ(device->getName(), "hip:0");
    return;
  }
  const std::string &message = device.status().message();
  EXPECT_EQ(message.rfind("hip: ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(device.status().code(), ErrorCode::Unsupported) << message;
  // The outcome is stable, and "hip:N" answers alike.
  EXPECT_EQ(Device::open("hip").status().message(), message);
  EXPECT_EQ(Device::open("hip:1").status().message().rfind("hip: ", 0), 0u);
}

TEST(HipOpenTest, MissingLibraryMessages) {
  HipBackendOptions options;
  options.libraryPath = "libamdhip64-that-does-not-exist.so";
  Expected<std::shared_ptr<Backend>> backend = createHipBackend(options);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), ErrorCode::Unsupported);
  EXPECT_EQ(backend.status().message(),
            "hip: libamdhip64-that-does-not-exist.so not found (no ROCm on "
            "this machine)");
  // The default search (libamdhip64.so, .so.7, .so.6, .so.5), where none of
  // them exists.
  Expected<std::shared_ptr<Backend>> found = createHipBackend({});
  if (found.ok() ||
      found.status().message().find("not found") == std::string::npos)
    GTEST_SKIP() << "a HIP runtime is installed here";
  EXPECT_EQ(found.status().message(),
            "hip: libamdhip64.so not found (no ROCm on this machine)");
}

TEST(HipOpenTest, AutoPrefersCudaThenHipThenHost) {
  Expected<Device> device = Device::open("auto", {1});
  ASSERT_TRUE(device.ok()) << device.status().toString();
  if (Device::open("cuda").ok())
    EXPECT_EQ(device->getName(), "cuda:0");
  else if (Device::open("hip").ok())
    EXPECT_EQ(device->getName(), "hip:0");
  else
    EXPECT_EQ(device->getName(), "host");
}
