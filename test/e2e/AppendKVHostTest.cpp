//===- AppendKVHostTest.cpp - KV append end to end on the host ------------===//
//
// Each case compiles a KV-append package with mla-compile
// (--kernel=append_kv), runs it through the runtime's host backend
// (Kernel::launchByRole with roles kv_new, slot_mapping, kv) on a random page
// pool and random new rows (never zeros), with a slot mapping that is a
// random choice of distinct slots with -1 padding entries mixed in, and
// checks every row of the pool: rows named by a slot hold the new row
// bit-exactly, every other row is unchanged.
//
//===----------------------------------------------------------------------===//
#include "HostPackages.h"
#include "mla/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace mla::rt;

namespace {

struct AppendCase {
  std::string name;
  int64_t latent, rope;
  /// Manifest page size; 0 = chosen at run time (the test then uses 5).
  int64_t pageSize;
  std::string dtype;
  int64_t pages;   // pool pages
  int64_t tokens;  // new tokens, padding included
  int64_t padding; // how many of them are -1
};

std::ostream &operator<<(std::ostream &os, const AppendCase &c) {
  return os << c.name;
}

std::string tempDir() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/mla-e2e-append-XXXXXX";
    const char *d = mkdtemp(tmpl);
    return std::string(d ? d : "/tmp");
  }();
  return dir;
}

/// Compiles a package with the real mla-compile; returns its path.
std::string compileAppend(const AppendCase &c) {
  std::string out = tempDir() + "/" + c.name + ".mlapkg";
  std::string cmd =
      std::string(MLA_COMPILE_PATH) +
      " --kernel=append_kv --target=" MLA_E2E_TARGET " --latent-dim=" +
      std::to_string(c.latent) + " --rope-dim=" + std::to_string(c.rope) +
      " --page-size=" + std::to_string(c.pageSize) + " --dtype=" + c.dtype +
      " -o " + out;
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  return out;
}

DType dtypeOf(const std::string &name) {
  return name == "bf16" ? DType::BF16 : name == "f16" ? DType::F16 : DType::F32;
}

/// `n` random values of `dtype`, none of them zero: magnitudes in
/// [0.25, 2) with random signs, rounded to the dtype.
std::vector<uint8_t> randomNonZero(DType dtype, int64_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> mag(0.25f, 2.0f);
  std::bernoulli_distribution sign(0.5);
  const size_t es = dtypeSize(dtype);
  std::vector<uint8_t> bytes(n * es);
  for (int64_t i = 0; i < n; ++i) {
    float v = sign(rng) ? -mag(rng) : mag(rng);
    if (dtype == DType::BF16) {
      uint16_t bits = floatToBF16(v);
      std::memcpy(&bytes[i * es], &bits, 2);
    } else if (dtype == DType::F16) {
      uint16_t bits = floatToF16(v);
      std::memcpy(&bytes[i * es], &bits, 2);
    } else {
      std::memcpy(&bytes[i * es], &v, 4);
    }
  }
  return bytes;
}

/// A loaded append package and host buffers for one launch.
struct AppendRun {
  Kernel kernel;
  DType dt;
  int64_t d, page, pages;
  std::vector<uint8_t> pool, original, rows;
  std::vector<int32_t> slots;

  size_t rowBytes() const { return d * dtypeSize(dt); }

  Status launch(bool validate = true) const {
    LaunchOptions options;
    options.validate = validate;
    const int64_t tokens = static_cast<int64_t>(slots.size());
    return kernel.launchByRole(
        {{"kv_new",
          TensorView{const_cast<uint8_t *>(rows.data()), dt, {tokens, d}}},
         {"slot_mapping", TensorView{const_cast<int32_t *>(slots.data()),
                                     DType::I32,
                                     {tokens}}},
         {"kv", TensorView{const_cast<uint8_t *>(pool.data()),
                           dt,
                           {pages, page, d}}}},
        options);
  }

  /// Every pool row: the new row of the token whose slot names it, else
  /// the original contents (bit-exact). Slots outside the pool write
  /// nothing.
  void expectPool() const {
    std::map<int64_t, int64_t> tokenOfSlot;
    for (size_t t = 0; t < slots.size(); ++t)
      if (slots[t] >= 0 && slots[t] < pages * page)
        tokenOfSlot[slots[t]] = static_cast<int64_t>(t);
    int64_t wrong = 0, written = 0;
    for (int64_t s = 0; s < pages * page; ++s) {
      const uint8_t *got = &pool[s * rowBytes()];
      auto it = tokenOfSlot.find(s);
      const uint8_t *want = it == tokenOfSlot.end()
                                ? &original[s * rowBytes()]
                                : &rows[it->second * rowBytes()];
      written += it != tokenOfSlot.end();
      if (std::memcmp(got, want, rowBytes()) != 0 && wrong++ < 5)
        ADD_FAILURE() << "pool row " << s << " (page " << s / page
                      << ", offset " << s % page << ") "
                      << (it == tokenOfSlot.end()
                              ? "changed although no slot names it"
                              : "differs from new row " +
                                    std::to_string(it->second));
    }
    EXPECT_EQ(wrong, 0) << "rows wrong out of " << pages * page << " ("
                        << written << " written)";
  }
};

AppendRun load(const AppendCase &c, uint32_t seed) {
  std::string path = compileAppend(c);
  Expected<Package> pkg = readPackage(path);
  EXPECT_TRUE(pkg.ok()) << pkg.status().toString();
  Expected<Device> dev = Device::open(MLA_E2E_DEVICE);
  EXPECT_TRUE(dev.ok()) << dev.status().toString();
  Expected<Kernel> kernel = dev->loadKernel(*pkg);
  EXPECT_TRUE(kernel.ok()) << kernel.status().toString();
  AppendRun run{kernel.take(),
                dtypeOf(c.dtype),
                c.latent + c.rope,
                c.pageSize ? c.pageSize : 5,
                c.pages,
                {},
                {},
                {},
                {}};
  std::mt19937 rng(seed);
  run.pool = randomNonZero(run.dt, run.pages * run.page * run.d, rng);
  run.original = run.pool;
  run.rows = randomNonZero(run.dt, c.tokens * run.d, rng);
  // Distinct slots in random order, -1 padding at random positions.
  std::vector<int32_t> all(run.pages * run.page);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  run.slots.assign(all.begin(), all.begin() + (c.tokens - c.padding));
  run.slots.insert(run.slots.end(), c.padding, -1);
  std::shuffle(run.slots.begin(), run.slots.end(), rng);
  return run;
}

class AppendKVHost : public ::testing::TestWithParam<AppendCase> {};

TEST_P(AppendKVHost, WritesSlotsAndNothingElse) {
  const AppendCase &c = GetParam();
  ASSERT_LE(c.tokens - c.padding, c.pages * (c.pageSize ? c.pageSize : 5));
  AppendRun run = load(c, std::hash<std::string>()(c.name));
  if (HasFailure())
    return;
  const Manifest &m = run.kernel.getManifest();
  EXPECT_EQ(m.kernel, "append_kv");
  EXPECT_EQ(m.latentDim, c.latent);
  EXPECT_EQ(m.ropeDim, c.rope);
  EXPECT_EQ(m.pageSize, c.pageSize);
  ASSERT_TRUE(m.dtype.has_value());
  EXPECT_EQ(*m.dtype, run.dt);
  for (const char *role : {"kv_new", "slot_mapping", "kv"})
    EXPECT_NE(m.findArg(role), nullptr) << "no manifest arg with role " << role;
  Status st = run.launch();
  ASSERT_TRUE(st.ok()) << st.toString();
  run.expectPool();
  // A second batch on top of the first: rows written before stay unless
  // overwritten.
  std::mt19937 rng(7);
  run.original = run.pool;
  run.rows = randomNonZero(run.dt, run.slots.size() * run.d, rng);
  std::reverse(run.slots.begin(), run.slots.end());
  st = run.launch();
  ASSERT_TRUE(st.ok()) << st.toString();
  run.expectPool();
}

const AppendCase kCases[] = {
    // DeepSeek 512+64, every page size serving engines use, bf16 and f32.
    {"ds_p1_bf16", 512, 64, 1, "bf16", 40, 33, 4},
    {"ds_p3_bf16", 512, 64, 3, "bf16", 11, 29, 3},
    {"ds_p16_bf16", 512, 64, 16, "bf16", 6, 70, 9},
    {"ds_p64_bf16", 512, 64, 64, "bf16", 3, 150, 20},
    {"ds_p1_f32", 512, 64, 1, "f32", 17, 17, 2},
    {"ds_p3_f32", 512, 64, 3, "f32", 9, 20, 5},
    {"ds_p16_f32", 512, 64, 16, "f32", 4, 41, 1},
    {"ds_p64_f32", 512, 64, 64, "f32", 2, 100, 7},
    // Run-time page size (5 here), f16, other row widths.
    {"ds_pdyn_bf16", 512, 64, 0, "bf16", 7, 30, 6},
    {"d288_p16_f16", 256, 32, 16, "f16", 5, 44, 4},
    {"d32_p3_bf16", 16, 16, 3, "bf16", 4, 12, 2},
    // Every slot of the pool written once.
    {"ds_full_p16_bf16", 512, 64, 16, "bf16", 2, 32, 0},
    // Only padding.
    {"ds_padding_p64_bf16", 512, 64, 64, "bf16", 2, 5, 5},
};

INSTANTIATE_TEST_SUITE_P(Cases, AppendKVHost, ::testing::ValuesIn(kCases),
                         [](const auto &info) { return info.param.name; });

// Slots outside [0, pages * P) are skipped by the kernel itself (with the
// runtime's checks turned off, so that they reach it): nothing is written
// out of bounds or wrapped around, and the valid slots of the same launch are
// still written.
TEST(AppendKVHostBounds, OutOfRangeSlotsWriteNothing) {
  for (int64_t pageSize : {1, 3, 16, 0}) {
    AppendCase c{"bounds_p" + std::to_string(pageSize),
                 512,
                 64,
                 pageSize,
                 "bf16",
                 4,
                 12,
                 0};
    SCOPED_TRACE(c.name);
    AppendRun run = load(c, 99 + pageSize);
    if (HasFailure())
      return;
    // The pool sits inside a larger buffer whose guard rows must survive.
    const int64_t capacity = run.pages * run.page;
    const int32_t bad[] = {static_cast<int32_t>(capacity),
                           static_cast<int32_t>(capacity + 1),
                           static_cast<int32_t>(capacity + run.page),
                           -2,
                           std::numeric_limits<int32_t>::min(),
                           std::numeric_limits<int32_t>::max()};
    for (size_t i = 0; i < std::size(bad); ++i)
      run.slots[i * 2] = bad[i];
    std::mt19937 rng(5);
    const std::vector<uint8_t> guard =
        randomNonZero(run.dt, 3 * capacity * run.d, rng);
    std::vector<uint8_t> guarded = guard;
    // pool = guarded[capacity rows, 2 * capacity rows).
    uint8_t *poolStart = guarded.data() + capacity * run.rowBytes();
    std::memcpy(poolStart, run.pool.data(), run.pool.size());
    const int64_t tokens = static_cast<int64_t>(run.slots.size());
    LaunchOptions options;
    options.validate = false;
    Status st = run.kernel.launchByRole(
        {{"kv_new", TensorView{run.rows.data(), run.dt, {tokens, run.d}}},
         {"slot_mapping", TensorView{run.slots.data(), DType::I32, {tokens}}},
         {"kv", TensorView{poolStart, run.dt, {run.pages, run.page, run.d}}}},
        options);
    ASSERT_TRUE(st.ok()) << st.toString();
    std::memcpy(run.pool.data(), poolStart, run.pool.size());
    run.expectPool();
    const size_t guardBytes = capacity * run.rowBytes();
    EXPECT_EQ(std::memcmp(guarded.data(), guard.data(), guardBytes), 0)
        << "rows before the pool were written";
    EXPECT_EQ(std::memcmp(guarded.data() + guardBytes + run.pool.size(),
                          guard.data() + guardBytes + run.pool.size(),
                          guardBytes),
              0)
        << "rows after the pool were written";
  }
}

// No new tokens: a launch over an empty grid that leaves the pool alone.
TEST(AppendKVHostBounds, NoTokens) {
  AppendCase c{"empty_p16", 512, 64, 16, "f32", 2, 0, 0};
  AppendRun run = load(c, 3);
  if (HasFailure())
    return;
  Status st = run.launch();
  ASSERT_TRUE(st.ok()) << st.toString();
  run.expectPool();
}

} // namespace
