//===- DecodeChunksTest.cpp - decode's length-aware schedule ---------------===//
//
// The length-aware schedule (#mla.config kv_chunks) beyond the numerics of
// the case matrix (DecodeHostTest.cpp): the same bits whatever the grid,
// adaptive plans against their rule and the cut they choose, and the plan
// reused across the layers of a decode step.
//
//===----------------------------------------------------------------------===//
#include "DecodeHarness.h"

#include <gtest/gtest.h>

#include "mla/runtime/ChunkSchedule.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>

namespace mla::e2e {
namespace {

// The length-aware schedule's result depends on the lengths alone: the
// same inputs give the same bits whatever the number of workgroups that
// take the chunks in turn (one per possible chunk, one, three, many), for
// request-aligned chunks and for windows (one workgroup per window, or
// workgroups that take the windows in turn). The fused merge
// (fused_merge=1: the workgroup whose chunk finishes a request merges it,
// whichever that is) gives the bits of the merge launch.
TEST(DecodeChunks, BitIdenticalWhateverTheGrid) {
  const std::vector<int32_t> lens = {0, 1, 700, 64, 1300, 5, 0, 129};
  std::map<std::string, DecodeRun> unfused;
  for (std::string cut : {"", ",chunk_windows=1", ",fused_merge=1",
                          ",chunk_windows=1,fused_merge=1"}) {
    const bool fused = cut.find("fused") != std::string::npos;
    const bool windows = cut.find("windows") != std::string::npos;
    const std::string prefix = std::string(fused ? "grid_fused" : "grid") +
                               (windows ? "_windows_wg" : "_wg");
    DecodeRun base;
    Case c{prefix + "0",         16,    512, 64, 16, 2, "bf16", lens,
           "kv_chunks=10" + cut, "grid"};
    ASSERT_NO_FATAL_FAILURE(runDecode(c, base));
    checkReference(c, base);
    if (fused)
      expectSameBits(base, unfused.at(windows ? "windows" : "aligned"),
                     c.perfConfig);
    else
      unfused[windows ? "windows" : "aligned"] = base;
    for (int64_t wg : {1, 3, 64}) {
      Case w = c;
      w.name = prefix + std::to_string(wg);
      w.perfConfig += ",workgroups=" + std::to_string(wg);
      DecodeRun r;
      ASSERT_NO_FATAL_FAILURE(runDecode(w, r));
      expectSameBits(r, base, w.perfConfig);
    }
  }
}

// Adaptive plans (chunk_windows=2) write the chunks of one of the two cuts,
// with the same q: where request-aligned chunks fit one wave (K <= kv_chunks
// for one head group, no refinement), the same bits as chunk_windows=0;
// where they do not, the same bits as chunk_windows=1.
TEST(DecodeChunks, AdaptiveMatchesTheCutItChooses) {
  struct Choice {
    std::vector<int32_t> lens;
    std::string chunks, same;
  };
  // 32 chunks aimed at: q = max(ceil(T / 32), ceil(sqrt(T / 16))), at
  // least the adaptive plan's 128 keys (kMinChunkKeys, 2·T > 32 here;
  // ceil(T / 32) binds); the first batch's request-aligned chunks fit (32 on the host,
  // 32 with the GPU's 32-key tiles), the second's (one long request among
  // 40 of one key: 56, 61) do not.
  std::vector<int32_t> manyShort(40, 1);
  manyShort.push_back(4000);
  const std::vector<Choice> choices = {
      {{0, 1, 1050, 96, 1950, 7, 0, 193}, "kv_chunks=32", "chunk_windows=0"},
      {manyShort, "kv_chunks=32", "chunk_windows=1"}};
  int index = 0;
  for (const Choice &ch : choices) {
    const std::string tag = std::to_string(index++);
    Case a{"adaptive_choice" + tag,
           16,
           512,
           64,
           16,
           1,
           "bf16",
           ch.lens,
           ch.chunks + ",chunk_windows=2",
           "adaptive_choice" + tag};
    Case same = a;
    same.name = "adaptive_same" + tag;
    same.perfConfig = ch.chunks + "," + ch.same;
    DecodeRun ra, rs;
    ASSERT_NO_FATAL_FAILURE(runDecode(a, ra));
    checkReference(a, ra);
    ASSERT_NO_FATAL_FAILURE(runDecode(same, rs));
    expectSameBits(ra, rs, "adaptive against " + ch.same);
  }
}

/// What an adaptive plan (chunk_windows=2) holds for `lens` by its rule
/// (mla.chunk_plan in MLAOps.td; kMergeChunks, kMinChunkKeys and
/// kAdaptiveSearch in
/// ChunkSchedule.h), computed here apart from the compiler: the least q
/// of the search whose request-aligned chunks number at most `chunks`,
/// else the windows of the least q.
struct AdaptivePlan {
  int64_t q = 0, k = 0;
  bool windows = false;
  std::vector<int64_t> firstChunk; ///< C_b for b = 0..B (row 0 from 2)
  std::vector<int64_t> row2;       ///< C_b·q (request-aligned) or P_b
  /// Rows 3-7 for each window w = 0..chunks - 1: its first chunk, that
  /// chunk's request, first key, key end and request length (zeros but
  /// row 3 where no chunk with keys opens it).
  std::vector<std::array<int64_t, 5>> opening;
};

AdaptivePlan adaptiveRule(const std::vector<int32_t> &lens, int64_t tileKv,
                          int64_t chunks) {
  using namespace mla::rt::schedule;
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const int64_t batch = static_cast<int64_t>(lens.size());
  std::vector<int64_t> tiles;
  int64_t total = 0;
  for (int32_t len : lens) {
    tiles.push_back(ceilDiv(std::max<int32_t>(len, 0), tileKv));
    total += tiles.back();
  }
  const int64_t q0 = std::max(
      {int64_t{1}, ceilDiv(total, chunks),
       ceilDiv(total, std::max<int64_t>(batch, 1) * kMergeChunks),
       2 * total > chunks ? ceilDiv(kMinChunkKeys, tileKv) : int64_t{1}});
  AdaptivePlan plan;
  auto fill = [&](auto chunksOf, auto row2Of) {
    int64_t first = 0;
    for (int64_t b = 0; b < batch; ++b) {
      plan.firstChunk.push_back(first);
      plan.row2.push_back(row2Of(b, first));
      first += chunksOf(b);
    }
    plan.firstChunk.push_back(first);
    plan.k = first;
  };
  for (int64_t q = q0; q < q0 + kAdaptiveSearch; ++q) {
    int64_t k = 0;
    for (int64_t t : tiles)
      k += std::max<int64_t>(1, ceilDiv(t, q));
    if (k > chunks)
      continue;
    plan.q = q;
    fill([&](int64_t b) { return std::max<int64_t>(1, ceilDiv(tiles[b], q)); },
         [&](int64_t, int64_t first) { return first * q; });
    // Window w is chunk w: chunk j of request b holds tiles [j·q,
    // min((j + 1)·q, T_b)).
    for (int64_t w = 0; w < chunks; ++w) {
      std::array<int64_t, 5> o = {std::min(w, plan.k), 0, 0, 0, 0};
      for (int64_t b = 0; b < batch && w < plan.k; ++b)
        if (plan.firstChunk[b] <= w && w < plan.firstChunk[b + 1]) {
          const int64_t len = std::max<int32_t>(lens[b], 0);
          const int64_t j = w - plan.firstChunk[b];
          o = {w, b, j * q * tileKv,
               std::min(len, std::min(tiles[b], (j + 1) * q) * tileKv), len};
        }
      plan.opening.push_back(o);
    }
    return plan;
  }
  plan.q = q0;
  plan.windows = true;
  std::vector<int64_t> start(batch, 0);
  for (int64_t b = 1; b < batch; ++b)
    start[b] = start[b - 1] + tiles[b - 1];
  fill(
      [&](int64_t b) {
        if (tiles[b] == 0)
          return int64_t{1};
        return (start[b] + tiles[b] - 1) / q0 - start[b] / q0 + 1;
      },
      [&](int64_t b, int64_t) { return start[b]; });
  // Window w's tiles [w·q, (w + 1)·q) of the batch: its first chunk is
  // that of the request with keys holding tile w·q (chunk 0 for w = 0);
  // past the last window, K.
  const int64_t used = ceilDiv(total, q0);
  for (int64_t w = 0; w < chunks; ++w) {
    std::array<int64_t, 5> o = {w == 0 ? 0 : plan.k, 0, 0, 0, 0};
    for (int64_t b = 0; b < batch && w < used; ++b) {
      const int64_t from = w * q0;
      if (tiles[b] == 0 || from < start[b] || from >= start[b] + tiles[b])
        continue;
      if (w == 0 && b != 0)
        break; // chunk 0, request 0's without keys
      const int64_t len = std::max<int32_t>(lens[b], 0);
      o = {plan.firstChunk[b] + w - start[b] / q0, b,
           (from - start[b]) * tileKv,
           std::min(len, std::min(tiles[b], from + q0 - start[b]) * tileKv),
           len};
    }
    plan.opening.push_back(o);
  }
  return plan;
}

// Adaptive plans (chunk_windows=2) follow their rule: the plan a launch
// leaves in a caller workspace (the plan is the first workspace: K, q, each
// request's first chunk, and row 2) against adaptiveRule, on batches where
// the merge's bound sets q (one long request), where the search takes a
// larger q than the least, where no q of the search fits (windows), with
// no keys at all (no least chunk: 2·T <= chunks), with more requests
// than chunks (at the least chunk, 128 keys = 8 tiles of 16) and with more
// requests than the plan kernel caches (300); every result against the
// float64 reference.
TEST(DecodeChunks, AdaptivePlanFollowsItsRule) {
  constexpr int64_t kTileKv = 16;
  struct Rule {
    std::string name;
    int64_t page, qLen, chunks;
    std::vector<int32_t> lens;
    int64_t q;
    bool windows;
  };
  std::vector<int32_t> oneLong(40, 1);
  oneLong.push_back(2000);
  // More requests than the plan keeps in workgroup memory (256): its scans
  // read the lengths and first tiles from global memory instead.
  std::vector<int32_t> beyondCache;
  for (int32_t b = 0; b < 300; ++b)
    beyondCache.push_back((b * 7) % 33);
  const std::vector<Rule> rules = {
      {"merge_bound", 16, 1, 200, {9000}, 9, false},
      {"searched", 3, 2, 12, std::vector<int32_t>(10, 160), 10, false},
      {"windows", 1, 1, 16, oneLong, 11, true},
      {"no_keys", 64, 1, 16, {0, 0, 0}, 1, false},
      {"many_requests", 16, 1, 16, std::vector<int32_t>(20, 16), 8, true},
      {"beyond_cache", 16, 1, 16, beyondCache, 28, true},
  };
  for (const Rule &rule : rules) {
    Case c{"adaptive_rule_" + rule.name,
           16,
           512,
           64,
           rule.page,
           rule.qLen,
           "bf16",
           rule.lens,
           "chunk_windows=2,head_group=16,tile_kv=" + std::to_string(kTileKv) +
               ",kv_chunks=" + std::to_string(rule.chunks)};
    SCOPED_TRACE(c.name);
    const AdaptivePlan want = adaptiveRule(rule.lens, kTileKv, rule.chunks);
    // The rule as this test states it, so that the cases keep covering
    // each branch.
    ASSERT_EQ(want.q, rule.q);
    ASSERT_EQ(want.windows, rule.windows);
    std::optional<Kernel> kernel;
    ASSERT_NO_FATAL_FAILURE(loadDecode(c, kernel));
    Workspace workspace;
    DecodeRun r;
    ASSERT_NO_FATAL_FAILURE(runDecodeWith(*kernel, c, r, {}, &workspace));
    checkReference(c, r);
    const auto *plan = reinterpret_cast<const int32_t *>(workspace.data);
    const int64_t batch = static_cast<int64_t>(rule.lens.size());
    const int64_t row = batch + rule.chunks + mla::rt::schedule::kPlanHeader;
    ASSERT_GE(workspace.bytes,
              sizeof(int32_t) * mla::rt::schedule::planRows(true) * row);
    EXPECT_EQ(plan[0], want.k) << "K";
    EXPECT_EQ(plan[1], want.q) << "q";
    for (int64_t b = 0; b <= batch; ++b)
      EXPECT_EQ(plan[2 + b], want.firstChunk[b]) << "C_b, b = " << b;
    for (int64_t b = 0; b < batch; ++b)
      EXPECT_EQ(plan[2 * row + b], want.row2[b]) << "row 2, b = " << b;
    for (int64_t w = 0; w < rule.chunks; ++w)
      for (int64_t r = 0; r < 5; ++r)
        EXPECT_EQ(plan[(3 + r) * row + w], want.opening[w][r])
            << "row " << 3 + r << ", window " << w;
  }
}

// One workspace across launches whose lengths change (as a CUDA graph
// replays its launches with new lengths): each launch's plan rewrites
// every row its chunks read, so no earlier launch's plan leaks into the
// next one, whichever cut the plan chooses; requests whose lengths drop to
// zero (the first among them) get o 0 and lse -inf. With fused_merge the
// requests' counters return to zero after every launch (else a later
// launch would merge too early or never).
TEST(DecodeChunks, ChangedLengthsInOneWorkspace) {
  const std::vector<std::vector<int32_t>> batches = {
      {400, 250, 310, 520, 180, 290, 330, 240},
      {300, 150, 210, 420, 80, 190, 230, 140},
      {0, 150, 0, 420, 80, 0, 230, 140},
      {0, 0, 0, 0, 0, 0, 0, 0},
      {2000, 0, 1, 0, 64, 0, 0, 3},
      {400, 250, 310, 520, 180, 290, 330, 240}};
  const std::vector<std::string> cuts = {
      "kv_chunks=12,chunk_windows=0",
      "kv_chunks=12,chunk_windows=1",
      "kv_chunks=12,chunk_windows=2",
      "kv_chunks=256,merge_groups=4,chunk_windows=2",
      "kv_chunks=12,chunk_windows=0,fused_merge=1",
      "kv_chunks=12,chunk_windows=2,fused_merge=1"};
  for (size_t k = 0; k < cuts.size(); ++k) {
    Case c{"relen_" + std::to_string(k),
           16,
           512,
           64,
           64,
           2,
           "bf16",
           batches[0],
           cuts[k]};
    std::optional<Kernel> kernel;
    ASSERT_NO_FATAL_FAILURE(loadDecode(c, kernel));
    Workspace workspace;
    for (size_t i = 0; i < batches.size(); ++i) {
      SCOPED_TRACE(cuts[k] + ", launch " + std::to_string(i));
      Case l = c;
      l.name += "_" + std::to_string(i);
      l.lens = batches[i];
      DecodeRun r;
      ASSERT_NO_FATAL_FAILURE(runDecodeWith(*kernel, l, r, {}, &workspace));
      checkReference(l, r);
    }
  }
}

// Decode's plan of chunks depends on seq_lens alone: the layers of a decode
// step can share it (LaunchOptions::reusePlan, as FlashMLA's callers share
// one scheduler metadata). Layer 0 computes it in a caller workspace; the
// later layers, with other q, cache and block table but the same lengths,
// skip the plan launch and match the reference and a full launch bit for
// bit. A kernel without a plan (fixed split-KV) ignores the option.
TEST(DecodeChunks, ReusedPlanAcrossLayers) {
  const std::vector<int32_t> lens = {0, 1, 700, 64, 1300, 5, 129};
  Case c{"reuse_layer0", 16, 512, 64, 16, 1, "bf16", lens, "kv_chunks=10"};
  std::optional<Kernel> kernel;
  ASSERT_NO_FATAL_FAILURE(loadDecode(c, kernel));
  EXPECT_EQ(kernel->planLaunches(), 1u);
  Workspace workspace;
  LaunchOptions reuse;
  reuse.reusePlan = true;
  // A workspace that holds no plan yet (zeros: no chunks): the plan launch
  // is skipped, so every request merges no part (o 0, lse -inf).
  DecodeRun unplanned;
  ASSERT_NO_FATAL_FAILURE(
      runDecodeWith(*kernel, c, unplanned, reuse, &workspace));
  for (float lse : unplanned.lse)
    ASSERT_EQ(lse, -INFINITY) << "a launch reusing no plan found chunks";
  DecodeRun layer0;
  ASSERT_NO_FATAL_FAILURE(runDecodeWith(*kernel, c, layer0, {}, &workspace));
  checkReference(c, layer0);
  for (int layer = 1; layer <= 2; ++layer) {
    Case l = c;
    l.name = "reuse_layer" + std::to_string(layer);
    DecodeRun reused, full;
    ASSERT_NO_FATAL_FAILURE(
        runDecodeWith(*kernel, l, reused, reuse, &workspace));
    checkReference(l, reused);
    ASSERT_NO_FATAL_FAILURE(runDecodeWith(*kernel, l, full));
    expectSameBits(reused, full, "layer " + std::to_string(layer));
  }
  // The host's pooled workspace holds no earlier plan: it is computed.
  DecodeRun pooled;
  ASSERT_NO_FATAL_FAILURE(runDecodeWith(*kernel, c, pooled, reuse));
  checkReference(c, pooled);

  Case fixed = c;
  fixed.name = "reuse_fixed";
  fixed.perfConfig = "kv_chunks=0,kv_splits=3";
  std::optional<Kernel> split;
  ASSERT_NO_FATAL_FAILURE(loadDecode(fixed, split));
  EXPECT_EQ(split->planLaunches(), 0u);
  Workspace splitWorkspace;
  DecodeRun r;
  ASSERT_NO_FATAL_FAILURE(
      runDecodeWith(*split, fixed, r, reuse, &splitWorkspace));
  checkReference(fixed, r);
}
} // namespace
} // namespace mla::e2e
