//===- DecodeHostTest.cpp - decode end to end on the host -----------------===//
//
// Each case compiles a decode package with mla-compile, runs it through the
// runtime's host backend on random data (never zeros) in a random paged
// layout, and compares o and lse with a float64 reference.
//
//===----------------------------------------------------------------------===//
#include "HostPackages.h"
#include "mla/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace mla::rt;

namespace {

struct Case {
  std::string name;
  int64_t heads, latent, rope, pageSize, qLen;
  std::string dtype;
  std::vector<int32_t> lens;
  std::string perfConfig = "";
};

std::ostream &operator<<(std::ostream &os, const Case &c) {
  return os << c.name;
}

std::string tempDir() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/mla-e2e-XXXXXX";
    const char *d = mkdtemp(tmpl);
    return std::string(d ? d : "/tmp");
  }();
  return dir;
}

/// Compiles a package with the real mla-compile; returns its path.
std::string compile(const Case &c) {
  std::string out = tempDir() + "/" + c.name + ".mlapkg";
  std::string cmd = std::string(MLA_COMPILE_PATH) +
                    " --kernel=decode --target=" MLA_E2E_TARGET " --heads=" +
                    std::to_string(c.heads) +
                    " --latent-dim=" + std::to_string(c.latent) +
                    " --rope-dim=" + std::to_string(c.rope) +
                    " --page-size=" + std::to_string(c.pageSize) +
                    " --q-len=" + std::to_string(c.qLen) +
                    " --dtype=" + c.dtype + " -o " + out;
  if (!c.perfConfig.empty())
    cmd += " --perf-config=" + c.perfConfig;
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  return out;
}

/// Rounds through the kernel dtype and stores it there.
struct Buffer {
  DType dtype;
  std::vector<uint8_t> bytes;
  std::vector<double> exact; // the rounded values, as the kernel sees them
};

Buffer makeFloat(DType dtype, size_t n, std::mt19937 &rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Buffer b{dtype, std::vector<uint8_t>(n * dtypeSize(dtype)), {}};
  b.exact.resize(n);
  for (size_t i = 0; i < n; ++i) {
    float v = dist(rng);
    if (dtype == DType::BF16) {
      uint16_t bits = floatToBF16(v);
      std::memcpy(&b.bytes[i * 2], &bits, 2);
      b.exact[i] = bf16ToFloat(bits);
    } else if (dtype == DType::F16) {
      uint16_t bits = floatToF16(v);
      std::memcpy(&b.bytes[i * 2], &bits, 2);
      b.exact[i] = f16ToFloat(bits);
    } else {
      std::memcpy(&b.bytes[i * 4], &v, 4);
      b.exact[i] = v;
    }
  }
  return b;
}

double readFloat(DType dtype, const uint8_t *p) {
  if (dtype == DType::F32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return dtype == DType::BF16 ? bf16ToFloat(bits) : f16ToFloat(bits);
}

class DecodeHost : public ::testing::TestWithParam<Case> {};

TEST_P(DecodeHost, MatchesFloat64Reference) {
  const Case &c = GetParam();
  if (std::string(MLA_E2E_TARGET) != "host" &&
      c.perfConfig.find("stages=") != std::string::npos)
    GTEST_SKIP() << "pipelined key tiles (stages > 1) do not fit an AMD "
                    "chip's LDS";
  std::string path = compile(c);
  Expected<Package> pkg = readPackage(path);
  ASSERT_TRUE(pkg.ok()) << pkg.status().toString();
  Expected<Device> dev = Device::open(MLA_E2E_DEVICE);
  ASSERT_TRUE(dev.ok()) << dev.status().toString();
  Expected<Kernel> kernel = dev->loadKernel(*pkg);
  ASSERT_TRUE(kernel.ok()) << kernel.status().toString();

  const DType dt = c.dtype == "bf16"  ? DType::BF16
                   : c.dtype == "f16" ? DType::F16
                                      : DType::F32;
  const int64_t batch = c.lens.size(), d = c.latent + c.rope,
                page = c.pageSize ? c.pageSize : 5; // 0: chosen at run time
  const int32_t maxLen = *std::max_element(c.lens.begin(), c.lens.end());
  const int64_t maxPages = std::max<int64_t>(1, (maxLen + page - 1) / page) + 1;
  const int64_t numPages = batch * maxPages + 5;
  std::mt19937 rng(std::hash<std::string>()(c.name));

  // Pages handed out in a random order; unused table slots point anywhere
  // valid.
  std::vector<int32_t> perm(numPages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table(batch * maxPages);
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = perm[i];
  const float scale = 0.1352f;

  Buffer q = makeFloat(dt, batch * c.qLen * c.heads * d, rng);
  Buffer kv = makeFloat(dt, numPages * page * d, rng);
  std::vector<int32_t> lens = c.lens;
  const size_t oCount = batch * c.qLen * c.heads * c.latent;
  std::vector<uint8_t> o(oCount * dtypeSize(dt), 0xFF); // NaN poison
  std::vector<float> lse(batch * c.qLen * c.heads,
                         std::numeric_limits<float>::quiet_NaN());

  DecodeArgs args;
  args.q = {q.bytes.data(), dt, {batch, c.qLen, c.heads, d}};
  args.kv = {kv.bytes.data(), dt, {numPages, page, d}};
  args.blockTable = {table.data(), DType::I32, {batch, maxPages}};
  args.seqLens = {lens.data(), DType::I32, {batch}};
  args.scale = scale;
  args.o = {o.data(), dt, {batch, c.qLen, c.heads, c.latent}};
  args.lse = {lse.data(), DType::F32, {batch, c.qLen, c.heads}};
  Status st = kernel->launchDecode(args);
  ASSERT_TRUE(st.ok()) << st.toString();

  // float64 reference.
  double errO = 0, normO = 0, errL = 0, normL = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < c.qLen; ++i) {
      const int64_t visible = lens[b] - c.qLen + i + 1;
      for (int64_t h = 0; h < c.heads; ++h) {
        const int64_t row = (b * c.qLen + i) * c.heads + h;
        const double *qr = &q.exact[row * d];
        std::vector<double> s(std::max<int64_t>(visible, 0));
        double m = -INFINITY;
        for (int64_t t = 0; t < visible; ++t) {
          int64_t pg = table[b * maxPages + t / page];
          const double *kr = &kv.exact[(pg * page + t % page) * d];
          double dot = 0;
          for (int64_t k = 0; k < d; ++k)
            dot += qr[k] * kr[k];
          s[t] = dot * scale;
          m = std::max(m, s[t]);
        }
        double sum = 0;
        std::vector<double> ref(c.latent, 0.0);
        for (int64_t t = 0; t < visible; ++t) {
          double p = std::exp(s[t] - m);
          sum += p;
          int64_t pg = table[b * maxPages + t / page];
          const double *kr = &kv.exact[(pg * page + t % page) * d];
          for (int64_t k = 0; k < c.latent; ++k)
            ref[k] += p * kr[k];
        }
        const float got = lse[row];
        ASSERT_FALSE(std::isnan(got)) << "lse NaN or unwritten at row " << row;
        if (visible <= 0) {
          EXPECT_EQ(got, -INFINITY) << "row " << row << " sees no key";
        } else {
          double refL = m + std::log(sum);
          errL += (got - refL) * (got - refL);
          normL += refL * refL;
        }
        for (int64_t k = 0; k < c.latent; ++k) {
          double r = visible > 0 ? ref[k] / sum : 0.0;
          double g = readFloat(dt, &o[(row * c.latent + k) * dtypeSize(dt)]);
          ASSERT_FALSE(std::isnan(g)) << "o NaN or unwritten at row " << row;
          errO += (g - r) * (g - r);
          normO += r * r;
        }
      }
    }
  }
  const double tol = dt == DType::F32 ? 1e-4 : 2e-2;
  const double relO = std::sqrt(errO / std::max(normO, 1e-30));
  const double relL = std::sqrt(errL / std::max(normL, 1e-30));
  EXPECT_LE(relO, tol) << "relative error of o";
  EXPECT_LE(relL, tol) << "relative error of lse";
  std::printf("[ %s ] rel. error o %.2e, lse %.2e\n", c.name.c_str(), relO,
              relL);
}

const Case kCases[] = {
    // DeepSeek 512+64, bf16, every page size, TP8 heads.
    {"ds_h16_p64_s1_bf16", 16, 512, 64, 64, 1, "bf16", {300, 1, 64, 129}},
    {"ds_h16_p16_s1_bf16", 16, 512, 64, 16, 1, "bf16", {17, 250, 1, 33}},
    {"ds_h16_p3_s1_bf16", 16, 512, 64, 3, 1, "bf16", {100, 1, 7, 2}},
    {"ds_h16_p1_s1_bf16", 16, 512, 64, 1, 1, "bf16", {1, 90, 45}},
    // MTP: Sq 2 and 4, including lengths shorter than Sq (rows with no key).
    {"ds_h16_p64_s2_bf16", 16, 512, 64, 64, 2, "bf16", {200, 1, 65}},
    {"ds_h16_p3_s4_bf16", 16, 512, 64, 3, 4, "bf16", {40, 2, 131, 4}},
    {"ds_h16_p1_s4_f32", 16, 512, 64, 1, 4, "f32", {3, 77}},
    // One head and all 128 heads.
    {"ds_h1_p16_s1_bf16", 1, 512, 64, 16, 1, "bf16", {500, 1, 31}},
    {"ds_h1_p1_s2_f32", 1, 512, 64, 1, 2, "f32", {1, 60, 2}},
    {"ds_h128_p64_s1_bf16", 128, 512, 64, 64, 1, "bf16", {150, 1}},
    {"ds_h128_p16_s2_f32", 128, 512, 64, 16, 2, "f32", {70, 3}},
    {"ds_h128_p3_s4_bf16", 128, 512, 64, 3, 4, "bf16", {50, 5}},
    // f32 across page sizes.
    {"ds_h16_p64_s1_f32", 16, 512, 64, 64, 1, "f32", {300, 1, 64, 129}},
    {"ds_h16_p3_s2_f32", 16, 512, 64, 3, 2, "f32", {100, 1, 8}},
    // 256+32 dims.
    {"d288_h16_p64_s1_bf16", 16, 256, 32, 64, 1, "bf16", {200, 1, 65}},
    {"d288_h16_p1_s2_bf16", 16, 256, 32, 1, 2, "bf16", {33, 2}},
    {"d288_h1_p3_s4_f32", 1, 256, 32, 3, 4, "f32", {61, 1, 4}},
    {"d288_h128_p16_s1_f32", 128, 256, 32, 16, 1, "f32", {47, 1}},
    {"d288_h16_p16_s1_f16", 16, 256, 32, 16, 1, "f16", {120, 9}},
    // Run-time page size, and configs that stress the split-KV combine.
    {"ds_h16_pdyn_s1_bf16", 16, 512, 64, 0, 1, "bf16", {90, 1}},
    {"ds_h16_p16_splits1_f32",
     16,
     512,
     64,
     16,
     1,
     "f32",
     {200, 1},
     "kv_splits=1,tile_kv=16"},
    {"ds_h16_p3_splits16_f32",
     16,
     512,
     64,
     3,
     2,
     "f32",
     {200, 1, 0, 17},
     "kv_splits=16,tile_kv=8,head_group=4"},
    // Balanced splits: 3 requests x 4 head groups, 40 workgroups wanted ->
    // 4 of the 8 splits hold keys, the rest are empty parts.
    {"ds_h16_p16_balanced_bf16",
     16,
     512,
     64,
     16,
     1,
     "bf16",
     {300, 1, 77},
     "kv_splits=8,head_group=4,min_workgroups=40"},
    // Pipelined key loops: stages 2 and 3, splits ending mid-tile, page
    // sizes 1 and 3.
    {"ds_h16_p1_stages2_bf16",
     16,
     512,
     64,
     1,
     1,
     "bf16",
     {300, 1, 77},
     "stages=2,tile_kv=32,kv_splits=2"},
    {"ds_h128_p3_stages3_bf16",
     128,
     512,
     64,
     3,
     2,
     "bf16",
     {150, 2},
     "stages=3,tile_kv=16,head_group=32"},
};

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Matrix, DecodeHost, ::testing::ValuesIn(kCases),
                         caseName);

} // namespace
