//===- CApiPagePool.cpp - The C API's page pool (mla_page_pool_*) ---------===//
//
// The mla_page_pool_* entry points over PagePool.
//
//===----------------------------------------------------------------------===//

#include "CApiInternal.h"

#include <algorithm>
#include <string>
#include <vector>

using namespace mla::rt;
using namespace mla::rt::capi;

extern "C" mla_status mla_page_pool_create(int64_t num_pages, int64_t page_size,
                                           mla_page_pool **out) {
  return guarded("mla_page_pool_create", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_create", out);
    Expected<PagePool> pool = PagePool::create(num_pages, page_size);
    if (!pool.ok())
      return pool.status();
    *out = new mla_page_pool{pool.take()};
    return Status::success();
  });
}

extern "C" void mla_page_pool_destroy(mla_page_pool *pool) { delete pool; }

extern "C" mla_status mla_page_pool_append_tokens(mla_page_pool *pool,
                                                  int64_t request,
                                                  int64_t count,
                                                  int32_t *slots) {
  return guarded("mla_page_pool_append_tokens", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_append_tokens", pool);
    if (count > 0 && !slots)
      return nullArg("mla_page_pool_append_tokens", "slots");
    return pool->pool.appendTokens(request, count, slots);
  });
}

extern "C" mla_status mla_page_pool_free_request(mla_page_pool *pool,
                                                 int64_t request) {
  return guarded("mla_page_pool_free_request", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_free_request", pool);
    return pool->pool.freeRequest(request);
  });
}

extern "C" mla_status mla_page_pool_allocate_pages(mla_page_pool *pool,
                                                   int64_t count,
                                                   int32_t *pages) {
  return guarded("mla_page_pool_allocate_pages", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_allocate_pages", pool);
    if (count > 0 && !pages)
      return nullArg("mla_page_pool_allocate_pages", "pages");
    Expected<std::vector<int32_t>> taken = pool->pool.allocatePages(count);
    if (!taken.ok())
      return taken.status();
    std::copy(taken->begin(), taken->end(), pages);
    return Status::success();
  });
}

extern "C" mla_status mla_page_pool_free_pages(mla_page_pool *pool,
                                               const int32_t *pages,
                                               int64_t count) {
  return guarded("mla_page_pool_free_pages", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_free_pages", pool);
    if (count < 0)
      return invalid("mla_page_pool_free_pages: count is " +
                     std::to_string(count));
    if (count > 0 && !pages)
      return nullArg("mla_page_pool_free_pages", "pages");
    return pool->pool.freePages(std::vector<int32_t>(pages, pages + count));
  });
}

extern "C" mla_status mla_page_pool_get_info(const mla_page_pool *pool,
                                             mla_page_pool_info *out) {
  return guarded("mla_page_pool_get_info", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_get_info", pool);
    MLA_REQUIRE("mla_page_pool_get_info", out);
    const PagePool &p = pool->pool;
    *out = {p.getNumPages(), p.getPageSize(), p.numFreePages(),
            p.numRequests()};
    return Status::success();
  });
}

extern "C" mla_status mla_page_pool_request_info(const mla_page_pool *pool,
                                                 int64_t request,
                                                 mla_request_info *out) {
  return guarded("mla_page_pool_request_info", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_request_info", pool);
    MLA_REQUIRE("mla_page_pool_request_info", out);
    const PagePool &p = pool->pool;
    *out = {p.hasRequest(request), p.length(request),
            static_cast<int64_t>(p.pages(request).size()),
            p.tokensWithoutNewPages(request), p.tokensThatFit(request)};
    return Status::success();
  });
}

extern "C" mla_status mla_page_pool_max_pages(const mla_page_pool *pool,
                                              const int64_t *requests,
                                              size_t count, int64_t *out) {
  return guarded("mla_page_pool_max_pages", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_max_pages", pool);
    MLA_REQUIRE("mla_page_pool_max_pages", out);
    if (count && !requests)
      return nullArg("mla_page_pool_max_pages", "requests");
    *out =
        pool->pool.maxPages(std::vector<int64_t>(requests, requests + count));
    return Status::success();
  });
}

extern "C" mla_status mla_page_pool_export_block_table(
    const mla_page_pool *pool, const int64_t *requests, size_t count,
    int64_t max_pages_per_seq, int32_t *block_table, int32_t *seq_lens) {
  return guarded("mla_page_pool_export_block_table", [&]() -> Status {
    MLA_REQUIRE("mla_page_pool_export_block_table", pool);
    if (count && !requests)
      return nullArg("mla_page_pool_export_block_table", "requests");
    return pool->pool.exportBlockTable(
        std::vector<int64_t>(requests, requests + count), max_pages_per_seq,
        block_table, seq_lens);
  });
}
