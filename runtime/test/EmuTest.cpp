//===- EmuTest.cpp - The AMD emulator's execution model and checker -------===//
//
// Lanes written in C++ call the emulator's hooks through a filled hook
// table, exactly as an emulated code object does: barriers and waves, the
// LDS race checker (a missing barrier, wave-synchronous LDS), LDS bounds,
// the buffer range check, MFMA layouts against a plain matrix product,
// shuffles and divergence. The compiled kernels are tested end to end in
// test/e2e (mla-emu-*-tests).
//
//===----------------------------------------------------------------------===//

#include "emu/Emulator.h"

#include "mla/runtime/DType.h"
#include "mla/runtime/EmuAbi.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace mla::rt;
using namespace mla::rt::emu;
using mla::emu::Hook;

namespace {

void *gTable[static_cast<int>(Hook::Count)];

template <typename F> F hook(Hook h) {
  return reinterpret_cast<F>(gTable[static_cast<int>(h)]);
}
int64_t tid() { return hook<int64_t (*)(int32_t)>(Hook::Dim)(0); }
void barrier() { hook<void (*)(int32_t)>(Hook::Barrier)(1); }
char *lds() { return static_cast<char *>(hook<void *(*)()>(Hook::LdsBase)()); }
void ldsStore(int64_t off, float v) {
  hook<void (*)(void *, int64_t, const void *, int32_t)>(Hook::LdsStore)(
      lds() + off, 4, &v, 2);
}
float ldsLoad(int64_t off) {
  float v;
  hook<void (*)(void *, int64_t, void *, int32_t)>(Hook::LdsLoad)(lds() + off,
                                                                  4, &v, 3);
  return v;
}

const char *const kSites[] = {"t.mlir:1:1: test",        "t.mlir:2:1: barrier",
                              "t.mlir:3:1: LDS store",   "t.mlir:4:1: LDS load",
                              "t.mlir:5:1: buffer load", "t.mlir:6:1: mfma"};

class Emu : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(fillHookTable(gTable, static_cast<int64_t>(Hook::Count)).ok());
  }
  Status run(LaneEntry entry, int64_t threads, int64_t ldsBytes,
             EmuOrder order = EmuOrder::Forward, void **args = nullptr) {
    EmuKernel k{entry, kSites, 6};
    EmuLaunch l;
    l.block = {threads, 1, 1};
    l.ldsBytes = ldsBytes;
    l.args = args;
    EmuOptions o;
    o.order = order;
    o.seed = 3;
    return runWorkgroup(k, l, {0, 0, 0}, o);
  }
};

float gOut[256];

// Two waves exchange halves through LDS.
void exchange(void **) {
  int64_t t = tid();
  ldsStore(4 * t, float(t));
  barrier();
  gOut[t] = ldsLoad(4 * ((t + 64) % 128));
}
void exchangeNoBarrier(void **) {
  int64_t t = tid();
  ldsStore(4 * t, float(t));
  gOut[t] = ldsLoad(4 * ((t + 64) % 128));
}

TEST_F(Emu, BarrierOrdersWavesInEveryOrder) {
  for (EmuOrder order :
       {EmuOrder::Forward, EmuOrder::Reverse, EmuOrder::Random}) {
    std::fill(std::begin(gOut), std::end(gOut), -1.f);
    Status s = run(&exchange, 128, 512, order);
    ASSERT_TRUE(s.ok()) << s.toString();
    for (int t = 0; t < 128; ++t)
      EXPECT_EQ(gOut[t], float((t + 64) % 128));
  }
}

TEST_F(Emu, MissingBarrierIsARace) {
  for (EmuOrder order : {EmuOrder::Forward, EmuOrder::Reverse}) {
    Status s = run(&exchangeNoBarrier, 128, 512, order);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("LDS race at t.mlir:"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("with no barrier between"), std::string::npos)
        << s.message();
  }
}

// Lane t reads what lane t^1 of the same wave wrote, with no barrier.
void waveSynchronous(void **) {
  int64_t t = tid();
  ldsStore(4 * t, float(t));
  gOut[t] = ldsLoad(4 * (t ^ 1));
}

TEST_F(Emu, WaveSynchronousLdsIsReported) {
  Status s = run(&waveSynchronous, 64, 256);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("relies on wave-synchronous LDS"),
            std::string::npos)
      << s.message();
}

void outOfLds(void **) { ldsStore(4 * tid() + 4, 1.f); }

TEST_F(Emu, LdsAccessOutsideThePlanIsAnError) {
  Status s = run(&outOfLds, 64, 256);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("outside the workgroup's 256 bytes of LDS"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("t.mlir:3:1"), std::string::npos);
}

// A buffer of 10 floats, read by 64 lanes 4 bytes each and by one
// 16-byte access at the end: the range check per 4-byte component.
float gSrc[64];
float gBufOut[64 + 4];
void bufferReads(void **) {
  auto make = hook<void *(*)(void *, int32_t)>(Hook::MakeBuffer);
  auto load =
      hook<void (*)(void *, int64_t, void *, int32_t)>(Hook::BufferLoad);
  char *buf = static_cast<char *>(make(gSrc, 40));
  int64_t t = tid();
  load(buf + 4 * t, 4, &gBufOut[t], 4);
  if (t == 0)
    load(buf + 32, 16, &gBufOut[64], 4); // components 8, 9 in; 10, 11 out
}

TEST_F(Emu, BufferLoadsBeyondNumRecordsReturnZero) {
  for (int i = 0; i < 64; ++i)
    gSrc[i] = float(i + 1);
  Status s = run(&bufferReads, 64, 0);
  ASSERT_TRUE(s.ok()) << s.toString();
  for (int t = 0; t < 64; ++t)
    EXPECT_EQ(gBufOut[t], t < 10 ? float(t + 1) : 0.f) << t;
  EXPECT_EQ(gBufOut[64], 9.f);
  EXPECT_EQ(gBufOut[65], 10.f);
  EXPECT_EQ(gBufOut[66], 0.f);
  EXPECT_EQ(gBufOut[67], 0.f);
}

void bufferStores(void **) {
  auto make = hook<void *(*)(void *, int32_t)>(Hook::MakeBuffer);
  auto store =
      hook<void (*)(void *, int64_t, const void *, int32_t)>(Hook::BufferStore);
  char *buf = static_cast<char *>(make(gSrc, 40));
  float v = -1.f;
  store(buf + 4 * tid(), 4, &v, 4);
}

TEST_F(Emu, BufferStoresBeyondNumRecordsAreDropped) {
  for (int i = 0; i < 64; ++i)
    gSrc[i] = float(i + 1);
  ASSERT_TRUE(run(&bufferStores, 64, 0).ok());
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(gSrc[i], i < 10 ? -1.f : float(i + 1)) << i;
}

void negativeOffset(void **) {
  auto make = hook<void *(*)(void *, int32_t)>(Hook::MakeBuffer);
  auto load =
      hook<void (*)(void *, int64_t, void *, int32_t)>(Hook::BufferLoad);
  char *buf = static_cast<char *>(make(gSrc, 40));
  float v;
  load(buf - 4, 4, &v, 4);
}

TEST_F(Emu, BufferOffsetsOutside32BitsAreErrors) {
  Status s = run(&negativeOffset, 64, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("does not fit the instruction's 32-bit"),
            std::string::npos)
      << s.message();
}

// MFMA 16x16x16 and 32x32x8 (bf16): the wave's product against a plain one.
struct MfmaCase {
  mla::emu::MfmaShape shape;
  int m, n, k, ab, c;
};
MfmaCase gCase;
std::vector<uint16_t> gA, gB; // row-major M x K, K x N (bf16 bits)
std::vector<float> gD;        // M x N, as the lanes hold it

void mfmaLane(void **) {
  int l = int(tid());
  const MfmaCase &c = gCase;
  int g = c.m == 32 ? 32 : 16;
  uint16_t a[8], b[8];
  float acc[16], d[16];
  for (int e = 0; e < c.ab; ++e) {
    a[e] = gA[(l % g) * c.k + c.ab * (l / g) + e];
    b[e] = gB[(c.ab * (l / g) + e) * c.n + l % g];
  }
  for (int e = 0; e < c.c; ++e)
    acc[e] = 1.0f; // C = 1 everywhere
  hook<void (*)(int32_t, int32_t, const void *, const void *, const void *,
                void *, int32_t)>(Hook::Mfma)(
      static_cast<int32_t>(c.shape),
      static_cast<int32_t>(mla::emu::MfmaType::BF16), a, b, acc, d, 5);
  for (int e = 0; e < c.c; ++e) {
    int i = c.m == 32 ? 8 * (e / 4) + 4 * (l / 32) + e % 4 : 4 * (l / 16) + e;
    gD[i * c.n + l % g] = d[e];
  }
}

TEST_F(Emu, MfmaLayoutsMatchAPlainProduct) {
  using mla::emu::MfmaShape;
  for (MfmaCase c : {MfmaCase{MfmaShape::M16N16K16, 16, 16, 16, 4, 4},
                     MfmaCase{MfmaShape::M32N32K8, 32, 32, 8, 4, 16},
                     MfmaCase{MfmaShape::M16N16K32, 16, 16, 32, 8, 4}}) {
    gCase = c;
    std::mt19937 rng(c.m * 100 + c.k);
    std::normal_distribution<float> dist;
    gA.resize(c.m * c.k);
    gB.resize(c.k * c.n);
    for (auto &v : gA)
      v = floatToBF16(dist(rng));
    for (auto &v : gB)
      v = floatToBF16(dist(rng));
    gD.assign(c.m * c.n, NAN);
    ASSERT_TRUE(run(&mfmaLane, 64, 0).ok());
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j) {
        double ref = 1.0;
        for (int k = 0; k < c.k; ++k)
          ref += double(bf16ToFloat(gA[i * c.k + k])) *
                 bf16ToFloat(gB[k * c.n + j]);
        EXPECT_NEAR(gD[i * c.n + j], ref, 1e-4) << i << "," << j;
      }
  }
}

// Lanes of one wave at different MFMA sites: divergence.
void divergentMfma(void **) {
  uint16_t a[4] = {}, b[4] = {};
  float c[4] = {}, d[4];
  int32_t site = tid() < 32 ? 5 : 0;
  hook<void (*)(int32_t, int32_t, const void *, const void *, const void *,
                void *, int32_t)>(Hook::Mfma)(0, 0, a, b, c, d, site);
}

TEST_F(Emu, DivergentWaveCollectiveIsAnError) {
  Status s = run(&divergentMfma, 64, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("diverged at a wave-collective operation"),
            std::string::npos)
      << s.message();
}

int32_t gShuf[64];
void shuffleLane(void **) {
  int32_t t = int32_t(tid());
  gShuf[t] = hook<int32_t (*)(int32_t, int32_t, int32_t)>(Hook::Shuffle)(
      100 + t, t ^ 5, 0);
}

TEST_F(Emu, ShuffleReadsTheSourceLane) {
  ASSERT_TRUE(run(&shuffleLane, 64, 0).ok());
  for (int t = 0; t < 64; ++t)
    EXPECT_EQ(gShuf[t], 100 + (t ^ 5));
}

} // namespace

#include "mla/runtime/Device.h"
#include "mla/runtime/mla_runtime.h"

namespace {
TEST(EmuDevice, NamesOpenTheEmulator) {
  for (const char *name : {"emu", "emu:reverse", "emu:random:42",
                           "emu:check-orders", "emu:check-orders:9"}) {
    Expected<Device> dev = Device::open(name);
    ASSERT_TRUE(dev.ok()) << name << ": " << dev.status().toString();
    EXPECT_TRUE(dev->getBackend().supportsTarget("gfx942-emu"));
    EXPECT_TRUE(dev->getBackend().supportsTarget("gfx950-emu"));
    EXPECT_FALSE(dev->getBackend().supportsTarget("gfx942"));
    EXPECT_FALSE(dev->getBackend().supportsTarget("host-x86_64"));
  }
  EXPECT_EQ(Device::open("emu:random:7")->getName(), "emu:random:7");
  for (const char *bad : {"emu:", "emu:random:", "emu:random:x", "emux"}) {
    Expected<Device> dev = Device::open(bad);
    EXPECT_FALSE(dev.ok()) << bad;
  }
}

TEST(EmuDevice, CApiOpensTheEmulator) {
  mla_device *dev = nullptr;
  ASSERT_EQ(mla_device_open("emu:reverse", nullptr, &dev), MLA_OK);
  const char *name = nullptr;
  ASSERT_EQ(mla_device_name(dev, &name), MLA_OK);
  EXPECT_STREQ(name, "emu:reverse");
  mla_device_close(dev);
}
} // namespace
