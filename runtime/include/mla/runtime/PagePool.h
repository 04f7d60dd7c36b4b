//===- PagePool.h - Page allocation for a paged KV cache --------*- C++ -*-===//
//
// A PagePool hands out the page indices of one KV page pool kv[num_pages,
// page_size, row] and keeps each request's block table: the pages its tokens
// live in, in token order. Token t of a request lives in row t % page_size of
// page pages[t / page_size], i.e. at slot pages[t / page_size] * page_size +
// t % page_size of the pool viewed as [num_pages * page_size, row]. The slots
// of newly appended tokens are the slot_mapping an append_kv kernel consumes;
// exportBlockTable writes the block_table / seq_lens a decode kernel reads.
//
// The pool only manages indices; the memory is the caller's (any device).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_PAGEPOOL_H
#define MLA_RUNTIME_PAGEPOOL_H

#include "mla/runtime/Status.h"
#include "mla/runtime/Tensor.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace mla::rt {

/// Page indices of one page pool and the block tables of its requests.
/// Requests are identified by any int64 id the caller chooses. Pages are
/// handed out from a free list: page 0 first on a fresh pool, then the most
/// recently freed page first. On error nothing changes.
///
/// Movable and copyable (a copy is an independent snapshot); not
/// synchronized: guard concurrent use yourself.
class PagePool {
public:
  /// numPages >= 1, pageSize >= 1, and numPages * pageSize <= INT32_MAX (so
  /// that every slot and page index fits the kernels' i32 slot mappings and
  /// block tables).
  static Expected<PagePool> create(int64_t numPages, int64_t pageSize);

  int64_t getNumPages() const { return numPages; }
  int64_t getPageSize() const { return pageSize; }
  int64_t numFreePages() const {
    return static_cast<int64_t>(freeList.size()) + numPages - nextFresh;
  }
  int64_t numUsedPages() const { return numPages - numFreePages(); }
  int64_t numRequests() const { return static_cast<int64_t>(requests.size()); }

  /// Whether `request` holds a block table (appendTokens was called for it,
  /// even with 0 tokens, and freeRequest was not).
  bool hasRequest(int64_t request) const;
  /// Tokens of `request`; 0 for an unknown request.
  int64_t length(int64_t request) const;
  /// The pages of `request` in token order; empty for an unknown request.
  const std::vector<int32_t> &pages(int64_t request) const;

  /// Tokens `request` can still take without a new page (the free rows of
  /// its last page); 0 for an unknown request.
  int64_t tokensWithoutNewPages(int64_t request) const;
  /// Tokens appendTokens(request, n) accepts right now: the free rows of its
  /// last page plus every free page (bounded by the i32 length limit).
  int64_t tokensThatFit(int64_t request) const;
  /// New pages appendTokens(request, count) would take (count >= 0).
  int64_t pagesNeeded(int64_t request, int64_t count) const;

  /// Appends `count` (>= 0) tokens to `request` (created if unknown), taking
  /// new pages as needed, and returns their slots, in token order. Fails,
  /// changing nothing, when the pool has too few free pages or the request
  /// would exceed INT32_MAX tokens.
  Expected<std::vector<int32_t>> appendTokens(int64_t request, int64_t count);
  /// The same, writing the `count` slots to `slots` (which may be null when
  /// count is 0).
  Status appendTokens(int64_t request, int64_t count, int32_t *slots);

  /// Returns every page of `request` to the free list and forgets it
  /// (InvalidArgument for an unknown request).
  Status freeRequest(int64_t request);

  /// Pages outside any request (e.g. for a caller-managed shared prefix):
  /// takes `count` free pages, or fails and takes none.
  Expected<std::vector<int32_t>> allocatePages(int64_t count);
  /// Returns pages from allocatePages; each must be such a page, listed
  /// once. On error none is freed.
  Status freePages(const std::vector<int32_t> &pages);

  /// The most pages any of `requests` holds (the narrowest block table for
  /// them); 0 for none.
  int64_t maxPages(const std::vector<int64_t> &requests) const;

  /// Writes the block table i32 [requests.size(), maxPagesPerSeq] and
  /// seq_lens i32 [requests.size()] of `requests` (each known, any order,
  /// repeats allowed) to caller memory. Entries past a request's pages are 0,
  /// a valid page, so that kernels may read them harmlessly. Fails (writing
  /// nothing) when a request is unknown or holds more than maxPagesPerSeq
  /// pages. Either pointer may be null to skip that output.
  Status exportBlockTable(const std::vector<int64_t> &requests,
                          int64_t maxPagesPerSeq, int32_t *blockTable,
                          int32_t *seqLens) const;

  struct BlockTable {
    /// i32 [batch, maxPagesPerSeq].
    HostTensor blockTable;
    /// i32 [batch].
    HostTensor seqLens;
  };
  /// exportBlockTable into new host tensors; maxPagesPerSeq 0 means
  /// max(1, maxPages(requests)).
  Expected<BlockTable> exportBlockTable(const std::vector<int64_t> &requests,
                                        int64_t maxPagesPerSeq = 0) const;

private:
  PagePool(int64_t numPages, int64_t pageSize);

  struct Request {
    int64_t length = 0;
    std::vector<int32_t> pages;
  };
  enum class PageState : uint8_t { Free, Request, Loose };
  /// The errors of appendTokens, changing nothing.
  Status checkAppend(int64_t request, int64_t count) const;
  /// Takes a free page (there must be one) for `owner`.
  int32_t takePage(PageState owner);

  int64_t numPages = 0;
  int64_t pageSize = 1;
  /// Freed pages; the back is handed out next, before any fresh page.
  std::vector<int32_t> freeList;
  /// Pages [nextFresh, numPages) were never handed out (lowest first).
  int64_t nextFresh = 0;
  std::vector<PageState> state;
  std::unordered_map<int64_t, Request> requests;
};

} // namespace mla::rt

#endif // MLA_RUNTIME_PAGEPOOL_H
