//===- CApiKindsTest.cpp - The C API: prefill, merge, append_kv, pools ----===//
//
// The convenience launchers of the kinds other than decode (run on the f32
// stand-ins of KindTestKernels.cpp, checked against references here) and
// the page pool functions of mla_runtime.h.
//
//===----------------------------------------------------------------------===//

#include "CApiTestUtils.h"
#include "TestUtils.h"

#include "mla/runtime/mla_runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>

using namespace mla::rt;
using namespace mla::rt::test;

//===----------------------------------------------------------------------===//
// Prefill, merge and append_kv through their convenience launchers
//===----------------------------------------------------------------------===//

namespace {

const char *const kMergeManifest = R"(mla-manifest 1
kernel merge
function merge
dtype f32
heads 2
v_dim 8
parts 2
arg 0 o_parts memref f32 2,?,2,8
arg 1 lse_parts memref f32 2,2,?
arg 2 o memref f32 ?,2,8
arg 3 lse memref f32 2,?
target host-x86_64 code.host-x86_64
launch mla_test_merge args 0,1,2,3 grid arg2.0,2,1
end-target
)";

const char *const kAppendManifest = R"(mla-manifest 1
kernel append_kv
function append_kv
dtype f32
latent_dim 16
rope_dim 8
page_size 3
arg 0 kv_new memref f32 ?,24
arg 1 slot_mapping memref i32 ?
arg 2 kv memref f32 ?,3,24
target host-x86_64 code.host-x86_64
launch mla_test_append_kv args 0,1,2 grid arg0.0,1,1
end-target
)";

const char *const kPrefillManifest = R"(mla-manifest 1
kernel prefill
function prefill
dtype f32
heads 3
qk_dim 12
v_dim 8
causal 1
config tile_q=1
arg 0 q memref f32 ?,3,12
arg 1 k memref f32 ?,3,12
arg 2 v memref f32 ?,3,8
arg 3 cu_seqlens_q memref i32 ?
arg 4 cu_seqlens_k memref i32 ?
arg 5 scale scalar f32
arg 6 o memref f32 ?,3,8
arg 7 lse memref f32 3,?
target host-x86_64 code.host-x86_64
launch mla_test_prefill args 0,1,2,3,4,5,6,7 grid arg0.0,3,arg3.0-1
end-target
)";

} // namespace

namespace {

/// float64 merge of `parts` partial results: o [T,H,D], lse [H,T].
void expectMerged(const HostTensor &oParts, const HostTensor &lseParts,
                  const HostTensor &o, const HostTensor &lse) {
  const auto &shape = oParts.getShape();
  int64_t parts = shape[0], rows = shape[1], heads = shape[2], dim = shape[3];
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<double> l(parts);
      double m = -INFINITY, sum = 0;
      for (int64_t s = 0; s < parts; ++s) {
        l[s] = lseParts.dataAs<float>()[(s * heads + h) * rows + t];
        m = std::max(m, l[s]);
      }
      for (int64_t s = 0; s < parts; ++s)
        sum += std::exp(l[s] - m);
      double total = m + std::log(sum);
      EXPECT_NEAR(lse.dataAs<float>()[h * rows + t], total, 1e-5)
          << t << "," << h;
      for (int64_t d = 0; d < dim; ++d) {
        double ref = 0;
        for (int64_t s = 0; s < parts; ++s)
          ref += std::exp(l[s] - total) *
                 oParts.dataAs<float>()[((s * rows + t) * heads + h) * dim + d];
        EXPECT_NEAR(o.dataAs<float>()[(t * heads + h) * dim + d], ref, 1e-5)
            << t << "," << h << "," << d;
      }
    }
}

} // namespace

TEST(CApiKindsTest, MergeMatchesTheReference) {
  Loaded k;
  loadKindKernel(kMergeManifest, k);
  std::mt19937 rng(5);
  const int64_t rows = 5, heads = 2, dim = 8;
  HostTensor oParts = f32Tensor({2, rows, heads, dim}, rng);
  HostTensor lseParts = f32Tensor({2, heads, rows}, rng);
  lseParts.dataAs<float>()[heads * rows + 3] = -INFINITY; // an empty part
  HostTensor o = f32Tensor({rows, heads, dim}, rng);
  HostTensor lse = f32Tensor({heads, rows}, rng);
  mla_merge_args args{toC(oParts), toC(lseParts), toC(o), toC(lse)};
  ASSERT_EQ(mla_launch_merge(k.kernel, &args, nullptr), MLA_OK) << lastError();
  expectMerged(oParts, lseParts, o, lse);

  // Validation names the argument; skip_validation skips the static dims
  // (this kernel merges any number of parts).
  HostTensor threeParts = f32Tensor({3, rows, heads, dim}, rng);
  HostTensor threeLse = f32Tensor({3, heads, rows}, rng);
  args.o_parts = toC(threeParts);
  args.lse_parts = toC(threeLse);
  EXPECT_EQ(mla_launch_merge(k.kernel, &args, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "o_parts: dim 0 is 3, expected 2");
  mla_launch_options options{};
  options.skip_validation = 1;
  ASSERT_EQ(mla_launch_merge(k.kernel, &args, &options), MLA_OK) << lastError();
  expectMerged(threeParts, threeLse, o, lse);
  // Skipping validation keeps the checks the runtime relies on.
  args.lse = toC(oParts);
  EXPECT_EQ(mla_launch_merge(k.kernel, &args, &options),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "lse: expected rank 2, got 4");
  EXPECT_EQ(mla_launch_merge(k.kernel, nullptr, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_launch_merge: args is null");
  EXPECT_EQ(mla_launch_merge(nullptr, &args, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_launch_merge: kernel is null");
}

TEST(CApiKindsTest, AppendKvWritesTheSlotsAPagePoolHandsOut) {
  Loaded k;
  loadKindKernel(kAppendManifest, k);
  const int64_t numPages = 6, pageSize = 3, row = 24;
  mla_page_pool *pool = nullptr;
  ASSERT_EQ(mla_page_pool_create(numPages, pageSize, &pool), MLA_OK);
  HostTensor kv =
      HostTensor::allocate(DType::F32, {numPages, pageSize, row}).take();
  std::mt19937 rng(9);
  // Two requests grow in turns; each turn's rows go in with one launch.
  std::map<int64_t, std::vector<std::vector<float>>> written;
  for (auto [request, count] :
       {std::pair<int64_t, int64_t>{1, 4}, {2, 2}, {1, 3}, {2, 5}}) {
    std::vector<int32_t> slots(count);
    ASSERT_EQ(mla_page_pool_append_tokens(pool, request, count, slots.data()),
              MLA_OK)
        << lastError();
    HostTensor kvNew = f32Tensor({count, row}, rng);
    HostTensor mapping = i32Tensor(slots);
    mla_append_kv_args args{toC(kvNew), toC(mapping), toC(kv)};
    ASSERT_EQ(mla_launch_append_kv(k.kernel, &args, nullptr), MLA_OK)
        << lastError();
    for (int64_t t = 0; t < count; ++t)
      written[request].emplace_back(kvNew.dataAs<float>() + t * row,
                                    kvNew.dataAs<float>() + (t + 1) * row);
  }
  // Every token's row is where the exported block table says.
  int64_t requests[2] = {1, 2};
  int32_t table[2 * 4], lens[2];
  ASSERT_EQ(mla_page_pool_export_block_table(pool, requests, 2, 4, table, lens),
            MLA_OK)
      << lastError();
  for (int b = 0; b < 2; ++b) {
    ASSERT_EQ(lens[b], static_cast<int32_t>(written[requests[b]].size()));
    for (int32_t t = 0; t < lens[b]; ++t) {
      int64_t slot = table[b * 4 + t / pageSize] * pageSize + t % pageSize;
      for (int64_t d = 0; d < row; ++d)
        ASSERT_EQ(kv.dataAs<float>()[slot * row + d],
                  written[requests[b]][t][d])
            << "request " << requests[b] << " token " << t;
    }
  }
  mla_page_pool_destroy(pool);

  mla_append_kv_args bad{};
  HostTensor kvNew = f32Tensor({2, 16}, rng);
  HostTensor mapping = i32Tensor({0, 1});
  bad = {toC(kvNew), toC(mapping), toC(kv)};
  EXPECT_EQ(mla_launch_append_kv(k.kernel, &bad, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "kv_new: dim 1 is 16, expected 24");
}

TEST(CApiKindsTest, PrefillMatchesTheReference) {
  Loaded k;
  loadKindKernel(kPrefillManifest, k);
  int64_t value = 0;
  ASSERT_EQ(mla_kernel_header_int(k.kernel, "qk_dim", &value), MLA_OK);
  EXPECT_EQ(value, 12);
  ASSERT_EQ(mla_kernel_header_int(k.kernel, "causal", &value), MLA_OK);
  EXPECT_EQ(value, 1);
  std::mt19937 rng(13);
  const int64_t heads = 3, dqk = 12, dv = 8;
  // Two requests: 3 queries over 7 keys (chunked: keys longer), 4 over 4.
  std::vector<int32_t> cuQ = {0, 3, 7}, cuK = {0, 7, 11};
  const int64_t tq = 7, tk = 11;
  HostTensor q = f32Tensor({tq, heads, dqk}, rng);
  HostTensor kT = f32Tensor({tk, heads, dqk}, rng);
  HostTensor v = f32Tensor({tk, heads, dv}, rng);
  HostTensor cuQT = i32Tensor(cuQ), cuKT = i32Tensor(cuK);
  HostTensor o = f32Tensor({tq, heads, dv}, rng);
  HostTensor lse = f32Tensor({heads, tq}, rng);
  float scale = 0.3f;
  mla_prefill_args args{toC(q),    toC(kT), toC(v), toC(cuQT),
                        toC(cuKT), scale,   toC(o), toC(lse)};
  mla_prefill_args unscaled = args;
  unscaled.scale = 0.0f;
  EXPECT_EQ(mla_launch_prefill(k.kernel, &unscaled, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError().rfind("scale: 0 is not a softmax scale", 0), 0u)
      << lastError();
  ASSERT_EQ(mla_launch_prefill(k.kernel, &args, nullptr), MLA_OK)
      << lastError();
  for (int b = 0; b < 2; ++b) {
    int64_t lq = cuQ[b + 1] - cuQ[b], lk = cuK[b + 1] - cuK[b];
    for (int64_t i = 0; i < lq; ++i)
      for (int64_t h = 0; h < heads; ++h) {
        int64_t qi = cuQ[b] + i;
        int64_t visible = i + lk - lq + 1; // bottom-right causal
        std::vector<double> s(visible);
        double m = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < dqk; ++d)
            dot += double(q.dataAs<float>()[(qi * heads + h) * dqk + d]) *
                   kT.dataAs<float>()[((cuK[b] + j) * heads + h) * dqk + d];
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        double sum = 0;
        std::vector<double> acc(dv, 0.0);
        for (int64_t j = 0; j < visible; ++j) {
          double w = std::exp(s[j] - m);
          sum += w;
          for (int64_t d = 0; d < dv; ++d)
            acc[d] +=
                w * v.dataAs<float>()[((cuK[b] + j) * heads + h) * dv + d];
        }
        EXPECT_NEAR(lse.dataAs<float>()[h * tq + qi], m + std::log(sum), 1e-4);
        for (int64_t d = 0; d < dv; ++d)
          EXPECT_NEAR(o.dataAs<float>()[(qi * heads + h) * dv + d],
                      acc[d] / sum, 1e-5);
      }
  }
  args.cu_seqlens_k.dtype = MLA_DTYPE_I64;
  EXPECT_EQ(mla_launch_prefill(k.kernel, &args, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "cu_seqlens_k: expected dtype i32, got i64");
  args.cu_seqlens_k.dtype = MLA_DTYPE_I32;
  args.lse.shape[0] = 2;
  EXPECT_EQ(mla_launch_prefill(k.kernel, &args, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "lse: dim 0 is 2, expected 3");
}

//===----------------------------------------------------------------------===//
// Page pool
//===----------------------------------------------------------------------===//

TEST(CApiPagePoolTest, EveryFunction) {
  mla_page_pool *pool = nullptr;
  EXPECT_EQ(mla_page_pool_create(0, 16, &pool), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "page pool: numPages is 0, must be at least 1");
  EXPECT_EQ(mla_page_pool_create(8, 0, &pool), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "page pool: pageSize is 0, must be at least 1");
  EXPECT_EQ(mla_page_pool_create(8, 2, nullptr), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_page_pool_create: out is null");
  EXPECT_EQ(pool, nullptr);
  ASSERT_EQ(mla_page_pool_create(8, 2, &pool), MLA_OK);

  mla_page_pool_info info;
  ASSERT_EQ(mla_page_pool_get_info(pool, &info), MLA_OK);
  EXPECT_EQ(info.num_pages, 8);
  EXPECT_EQ(info.page_size, 2);
  EXPECT_EQ(info.free_pages, 8);
  EXPECT_EQ(info.num_requests, 0);

  int32_t slots[16];
  ASSERT_EQ(mla_page_pool_append_tokens(pool, 5, 3, slots), MLA_OK);
  EXPECT_EQ(std::vector<int32_t>(slots, slots + 3),
            (std::vector<int32_t>{0, 1, 2}));
  ASSERT_EQ(mla_page_pool_append_tokens(pool, 6, 0, nullptr), MLA_OK);
  int32_t loose[2];
  ASSERT_EQ(mla_page_pool_allocate_pages(pool, 2, loose), MLA_OK);
  EXPECT_EQ(loose[0], 2);
  EXPECT_EQ(loose[1], 3);
  ASSERT_EQ(mla_page_pool_append_tokens(pool, 5, 2, slots), MLA_OK);
  EXPECT_EQ(std::vector<int32_t>(slots, slots + 2),
            (std::vector<int32_t>{3, 8}));

  mla_request_info r;
  ASSERT_EQ(mla_page_pool_request_info(pool, 5, &r), MLA_OK);
  EXPECT_EQ(r.exists, 1);
  EXPECT_EQ(r.length, 5);
  EXPECT_EQ(r.num_pages, 3);
  EXPECT_EQ(r.tokens_without_new_pages, 1);
  EXPECT_EQ(r.tokens_that_fit, 1 + 3 * 2);
  ASSERT_EQ(mla_page_pool_request_info(pool, 99, &r), MLA_OK);
  EXPECT_EQ(r.exists, 0);
  EXPECT_EQ(r.length, 0);
  EXPECT_EQ(r.tokens_that_fit, 6);
  ASSERT_EQ(mla_page_pool_get_info(pool, &info), MLA_OK);
  EXPECT_EQ(info.free_pages, 3);
  EXPECT_EQ(info.num_requests, 2);

  int64_t ids[2] = {6, 5}, most = 0;
  ASSERT_EQ(mla_page_pool_max_pages(pool, ids, 2, &most), MLA_OK);
  EXPECT_EQ(most, 3);
  int32_t table[2 * 3], lens[2];
  ASSERT_EQ(mla_page_pool_export_block_table(pool, ids, 2, 3, table, lens),
            MLA_OK);
  EXPECT_EQ(std::vector<int32_t>(table, table + 6),
            (std::vector<int32_t>{0, 0, 0, 0, 1, 4}));
  EXPECT_EQ(lens[0], 0);
  EXPECT_EQ(lens[1], 5);
  ASSERT_EQ(mla_page_pool_export_block_table(pool, ids, 2, 3, nullptr, lens),
            MLA_OK);

  // Exhaustion changes nothing.
  EXPECT_EQ(mla_page_pool_append_tokens(pool, 6, 7, slots),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "page pool: the pool is exhausted: request 6 needs 4 "
                         "more pages for 7 tokens, 3 of 8 are free");
  ASSERT_EQ(mla_page_pool_request_info(pool, 6, &r), MLA_OK);
  EXPECT_EQ(r.length, 0);
  EXPECT_EQ(mla_page_pool_allocate_pages(pool, 4, loose),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "page pool: the pool is exhausted: 4 pages "
                         "requested, 3 of 8 are free");

  // Errors name the argument.
  EXPECT_EQ(mla_page_pool_export_block_table(pool, ids, 2, 2, table, lens),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "page pool: requests[1] (request 5) holds 3 pages, "
                         "more than maxPagesPerSeq 2");
  int64_t unknown[1] = {77};
  EXPECT_EQ(mla_page_pool_export_block_table(pool, unknown, 1, 2, table, lens),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(),
            "page pool: requests[0] (request 77) is not in the pool");
  EXPECT_EQ(mla_page_pool_export_block_table(pool, nullptr, 1, 2, table, lens),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_page_pool_export_block_table: requests is null");
  EXPECT_EQ(mla_page_pool_append_tokens(pool, 5, 2, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_page_pool_append_tokens: slots is null");
  EXPECT_EQ(mla_page_pool_append_tokens(pool, 5, -2, slots),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "page pool: cannot append -2 tokens to request 5");
  EXPECT_EQ(mla_page_pool_free_request(pool, 77), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "page pool: request 77 is not in the pool");
  int32_t notLoose[1] = {0};
  EXPECT_EQ(mla_page_pool_free_pages(pool, notLoose, 1),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "page pool: pages[0] = 0 belongs to a request (free "
                         "it with freeRequest)");
  EXPECT_EQ(mla_page_pool_free_pages(pool, nullptr, 1),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_page_pool_free_pages: pages is null");
  EXPECT_EQ(mla_page_pool_free_pages(pool, loose, -1),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_page_pool_free_pages: count is -1");
  EXPECT_EQ(mla_page_pool_allocate_pages(pool, 1, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_page_pool_allocate_pages: pages is null");
  EXPECT_EQ(mla_page_pool_max_pages(pool, nullptr, 1, &most),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_page_pool_max_pages: requests is null");
  for (mla_status status :
       {mla_page_pool_append_tokens(nullptr, 1, 0, nullptr),
        mla_page_pool_free_request(nullptr, 1),
        mla_page_pool_allocate_pages(nullptr, 0, nullptr),
        mla_page_pool_free_pages(nullptr, nullptr, 0),
        mla_page_pool_get_info(nullptr, &info),
        mla_page_pool_request_info(nullptr, 1, &r),
        mla_page_pool_max_pages(nullptr, ids, 1, &most),
        mla_page_pool_export_block_table(nullptr, ids, 1, 1, table, lens)})
    EXPECT_EQ(status, MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_page_pool_export_block_table: pool is null");
  EXPECT_EQ(mla_page_pool_get_info(pool, nullptr), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "mla_page_pool_get_info: out is null");

  // Freeing returns the pages.
  ASSERT_EQ(mla_page_pool_free_pages(pool, loose, 2), MLA_OK);
  ASSERT_EQ(mla_page_pool_free_request(pool, 5), MLA_OK);
  ASSERT_EQ(mla_page_pool_get_info(pool, &info), MLA_OK);
  EXPECT_EQ(info.free_pages, 8);
  EXPECT_EQ(info.num_requests, 1);
  mla_page_pool_destroy(pool);
  mla_page_pool_destroy(nullptr);
}
