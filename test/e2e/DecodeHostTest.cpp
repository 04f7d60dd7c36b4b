//===- DecodeHostTest.cpp - decode end to end on the host -----------------===//
//
// Each case compiles a decode package with mla-compile, runs it through the
// runtime's host backend on random data (never zeros) in a random paged
// layout, and compares o and lse with a float64 reference. The harness
// (DecodeHarness.h) is defined here; DecodeChunksTest.cpp has the tests of
// the length-aware schedule beyond the matrix of cases.
//
//===----------------------------------------------------------------------===//
#include "DecodeHarness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <pthread.h>
#include <random>
#include <sys/wait.h>
#include <unistd.h>

namespace mla::e2e {
namespace {

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

} // namespace

/// Compiles `c` and loads its kernel on the test device.
void loadDecode(const Case &c, std::optional<Kernel> &out) {
  std::string path = compile(c);
  Expected<Package> pkg = readPackage(path);
  ASSERT_TRUE(pkg.ok()) << pkg.status().toString();
  Expected<Device> dev = Device::open(MLA_E2E_DEVICE);
  ASSERT_TRUE(dev.ok()) << dev.status().toString();
  Expected<Kernel> kernel = dev->loadKernel(*pkg);
  ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
  out = *kernel;
}

/// Compiles `c`, launches it on random inputs in a random paged layout.
void runDecode(const Case &c, DecodeRun &r) {
  std::optional<Kernel> kernel;
  ASSERT_NO_FATAL_FAILURE(loadDecode(c, kernel));
  runDecodeWith(*kernel, c, r);
}

void runDecodeWith(const Kernel &kernel, const Case &c, DecodeRun &r,
                   LaunchOptions options, Workspace *workspace) {
  r.dt = c.dtype == "bf16"  ? DType::BF16
         : c.dtype == "f16" ? DType::F16
                            : DType::F32;
  r.batch = c.lens.size();
  r.d = c.latent + c.rope;
  r.page = c.pageSize ? c.pageSize : 5; // 0: chosen at run time
  const int32_t maxLen = *std::max_element(c.lens.begin(), c.lens.end());
  r.maxPages = std::max<int64_t>(1, (maxLen + r.page - 1) / r.page) + 1;
  const int64_t numPages = r.batch * r.maxPages + 5;
  std::mt19937 rng(
      std::hash<std::string>()(c.inputs.empty() ? c.name : c.inputs));

  // Pages handed out in a random order; unused table slots point anywhere
  // valid.
  std::vector<int32_t> perm(numPages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  r.table.assign(perm.begin(), perm.begin() + r.batch * r.maxPages);
  r.q = makeFloat(r.dt, r.batch * c.qLen * c.heads * r.d, rng);
  r.kv = makeFloat(r.dt, numPages * r.page * r.d, rng);
  r.lens = c.lens;
  const size_t oCount = r.batch * c.qLen * c.heads * c.latent;
  r.o.assign(oCount * dtypeSize(r.dt), 0xFF); // NaN poison
  r.lse.assign(r.batch * c.qLen * c.heads,
               std::numeric_limits<float>::quiet_NaN());

  DecodeArgs args;
  args.q = {r.q.bytes.data(), r.dt, {r.batch, c.qLen, c.heads, r.d}};
  args.kv = {r.kv.bytes.data(), r.dt, {numPages, r.page, r.d}};
  args.blockTable = {r.table.data(), DType::I32, {r.batch, r.maxPages}};
  args.seqLens = {r.lens.data(), DType::I32, {r.batch}};
  args.scale = kScale;
  args.o = {r.o.data(), r.dt, {r.batch, c.qLen, c.heads, c.latent}};
  args.lse = {r.lse.data(), DType::F32, {r.batch, c.qLen, c.heads}};
  if (workspace) {
    Expected<size_t> bytes = kernel.workspaceBytes(args);
    ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
    if (!workspace->data)
      workspace->allocate(*bytes);
    options.workspace = workspace->data;
    options.workspaceBytes = workspace->bytes;
  }
  Status st = kernel.launchDecode(args, options);
  ASSERT_TRUE(st.ok()) << st.toString();
}

/// Compares a run's o and lse with a float64 reference.
void checkReference(const Case &c, const DecodeRun &r) {
  const DType dt = r.dt;
  const int64_t d = r.d, page = r.page, maxPages = r.maxPages;
  double errO = 0, normO = 0, errL = 0, normL = 0;
  for (int64_t b = 0; b < r.batch; ++b) {
    for (int64_t i = 0; i < c.qLen; ++i) {
      const int64_t visible = r.lens[b] - c.qLen + i + 1;
      for (int64_t h = 0; h < c.heads; ++h) {
        const int64_t row = (b * c.qLen + i) * c.heads + h;
        const double *qr = &r.q.exact[row * d];
        std::vector<double> s(std::max<int64_t>(visible, 0));
        double m = -INFINITY;
        for (int64_t t = 0; t < visible; ++t) {
          int64_t pg = r.table[b * maxPages + t / page];
          const double *kr = &r.kv.exact[(pg * page + t % page) * d];
          double dot = 0;
          for (int64_t k = 0; k < d; ++k)
            dot += qr[k] * kr[k];
          s[t] = dot * kScale;
          m = std::max(m, s[t]);
        }
        double sum = 0;
        std::vector<double> ref(c.latent, 0.0);
        for (int64_t t = 0; t < visible; ++t) {
          double p = std::exp(s[t] - m);
          sum += p;
          int64_t pg = r.table[b * maxPages + t / page];
          const double *kr = &r.kv.exact[(pg * page + t % page) * d];
          for (int64_t k = 0; k < c.latent; ++k)
            ref[k] += p * kr[k];
        }
        const float got = r.lse[row];
        ASSERT_FALSE(std::isnan(got)) << "lse NaN or unwritten at row " << row;
        if (visible <= 0) {
          EXPECT_EQ(got, -INFINITY) << "row " << row << " sees no key";
        } else {
          double refL = m + std::log(sum);
          errL += (got - refL) * (got - refL);
          normL += refL * refL;
        }
        for (int64_t k = 0; k < c.latent; ++k) {
          double ref0 = visible > 0 ? ref[k] / sum : 0.0;
          double g = readFloat(dt, &r.o[(row * c.latent + k) * dtypeSize(dt)]);
          ASSERT_FALSE(std::isnan(g)) << "o NaN or unwritten at row " << row;
          errO += (g - ref0) * (g - ref0);
          normO += ref0 * ref0;
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

void expectSameBits(const DecodeRun &r, const DecodeRun &base,
                    const std::string &what) {
  EXPECT_EQ(r.o, base.o) << "o differs: " << what;
  EXPECT_EQ(0, std::memcmp(r.lse.data(), base.lse.data(),
                           base.lse.size() * sizeof(float)))
      << "lse differs: " << what;
}

namespace {

/// Why case `c` cannot run on the AMD emulation targets ("" if it can):
/// what does not fit an AMD chip's 64 KiB of LDS.
std::string skipOnAmd(const Case &c) {
  if (std::string(MLA_E2E_TARGET) == "host")
    return "";
  if (c.perfConfig.find("stages=") != std::string::npos)
    return "pipelined key tiles (stages > 1) do not fit an AMD chip's LDS";
  if (c.latent + c.rope > 1024)
    return "a key tile of rows this wide does not fit an AMD chip's LDS";
  return "";
}

class DecodeHost : public ::testing::TestWithParam<Case> {};

TEST_P(DecodeHost, MatchesFloat64Reference) {
  const Case &c = GetParam();
  if (std::string why = skipOnAmd(c); !why.empty())
    GTEST_SKIP() << why;
  DecodeRun r;
  ASSERT_NO_FATAL_FAILURE(runDecode(c, r));
  checkReference(c, r);
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
    // The length-aware schedule (kv_chunks) on ragged batches: lengths 0
    // and 1, page-size multiples and not, one long request among short
    // ones (split into many chunks), a batch of one long request; few
    // chunks (long chunks) and many (one tile each), every page size, Sq
    // 1, 2 and 4, head groups.
    {"chunks_h16_p64_s1_bf16",
     16,
     512,
     64,
     64,
     1,
     "bf16",
     {0, 1, 64, 128, 65, 3000, 2, 0, 63},
     "kv_chunks=6"},
    {"chunks_h16_p1_s1_bf16",
     16,
     512,
     64,
     1,
     1,
     "bf16",
     {1500, 1, 0, 7, 32, 33},
     "kv_chunks=40"},
    {"chunks_h16_p3_s2_f32",
     16,
     512,
     64,
     3,
     2,
     "f32",
     {0, 1, 2, 3, 700, 5, 6},
     "kv_chunks=9"},
    {"chunks_h16_p16_s4_bf16",
     16,
     512,
     64,
     16,
     4,
     "bf16",
     {2, 4, 16, 999, 48, 0},
     "kv_chunks=1000"},
    {"chunks_b1_h16_p64_s1_bf16",
     16,
     512,
     64,
     64,
     1,
     "bf16",
     {4000},
     "kv_chunks=24"},
    {"chunks_h128_p3_s1_bf16",
     128,
     512,
     64,
     3,
     1,
     "bf16",
     {0, 600, 1},
     "kv_chunks=12"},
    // The merge's part groups (merge_groups): many chunks per request
    // (one tile each), an odd group count for one long request, lengths 0
    // among long ones; a value dim too wide for the groups' sums (it takes
    // one group).
    {"chunks_groups4_h16_p16_s4_bf16",
     16,
     512,
     64,
     16,
     4,
     "bf16",
     {2, 4, 16, 999, 48, 0},
     "kv_chunks=1000,merge_groups=4"},
    {"chunks_groups3_b1_h16_p64_s1_bf16",
     16,
     512,
     64,
     64,
     1,
     "bf16",
     {4000},
     "kv_chunks=24,merge_groups=3"},
    {"chunks_groups16_h16_p1_s2_f32",
     16,
     512,
     64,
     1,
     2,
     "f32",
     {0, 1, 1500, 33, 0},
     "kv_chunks=40,merge_groups=16"},
    {"chunks_wide_h2_p16_s1_f32",
     2,
     4352,
     64,
     16,
     1,
     "f32",
     {300, 0, 45},
     "kv_chunks=12,merge_groups=4"},
    // Windows (chunk_windows=1): the batch's tiles cut into equal windows,
    // requests that start inside a window (a second chunk there), lengths
    // 0 at the start, middle and end (also on a window's first tile), a
    // request longer than many windows, one window for all (few chunks),
    // one tile per window, every page size, Sq 1, 2 and 4, head groups,
    // with the merge's part groups.
    {"windows_h16_p64_s1_bf16",
     16,
     512,
     64,
     64,
     1,
     "bf16",
     {0, 1, 64, 128, 65, 3000, 2, 0, 63, 0},
     "kv_chunks=6,chunk_windows=1"},
    {"windows_h16_p1_s1_bf16",
     16,
     512,
     64,
     1,
     1,
     "bf16",
     {1500, 1, 0, 7, 32, 33},
     "kv_chunks=40,chunk_windows=1"},
    {"windows_h16_p3_s2_f32",
     16,
     512,
     64,
     3,
     2,
     "f32",
     {0, 1, 2, 3, 700, 5, 6},
     "kv_chunks=9,chunk_windows=1,chunk_balance=1024"},
    {"windows_h16_p16_s4_bf16",
     16,
     512,
     64,
     16,
     4,
     "bf16",
     {2, 4, 16, 999, 48, 0},
     "kv_chunks=1000,chunk_windows=1,chunk_balance=1048576,merge_groups=4"},
    {"windows_b1_h16_p64_s1_bf16",
     16,
     512,
     64,
     64,
     1,
     "bf16",
     {4000},
     "kv_chunks=24,chunk_windows=1"},
    {"windows_one_h16_p16_s1_bf16",
     16,
     512,
     64,
     16,
     1,
     "bf16",
     {0, 300, 0, 45, 7},
     "kv_chunks=1,chunk_windows=1"},
    {"windows_h128_p3_s1_bf16",
     128,
     512,
     64,
     3,
     1,
     "bf16",
     {0, 600, 1},
     "kv_chunks=12,chunk_windows=1"},
    // Adaptive (chunk_windows=2): request-aligned chunks where they fit one
    // wave (many chunks aimed at), windows where they do not (few).
    {"adaptive_fit_h16_p3_s2_bf16",
     16,
     512,
     64,
     3,
     2,
     "bf16",
     {0, 1, 700, 64, 1300, 5, 0},
     "kv_chunks=200,chunk_windows=2"},
    {"adaptive_windows_h16_p1_s1_f32",
     16,
     512,
     64,
     1,
     1,
     "f32",
     {0, 1500, 1, 7, 640, 33, 0},
     "kv_chunks=6,chunk_windows=2,merge_groups=4"},
    {"adaptive_windows_h128_p16_s4_bf16",
     128,
     512,
     64,
     16,
     4,
     "bf16",
     {300, 2, 0, 45},
     "kv_chunks=16,chunk_windows=2"},
    // The fused merge (fused_merge=1): the chunk that finishes a request
    // merges it; request-aligned chunks, windows and the adaptive plan,
    // one and several head groups, lengths 0 and one long request.
    {"fused_aligned_h16_p16_s4_bf16",
     16,
     512,
     64,
     16,
     4,
     "bf16",
     {2, 4, 16, 999, 48, 0},
     "kv_chunks=20,fused_merge=1"},
    {"fused_windows_h128_p3_s2_bf16",
     128,
     512,
     64,
     3,
     2,
     "bf16",
     {0, 600, 1, 1700},
     "kv_chunks=12,chunk_windows=1,head_group=32,fused_merge=1"},
    {"fused_adaptive_b1_h16_p1_s1_bf16",
     16,
     512,
     64,
     1,
     1,
     "bf16",
     {4000},
     "kv_chunks=24,chunk_windows=2,fused_merge=1"},
    {"fused_adaptive_h16_p64_s1_bf16",
     16,
     512,
     64,
     64,
     1,
     "bf16",
     {0, 1, 700, 64, 1300, 5, 0, 3000},
     "kv_chunks=40,chunk_windows=2,fused_merge=1"},
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
     "kv_chunks=0,kv_splits=1,tile_kv=16"},
    {"ds_h16_p3_splits16_f32",
     16,
     512,
     64,
     3,
     2,
     "f32",
     {200, 1, 0, 17},
     "kv_chunks=0,kv_splits=16,tile_kv=8,head_group=4"},
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
     "kv_chunks=0,kv_splits=8,head_group=4,min_workgroups=40"},
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
     "stages=2,tile_kv=32,kv_chunks=0,kv_splits=2"},
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

// Host workgroups keep their tiles on the stack. A launch from a thread
// with a small stack (here 256 KiB, an application's choice) runs on the
// runtime's workers, whose stacks are sized for the compiler's tile budget
// (GridLimits.h); the caller's own stack would overflow (3.7 MB of tiles).
struct SmallStackRun {
  Case c;
  DecodeRun r;
};

void *runOnSmallStack(void *arg) {
  auto *run = static_cast<SmallStackRun *>(arg);
  runDecode(run->c, run->r);
  return nullptr;
}

TEST(DecodeHostStack, LaunchFromASmallStackThread) {
  if (std::string(MLA_E2E_TARGET) != "host")
    GTEST_SKIP() << "host tiles on the stack: the host target only";
  SmallStackRun run{{"small_stack_h1_s1000",
                     1,
                     512,
                     64,
                     64,
                     1000,
                     "bf16",
                     {1100},
                     "kv_chunks=0,kv_splits=1"},
                    {}};
  pthread_attr_t attr;
  ASSERT_EQ(0, pthread_attr_init(&attr));
  ASSERT_EQ(0, pthread_attr_setstacksize(&attr, 256 * 1024));
  pthread_t thread;
  ASSERT_EQ(0, pthread_create(&thread, &attr, &runOnSmallStack, &run));
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  if (HasFatalFailure() || run.r.o.empty())
    FAIL() << "the launch from the small-stack thread did not complete";
  checkReference(run.c, run.r);
}

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Matrix, DecodeHost, ::testing::ValuesIn(kCases),
                         caseName);

} // namespace
} // namespace mla::e2e
