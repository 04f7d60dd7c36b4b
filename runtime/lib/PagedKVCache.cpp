//===- PagedKVCache.cpp ---------------------------------------------------===//

#include "mla/runtime/PagedKVCache.h"

#include <algorithm>
#include <limits>
#include <string>

using namespace mla::rt;

static Status cacheError(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, message);
}

PagedKVCache::PagedKVCache(const PagedKVCacheConfig &config, PagePool pagePool,
                           HostTensor pool, HostTensor table,
                           HostTensor lengths)
    : config(config), pool(std::move(pool)), table(std::move(table)),
      lengths(std::move(lengths)), pagePool(std::move(pagePool)) {
  std::fill_n(this->table.dataAs<int32_t>(), this->table.numElements(), -1);
}

Expected<PagedKVCache> PagedKVCache::create(const PagedKVCacheConfig &config) {
  std::pair<const char *, int64_t> counts[] = {
      {"numPages", config.numPages},
      {"pageSize", config.pageSize},
      {"rowDim", config.rowDim},
      {"batch", config.batch},
      {"maxPagesPerSeq", config.maxPagesPerSeq}};
  for (auto [name, value] : counts)
    if (value < 1)
      return cacheError(std::string("paged KV cache: ") + name + " is " +
                        std::to_string(value) + ", must be positive");
  if (config.numPages > std::numeric_limits<int32_t>::max())
    return cacheError("paged KV cache: numPages " +
                      std::to_string(config.numPages) +
                      " does not fit in an i32 block table");
  Expected<PagePool> pagePool =
      PagePool::create(config.numPages, config.pageSize);
  if (!pagePool.ok())
    return pagePool.status().withContext("paged KV cache");
  Expected<HostTensor> pool = HostTensor::allocate(
      config.dtype, {config.numPages, config.pageSize, config.rowDim});
  if (!pool.ok())
    return pool.status().withContext("paged KV cache pages");
  Expected<HostTensor> table =
      HostTensor::allocate(DType::I32, {config.batch, config.maxPagesPerSeq});
  if (!table.ok())
    return table.status().withContext("paged KV cache block table");
  Expected<HostTensor> lengths =
      HostTensor::allocate(DType::I32, {config.batch});
  if (!lengths.ok())
    return lengths.status().withContext("paged KV cache lengths");
  return PagedKVCache(config, pagePool.take(), pool.take(), table.take(),
                      lengths.take());
}

Status PagedKVCache::checkSeq(int64_t seq) const {
  if (seq >= 0 && seq < config.batch)
    return Status::success();
  return cacheError("sequence " + std::to_string(seq) +
                    " is out of range (batch " + std::to_string(config.batch) +
                    ")");
}

int64_t PagedKVCache::length(int64_t seq) const {
  return checkSeq(seq).ok() ? lengths.dataAs<int32_t>()[seq] : -1;
}

Status PagedKVCache::append(int64_t seq, int64_t count) {
  if (Status status = checkSeq(seq); !status.ok())
    return status;
  if (count < 0)
    return cacheError("cannot append " + std::to_string(count) + " tokens");
  int64_t oldLength = length(seq);
  // Lengths are i32.
  int64_t capacity;
  if (__builtin_mul_overflow(config.maxPagesPerSeq, config.pageSize,
                             &capacity) ||
      capacity > std::numeric_limits<int32_t>::max())
    capacity = std::numeric_limits<int32_t>::max();
  if (count > capacity - oldLength)
    return cacheError("sequence " + std::to_string(seq) + " would hold " +
                      std::to_string(oldLength + count) +
                      " tokens, more than its block table row holds (" +
                      std::to_string(capacity) + ")");
  int64_t oldPages = (oldLength + config.pageSize - 1) / config.pageSize;
  int64_t newLength = oldLength + count;
  int64_t newPages = (newLength + config.pageSize - 1) / config.pageSize;
  if (newPages - oldPages > numFreePages())
    return cacheError("the page pool is exhausted: sequence " +
                      std::to_string(seq) + " needs " +
                      std::to_string(newPages - oldPages) + " more pages, " +
                      std::to_string(numFreePages()) + " are free");
  // The checks above cover the pool's (same lengths, same free pages).
  Status appended = pagePool.appendTokens(seq, count).status();
  if (!appended.ok())
    return appended;
  int32_t *row = table.dataAs<int32_t>() + seq * config.maxPagesPerSeq;
  const std::vector<int32_t> &pages = pagePool.pages(seq);
  for (int64_t p = oldPages; p < newPages; ++p)
    row[p] = pages[p];
  lengths.dataAs<int32_t>()[seq] = static_cast<int32_t>(newLength);
  return Status::success();
}

Status PagedKVCache::release(int64_t seq) {
  if (Status status = checkSeq(seq); !status.ok())
    return status;
  int64_t pages = (length(seq) + config.pageSize - 1) / config.pageSize;
  if (pagePool.hasRequest(seq))
    if (Status status = pagePool.freeRequest(seq); !status.ok())
      return status;
  int32_t *row = table.dataAs<int32_t>() + seq * config.maxPagesPerSeq;
  std::fill_n(row, pages, -1);
  lengths.dataAs<int32_t>()[seq] = 0;
  return Status::success();
}

Expected<void *> PagedKVCache::tokenRow(int64_t seq, int64_t pos) const {
  if (Status status = checkSeq(seq); !status.ok())
    return status;
  if (pos < 0 || pos >= length(seq))
    return cacheError("token " + std::to_string(pos) + " of sequence " +
                      std::to_string(seq) + " is out of range (length " +
                      std::to_string(length(seq)) + ")");
  int32_t page = table.dataAs<int32_t>()[seq * config.maxPagesPerSeq +
                                         pos / config.pageSize];
  int64_t row = page * config.pageSize + pos % config.pageSize;
  return static_cast<void *>(pool.dataAs<uint8_t>() +
                             row * config.rowDim * dtypeSize(config.dtype));
}
