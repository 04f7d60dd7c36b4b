//===- PagedKVCache.h - A host-memory paged KV cache ------------*- C++ -*-===//

#ifndef MLA_RUNTIME_PAGEDKVCACHE_H
#define MLA_RUNTIME_PAGEDKVCACHE_H

#include "mla/runtime/DType.h"
#include "mla/runtime/PagePool.h"
#include "mla/runtime/Status.h"
#include "mla/runtime/Tensor.h"

#include <cstdint>
#include <vector>

namespace mla::rt {

struct PagedKVCacheConfig {
  DType dtype = DType::BF16;
  int64_t numPages = 0;
  int64_t pageSize = 0;
  /// Elements per token row (latent_dim + rope_dim for MLA).
  int64_t rowDim = 0;
  /// Sequences (block table rows).
  int64_t batch = 0;
  /// Block table columns.
  int64_t maxPagesPerSeq = 0;
};

/// The three tensors a decode kernel reads, in host memory:
///   kv          [numPages, pageSize, rowDim] of `dtype` (zeroed);
///   blockTable  i32 [batch, maxPagesPerSeq]: token t of sequence s lives in
///               row t % pageSize of page blockTable[s][t / pageSize];
///               entries past a sequence's pages are -1;
///   seqLens     i32 [batch].
/// Pages come from a PagePool (sequence s is request s): page 0 first on a
/// fresh cache, then the most recently released page first. Movable, not
/// copyable; not synchronized: guard concurrent mutation yourself, and do not
/// mutate while a launch reads the views.
class PagedKVCache {
public:
  /// Every count must be positive and numPages must fit in int32.
  static Expected<PagedKVCache> create(const PagedKVCacheConfig &config);

  const PagedKVCacheConfig &getConfig() const { return config; }
  TensorView kv() const { return pool.view(); }
  TensorView blockTable() const { return table.view(); }
  TensorView seqLens() const { return lengths.view(); }

  /// Tokens in sequence `seq`; -1 if `seq` is out of range.
  int64_t length(int64_t seq) const;
  int64_t numFreePages() const { return pagePool.numFreePages(); }
  /// The page allocator behind the block table.
  const PagePool &getPagePool() const { return pagePool; }

  /// Grows sequence `seq` by `count` tokens, taking pages from the free list
  /// as needed. On error nothing changes.
  Status append(int64_t seq, int64_t count);

  /// Returns the pages of sequence `seq` to the free list; its length
  /// becomes 0.
  Status release(int64_t seq);

  /// The rowDim elements of token `pos` (< length(seq)) of sequence `seq`.
  Expected<void *> tokenRow(int64_t seq, int64_t pos) const;

private:
  PagedKVCache(const PagedKVCacheConfig &config, PagePool pagePool,
               HostTensor pool, HostTensor table, HostTensor lengths);
  Status checkSeq(int64_t seq) const;

  PagedKVCacheConfig config;
  HostTensor pool;
  HostTensor table;
  HostTensor lengths;
  PagePool pagePool;
};

} // namespace mla::rt

#endif // MLA_RUNTIME_PAGEDKVCACHE_H
