//===- EmuCheckerTest.cpp - The race checker on a real AMD kernel ---------===//
//
// The shipped gfx942 decode kernel with one gpu.barrier removed
// (mla-compile --emu-drop-barrier=N) must fail in the emulator with a race
// report naming the op; with all barriers it passes (DecodeHostTest in the
// emulator executables checks its numerics).
//
//===----------------------------------------------------------------------===//
#include "HostPackages.h"
#include "mla/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace mla::rt;

namespace {

/// Compiles decode H=16, page 64, bf16 for gfx942-emu; "" if it fails.
std::string compile(int dropBarrier) {
  std::string out = mla::rt::test::e2eTempDir() + "/drop" +
                    std::to_string(dropBarrier) + ".mlapkg";
  std::string cmd = std::string(MLA_COMPILE_PATH) +
                    " --kernel=decode --heads=16 --page-size=64 --dtype=bf16 "
                    "--target=gfx942-emu -o " +
                    out;
  if (dropBarrier >= 0)
    cmd += " --emu-drop-barrier=" + std::to_string(dropBarrier);
  cmd += " 2>/dev/null";
  return std::system(cmd.c_str()) == 0 ? out : "";
}

/// Runs the package on random data; the launch's status.
Status run(const std::string &path) {
  Expected<Package> pkg = readPackage(path);
  EXPECT_TRUE(pkg.ok()) << pkg.status().toString();
  Expected<Device> dev = Device::open("emu");
  EXPECT_TRUE(dev.ok());
  Expected<Kernel> kernel = dev->loadKernel(*pkg);
  EXPECT_TRUE(kernel.ok()) << kernel.status().toString();
  const int64_t B = 3, H = 16, D = 576, P = 64, pages = 12, maxPages = 4;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<uint16_t> q(B * H * D), kv(pages * P * D), o(B * H * 512);
  for (auto &v : q)
    v = floatToBF16(dist(rng));
  for (auto &v : kv)
    v = floatToBF16(dist(rng));
  std::vector<int32_t> table(B * maxPages);
  std::iota(table.begin(), table.end(), 0);
  std::vector<int32_t> lens = {200, 1, 65};
  std::vector<float> lse(B * H);
  DecodeArgs args;
  args.q = {q.data(), DType::BF16, {B, 1, H, D}};
  args.kv = {kv.data(), DType::BF16, {pages, P, D}};
  args.blockTable = {table.data(), DType::I32, {B, maxPages}};
  args.seqLens = {lens.data(), DType::I32, {B}};
  args.scale = 0.1352f;
  args.o = {o.data(), DType::BF16, {B, 1, H, 512}};
  args.lse = {lse.data(), DType::F32, {B, 1, H}};
  return kernel->launchDecode(args);
}

/// The barriers of the kernels before the chunks' kernel (decode_k1): the
/// plan of the length-aware schedule (decode_k0; the adaptive plan, the
/// default on gfx942) has 40 (counted in the IR before
/// mla-emulate-amdgpu): two scans of 12 (the running total's reset, the
/// block's load, 8 scan steps, the use of the prefix, the total's update),
/// the store of q after the first, the search's sums between them (11: the
/// cells' reset, the candidates' counts, 8 tree steps, the cells' update)
/// and its choice, then the header's, the windows' ends and the requests'
/// counters (fused_merge's, zeroed).
constexpr int kPlanBarriers = 40;

TEST(EmuChecker, DroppingTheBlockTableBarrierStopsAtABadOffset) {
  std::string path = compile(kPlanBarriers + 1);
  ASSERT_FALSE(path.empty());
  Status s = run(path);
  ASSERT_FALSE(s.ok());
  std::printf("barrier %d dropped: %s\n", kPlanBarriers + 1,
              s.message().c_str());
  // Whichever workgroup gets there first: the unsynchronised read of the
  // staged table, or the negative buffer offset it leads to.
  EXPECT_TRUE(s.message().find("does not fit the instruction's 32-bit") !=
                  std::string::npos ||
              s.message().find("relies on wave-synchronous LDS") !=
                  std::string::npos ||
              s.message().find("LDS race") != std::string::npos)
      << s.message();
}

TEST(EmuChecker, AllBarriersPass) {
  std::string path = compile(-1);
  ASSERT_FALSE(path.empty());
  Status s = run(path);
  EXPECT_TRUE(s.ok()) << s.toString();
}

// Five of the 8 barriers of decode_k1 whose removal the checker reports:
// 2 (the key tile's copy before the register step reads it), 3 (the step's
// end, before the next tile's copy overwrites it), 4 (the two key waves'
// m and l in the combine buffer), 5 and 6 (the waves' accumulators added
// into the accumulator tile one after the other). Barrier 1 guards the
// staged block table (the first tile's pages, staged before the key loop;
// the later tiles' are staged a tile ahead, ordered by 2 and 3): without
// it a lane reads unwritten LDS as a page index (reported as such, or as
// the negative buffer offset it leads to, depending on which workgroup's
// thread gets there first). Barrier 0 follows the fills of m and l (one
// barrier for both: independent phases share it), 7 the finish; they are
// not reported alone (docs/AMD.md). The queries (Sq = 1) are read in
// place, so no query tile is copied and none of them guards one.
TEST(EmuChecker, ADroppedBarrierIsReportedAsARace) {
  for (int k : {2, 3, 4, 5, 6}) {
    const int n = kPlanBarriers + k;
    std::string path = compile(n);
    ASSERT_FALSE(path.empty()) << "barrier " << n;
    Status s = run(path);
    ASSERT_FALSE(s.ok()) << "barrier " << n << " dropped, no report";
    const std::string &m = s.message();
    EXPECT_TRUE(m.find("LDS race at <--kernel=decode>:") != std::string::npos ||
                m.find("relies on wave-synchronous LDS") != std::string::npos)
        << "barrier " << n << ": " << m;
  }
}

// The plan's scans (3 requests: each scan runs its first pair of steps,
// d = 1 and 2, and skips the others; the search's sums run d = 2 and 1,
// within one wave of 64 lanes, which the checker does not see): dropping
// the barrier after the cached lengths (0, shared with the first cell's
// reset), the block's load (1), the first scan step (2: the second reads
// what it wrote), the use of the scan (10: the total's cell is rewritten
// after it) or the last scan's load, first step and use (26, 27, 35) is
// reported as a race on the plan's workgroup memory.
TEST(EmuChecker, ADroppedPlanBarrierIsReportedAsARace) {
  for (int n : {0, 1, 2, 10, 26, 27, 35}) {
    std::string path = compile(n);
    ASSERT_FALSE(path.empty()) << "barrier " << n;
    Status s = run(path);
    ASSERT_FALSE(s.ok()) << "plan barrier " << n << " dropped, no report";
    const std::string &m = s.message();
    EXPECT_TRUE(m.find("LDS race at <--kernel=decode>:") != std::string::npos ||
                m.find("relies on wave-synchronous LDS") != std::string::npos)
        << "plan barrier " << n << ": " << m;
  }
}

} // namespace
