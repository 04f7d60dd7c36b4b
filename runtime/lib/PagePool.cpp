//===- PagePool.cpp -------------------------------------------------------===//

#include "mla/runtime/PagePool.h"

#include <algorithm>
#include <limits>
#include <string>

using namespace mla::rt;

namespace {

constexpr int64_t kMaxLength = std::numeric_limits<int32_t>::max();

Status poolError(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, "page pool: " + message);
}

std::string requestName(int64_t request) {
  return "request " + std::to_string(request);
}

} // namespace

PagePool::PagePool(int64_t numPages, int64_t pageSize)
    : numPages(numPages), pageSize(pageSize),
      state(static_cast<size_t>(numPages), PageState::Free) {}

int32_t PagePool::takePage(PageState owner) {
  int32_t page;
  if (!freeList.empty()) {
    page = freeList.back();
    freeList.pop_back();
  } else {
    page = static_cast<int32_t>(nextFresh++);
  }
  state[page] = owner;
  return page;
}

Expected<PagePool> PagePool::create(int64_t numPages, int64_t pageSize) {
  if (numPages < 1)
    return poolError("numPages is " + std::to_string(numPages) +
                     ", must be at least 1");
  if (pageSize < 1)
    return poolError("pageSize is " + std::to_string(pageSize) +
                     ", must be at least 1");
  int64_t slots;
  if (__builtin_mul_overflow(numPages, pageSize, &slots) || slots > kMaxLength)
    return poolError("numPages x pageSize = " + std::to_string(numPages) +
                     " x " + std::to_string(pageSize) +
                     " slots do not fit in i32 (at most " +
                     std::to_string(kMaxLength) + ")");
  return PagePool(numPages, pageSize);
}

bool PagePool::hasRequest(int64_t request) const {
  return requests.count(request) != 0;
}

int64_t PagePool::length(int64_t request) const {
  auto it = requests.find(request);
  return it == requests.end() ? 0 : it->second.length;
}

const std::vector<int32_t> &PagePool::pages(int64_t request) const {
  static const std::vector<int32_t> kNone;
  auto it = requests.find(request);
  return it == requests.end() ? kNone : it->second.pages;
}

int64_t PagePool::tokensWithoutNewPages(int64_t request) const {
  auto it = requests.find(request);
  if (it == requests.end())
    return 0;
  const Request &r = it->second;
  return static_cast<int64_t>(r.pages.size()) * pageSize - r.length;
}

int64_t PagePool::tokensThatFit(int64_t request) const {
  // numPages * pageSize <= INT32_MAX: no overflow.
  int64_t fit = tokensWithoutNewPages(request) + numFreePages() * pageSize;
  return std::min(fit, kMaxLength - length(request));
}

int64_t PagePool::pagesNeeded(int64_t request, int64_t count) const {
  int64_t spare = tokensWithoutNewPages(request);
  if (count <= spare)
    return 0;
  return (count - spare + pageSize - 1) / pageSize;
}

Status PagePool::checkAppend(int64_t request, int64_t count) const {
  if (count < 0)
    return poolError("cannot append " + std::to_string(count) + " tokens to " +
                     requestName(request));
  int64_t oldLength = length(request);
  if (count > kMaxLength - oldLength)
    return poolError(requestName(request) + " would hold " +
                     std::to_string(oldLength + count) +
                     " tokens, more than an i32 length holds");
  int64_t needed = pagesNeeded(request, count);
  if (needed > numFreePages())
    return poolError("the pool is exhausted: " + requestName(request) +
                     " needs " + std::to_string(needed) + " more pages for " +
                     std::to_string(count) + " tokens, " +
                     std::to_string(numFreePages()) + " of " +
                     std::to_string(numPages) + " are free");
  return Status::success();
}

Status PagePool::appendTokens(int64_t request, int64_t count, int32_t *slots) {
  if (Status status = checkAppend(request, count); !status.ok())
    return status;
  if (count > 0 && !slots)
    return poolError("slots is null");
  int64_t needed = pagesNeeded(request, count);
  Request &r = requests[request];
  r.pages.reserve(r.pages.size() + static_cast<size_t>(needed));
  for (int64_t p = 0; p < needed; ++p)
    r.pages.push_back(takePage(PageState::Request));
  for (int64_t i = 0; i < count; ++i) {
    int64_t t = r.length + i;
    slots[i] =
        static_cast<int32_t>(r.pages[t / pageSize] * pageSize + t % pageSize);
  }
  r.length += count;
  return Status::success();
}

Expected<std::vector<int32_t>> PagePool::appendTokens(int64_t request,
                                                      int64_t count) {
  // Checked first: no allocation for a count the pool cannot take.
  if (Status status = checkAppend(request, count); !status.ok())
    return status;
  std::vector<int32_t> slots(static_cast<size_t>(count));
  if (Status status = appendTokens(request, count, slots.data()); !status.ok())
    return status;
  return slots;
}

Status PagePool::freeRequest(int64_t request) {
  auto it = requests.find(request);
  if (it == requests.end())
    return poolError(requestName(request) + " is not in the pool");
  // In reverse, so that the request's first page is handed out next.
  const std::vector<int32_t> &used = it->second.pages;
  for (auto page = used.rbegin(); page != used.rend(); ++page) {
    state[*page] = PageState::Free;
    freeList.push_back(*page);
  }
  requests.erase(it);
  return Status::success();
}

Expected<std::vector<int32_t>> PagePool::allocatePages(int64_t count) {
  if (count < 0)
    return poolError("cannot allocate " + std::to_string(count) + " pages");
  if (count > numFreePages())
    return poolError("the pool is exhausted: " + std::to_string(count) +
                     " pages requested, " + std::to_string(numFreePages()) +
                     " of " + std::to_string(numPages) + " are free");
  std::vector<int32_t> taken;
  taken.reserve(static_cast<size_t>(count));
  for (int64_t p = 0; p < count; ++p)
    taken.push_back(takePage(PageState::Loose));
  return taken;
}

Status PagePool::freePages(const std::vector<int32_t> &pages) {
  for (size_t i = 0; i < pages.size(); ++i) {
    int32_t page = pages[i];
    std::string where =
        "pages[" + std::to_string(i) + "] = " + std::to_string(page);
    if (page < 0 || page >= numPages)
      return poolError(where + " is outside the pool (" +
                       std::to_string(numPages) + " pages)");
    if (state[page] == PageState::Free)
      return poolError(where + " is not allocated");
    if (state[page] == PageState::Request)
      return poolError(where +
                       " belongs to a request (free it with freeRequest)");
    if (std::find(pages.begin(), pages.begin() + i, page) != pages.begin() + i)
      return poolError(where + " is listed twice");
  }
  for (auto page = pages.rbegin(); page != pages.rend(); ++page) {
    state[*page] = PageState::Free;
    freeList.push_back(*page);
  }
  return Status::success();
}

int64_t PagePool::maxPages(const std::vector<int64_t> &ids) const {
  int64_t most = 0;
  for (int64_t request : ids)
    most = std::max(most, static_cast<int64_t>(pages(request).size()));
  return most;
}

Status PagePool::exportBlockTable(const std::vector<int64_t> &ids,
                                  int64_t maxPagesPerSeq, int32_t *blockTable,
                                  int32_t *seqLens) const {
  if (maxPagesPerSeq < 1)
    return poolError("maxPagesPerSeq is " + std::to_string(maxPagesPerSeq) +
                     ", must be at least 1");
  for (size_t b = 0; b < ids.size(); ++b) {
    std::string where =
        "requests[" + std::to_string(b) + "] (" + requestName(ids[b]) + ")";
    auto it = requests.find(ids[b]);
    if (it == requests.end())
      return poolError(where + " is not in the pool");
    int64_t used = static_cast<int64_t>(it->second.pages.size());
    if (used > maxPagesPerSeq)
      return poolError(where + " holds " + std::to_string(used) +
                       " pages, more than maxPagesPerSeq " +
                       std::to_string(maxPagesPerSeq));
  }
  for (size_t b = 0; b < ids.size(); ++b) {
    const Request &r = requests.find(ids[b])->second;
    if (blockTable) {
      int32_t *row = blockTable + b * static_cast<size_t>(maxPagesPerSeq);
      std::copy(r.pages.begin(), r.pages.end(), row);
      std::fill(row + r.pages.size(), row + maxPagesPerSeq, 0);
    }
    if (seqLens)
      seqLens[b] = static_cast<int32_t>(r.length);
  }
  return Status::success();
}

Expected<PagePool::BlockTable>
PagePool::exportBlockTable(const std::vector<int64_t> &ids,
                           int64_t maxPagesPerSeq) const {
  if (maxPagesPerSeq == 0)
    maxPagesPerSeq = std::max<int64_t>(1, maxPages(ids));
  int64_t batch = static_cast<int64_t>(ids.size());
  if (maxPagesPerSeq < 1)
    return poolError("maxPagesPerSeq is " + std::to_string(maxPagesPerSeq) +
                     ", must be at least 1");
  Expected<HostTensor> table =
      HostTensor::allocate(DType::I32, {batch, maxPagesPerSeq});
  if (!table.ok())
    return table.status();
  Expected<HostTensor> lens = HostTensor::allocate(DType::I32, {batch});
  if (!lens.ok())
    return lens.status();
  if (Status status =
          exportBlockTable(ids, maxPagesPerSeq, table->dataAs<int32_t>(),
                           lens->dataAs<int32_t>());
      !status.ok())
    return status;
  return BlockTable{table.take(), lens.take()};
}
