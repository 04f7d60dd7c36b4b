//===- PagePoolTest.cpp ---------------------------------------------------===//

#include "TestUtils.h"

#include "mla/runtime/PagePool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

using namespace mla::rt;
using namespace mla::rt::test;

TEST(PagePoolTest, CreateChecksItsArguments) {
  EXPECT_EQ(PagePool::create(0, 16).status().message(),
            "page pool: numPages is 0, must be at least 1");
  EXPECT_EQ(PagePool::create(4, 0).status().message(),
            "page pool: pageSize is 0, must be at least 1");
  EXPECT_EQ(PagePool::create(4, -3).status().code(),
            ErrorCode::InvalidArgument);
  EXPECT_EQ(PagePool::create(1 << 20, 1 << 12).status().message(),
            "page pool: numPages x pageSize = 1048576 x 4096 slots do not "
            "fit in i32 (at most 2147483647)");
  // The largest pool: page indices are handed out lazily.
  Expected<PagePool> pool = PagePool::create(1 << 24, 127);
  ASSERT_TRUE(pool.ok()) << pool.status().toString();
  EXPECT_EQ(pool->numFreePages(), 1 << 24);
  EXPECT_EQ(pool->tokensThatFit(0), int64_t(127) << 24);
  EXPECT_EQ(pool->appendTokens(0, 129)->back(), 127 + 1);
  EXPECT_EQ(pool->pages(0), (std::vector<int32_t>{0, 1}));
}

TEST(PagePoolTest, SlotsAndBlockTablesAsRequestsGrow) {
  PagePool pool = PagePool::create(6, 4).take();
  EXPECT_EQ(pool.getNumPages(), 6);
  EXPECT_EQ(pool.getPageSize(), 4);
  EXPECT_EQ(pool.tokensThatFit(7), 24);

  // Request 7: 5 tokens on pages 0, 1.
  EXPECT_EQ(*pool.appendTokens(7, 5), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(pool.pages(7), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(pool.tokensWithoutNewPages(7), 3);
  // Request -2: 2 tokens on page 2.
  EXPECT_EQ(*pool.appendTokens(-2, 2), (std::vector<int32_t>{8, 9}));
  // Request 7 fills page 1 and takes page 3.
  EXPECT_EQ(*pool.appendTokens(7, 4), (std::vector<int32_t>{5, 6, 7, 12}));
  EXPECT_EQ(pool.length(7), 9);
  EXPECT_EQ(pool.pages(7), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(pool.numFreePages(), 2);
  EXPECT_EQ(pool.numUsedPages(), 4);
  EXPECT_EQ(pool.numRequests(), 2);
  EXPECT_EQ(pool.tokensWithoutNewPages(7), 3);
  EXPECT_EQ(pool.tokensThatFit(7), 3 + 8);
  EXPECT_EQ(pool.pagesNeeded(7, 3), 0);
  EXPECT_EQ(pool.pagesNeeded(7, 4), 1);
  EXPECT_EQ(pool.pagesNeeded(7, 12), 3);

  // A zero-token append registers a request without pages.
  EXPECT_TRUE(pool.appendTokens(11, 0)->empty());
  EXPECT_TRUE(pool.hasRequest(11));
  EXPECT_EQ(pool.tokensWithoutNewPages(11), 0);

  EXPECT_EQ(pool.maxPages({-2, 7, 11}), 3);
  Expected<PagePool::BlockTable> exported = pool.exportBlockTable({-2, 7, 11});
  ASSERT_TRUE(exported.ok()) << exported.status().toString();
  EXPECT_EQ(exported->blockTable.getShape(), (std::vector<int64_t>{3, 3}));
  const int32_t *table = exported->blockTable.dataAs<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(table, table + 9),
            (std::vector<int32_t>{2, 0, 0, 0, 1, 3, 0, 0, 0}));
  const int32_t *lens = exported->seqLens.dataAs<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(lens, lens + 3),
            (std::vector<int32_t>{2, 9, 0}));

  // Freed pages are handed out again, the request's first page first.
  ASSERT_TRUE(pool.freeRequest(7).ok());
  EXPECT_FALSE(pool.hasRequest(7));
  EXPECT_EQ(pool.length(7), 0);
  EXPECT_EQ(pool.numFreePages(), 5);
  EXPECT_EQ(*pool.appendTokens(8, 9),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 12}));
}

TEST(PagePoolTest, PageSizeOne) {
  PagePool pool = PagePool::create(5, 1).take();
  EXPECT_EQ(*pool.appendTokens(1, 2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(*pool.appendTokens(2, 1), (std::vector<int32_t>{2}));
  EXPECT_EQ(*pool.appendTokens(1, 1), (std::vector<int32_t>{3}));
  EXPECT_EQ(pool.pages(1), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(pool.tokensWithoutNewPages(1), 0);
  EXPECT_EQ(pool.tokensThatFit(1), 1);
  EXPECT_EQ(pool.appendTokens(2, 2).status().message(),
            "page pool: the pool is exhausted: request 2 needs 2 more pages "
            "for 2 tokens, 1 of 5 are free");
}

TEST(PagePoolTest, ErrorsChangeNothing) {
  PagePool pool = PagePool::create(3, 4).take();
  ASSERT_TRUE(pool.appendTokens(1, 6).ok());
  EXPECT_EQ(pool.appendTokens(2, 7).status().message(),
            "page pool: the pool is exhausted: request 2 needs 2 more pages "
            "for 7 tokens, 1 of 3 are free");
  EXPECT_FALSE(pool.hasRequest(2));
  EXPECT_EQ(pool.appendTokens(1, 7).status().message(),
            "page pool: the pool is exhausted: request 1 needs 2 more pages "
            "for 7 tokens, 1 of 3 are free");
  EXPECT_EQ(pool.length(1), 6);
  EXPECT_EQ(pool.numFreePages(), 1);
  EXPECT_EQ(pool.appendTokens(1, -1).status().message(),
            "page pool: cannot append -1 tokens to request 1");
  EXPECT_EQ(pool.appendTokens(1, 2, nullptr).message(),
            "page pool: slots is null");
  EXPECT_EQ(pool.freeRequest(5).message(),
            "page pool: request 5 is not in the pool");
  EXPECT_EQ(pool.exportBlockTable({1, 5}).status().message(),
            "page pool: requests[1] (request 5) is not in the pool");
  EXPECT_EQ(pool.exportBlockTable({1}, 1).status().message(),
            "page pool: requests[0] (request 1) holds 2 pages, more than "
            "maxPagesPerSeq 1");
  int32_t table[2] = {-7, -7};
  EXPECT_EQ(pool.exportBlockTable({1}, -1, table, nullptr).message(),
            "page pool: maxPagesPerSeq is -1, must be at least 1");
  EXPECT_EQ(table[0], -7);
  EXPECT_EQ(pool.length(1), 6);
  EXPECT_EQ(pool.numFreePages(), 1);

  // The i32 length limit (checked before the pool's capacity).
  EXPECT_EQ(pool.appendTokens(3, int64_t(INT32_MAX) + 1).status().message(),
            "page pool: request 3 would hold 2147483648 tokens, more than an "
            "i32 length holds");
}

TEST(PagePoolTest, LoosePages) {
  PagePool pool = PagePool::create(4, 2).take();
  ASSERT_TRUE(pool.appendTokens(1, 1).ok()); // page 0
  Expected<std::vector<int32_t>> loose = pool.allocatePages(2);
  ASSERT_TRUE(loose.ok());
  EXPECT_EQ(*loose, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(pool.allocatePages(2).status().message(),
            "page pool: the pool is exhausted: 2 pages requested, 1 of 4 are "
            "free");
  EXPECT_EQ(pool.allocatePages(-1).status().message(),
            "page pool: cannot allocate -1 pages");
  EXPECT_EQ(pool.freePages({1, 0}).message(),
            "page pool: pages[1] = 0 belongs to a request (free it with "
            "freeRequest)");
  EXPECT_EQ(pool.freePages({1, 3}).message(),
            "page pool: pages[1] = 3 is not allocated");
  EXPECT_EQ(pool.freePages({2, 2}).message(),
            "page pool: pages[1] = 2 is listed twice");
  EXPECT_EQ(pool.freePages({4}).message(),
            "page pool: pages[0] = 4 is outside the pool (4 pages)");
  EXPECT_EQ(pool.numFreePages(), 1);
  ASSERT_TRUE(pool.freePages(*loose).ok());
  EXPECT_EQ(pool.numFreePages(), 3);
  EXPECT_EQ(pool.freePages({1}).message(),
            "page pool: pages[0] = 1 is not allocated");
}

// Thousands of random appends, frees and loose allocations, checked after
// every step against a model that only records each request's slots and the
// loose pages.
TEST(PagePoolTest, RandomSequencesAgainstAModel) {
  std::mt19937 rng(1234);
  for (int64_t pageSize : {1, 3, 16, 64}) {
    SCOPED_TRACE("page size " + std::to_string(pageSize));
    const int64_t numPages = pageSize == 1 ? 64 : 40;
    PagePool pool = PagePool::create(numPages, pageSize).take();
    std::map<int64_t, std::vector<int32_t>> model; // request -> slots
    std::set<int32_t> loosePages;
    std::vector<std::vector<int32_t>> looseGroups;
    int exhausted = 0;
    for (int step = 0; step < 3000; ++step) {
      int op = std::uniform_int_distribution<int>(0, 99)(rng);
      int64_t request =
          std::uniform_int_distribution<int64_t>(0, 11)(rng) * 1000003 - 5;
      if (op < 65) {
        int64_t count = std::uniform_int_distribution<int64_t>(
            0, pageSize * (op < 10 ? 12 : 2) + 2)(rng);
        // What the model says must happen.
        const std::vector<int32_t> &slots = model[request];
        int64_t length = static_cast<int64_t>(slots.size());
        int64_t pagesHeld = (length + pageSize - 1) / pageSize;
        int64_t pagesAfter = (length + count + pageSize - 1) / pageSize;
        int64_t usedPages = static_cast<int64_t>(loosePages.size());
        for (const auto &entry : model)
          usedPages +=
              (static_cast<int64_t>(entry.second.size()) + pageSize - 1) /
              pageSize;
        bool fits = pagesAfter - pagesHeld <= numPages - usedPages;
        ASSERT_EQ(pool.tokensThatFit(request) >= count, fits);
        Expected<std::vector<int32_t>> got = pool.appendTokens(request, count);
        ASSERT_EQ(got.ok(), fits) << got.status().toString();
        if (!fits) {
          ++exhausted;
          EXPECT_EQ(got.status().code(), ErrorCode::InvalidArgument);
          if (length == 0 && !pool.hasRequest(request))
            model.erase(request);
        } else {
          ASSERT_EQ(static_cast<int64_t>(got->size()), count);
          // New tokens continue the last page, then fill new pages.
          std::vector<int32_t> &modelSlots = model[request];
          for (int64_t i = 0; i < count; ++i) {
            int64_t t = length + i;
            int32_t slot = (*got)[i];
            ASSERT_EQ(slot % pageSize, t % pageSize);
            if (t % pageSize != 0) {
              ASSERT_EQ(slot, modelSlots.back() + 1);
            }
            modelSlots.push_back(slot);
          }
        }
      } else if (op < 85) {
        auto it = model.find(request);
        Status status = pool.freeRequest(request);
        ASSERT_EQ(status.ok(), it != model.end()) << status.toString();
        if (it != model.end())
          model.erase(it);
      } else if (op < 93) {
        int64_t count = std::uniform_int_distribution<int64_t>(0, 3)(rng);
        bool fits = count <= pool.numFreePages();
        Expected<std::vector<int32_t>> pages = pool.allocatePages(count);
        ASSERT_EQ(pages.ok(), fits);
        if (fits) {
          for (int32_t page : *pages)
            ASSERT_TRUE(loosePages.insert(page).second) << page;
          looseGroups.push_back(*pages);
        }
      } else if (!looseGroups.empty()) {
        size_t g = std::uniform_int_distribution<size_t>(0, looseGroups.size() -
                                                                1)(rng);
        ASSERT_TRUE(pool.freePages(looseGroups[g]).ok());
        ASSERT_FALSE(pool.freePages(looseGroups[g]).ok() &&
                     !looseGroups[g].empty());
        for (int32_t page : looseGroups[g])
          loosePages.erase(page);
        looseGroups.erase(looseGroups.begin() + g);
      }

      // Invariants.
      std::set<int32_t> usedPages = loosePages;
      std::set<int32_t> usedSlots;
      ASSERT_EQ(pool.numRequests(), static_cast<int64_t>(model.size()));
      for (const auto &[id, slots] : model) {
        int64_t length = static_cast<int64_t>(slots.size());
        ASSERT_TRUE(pool.hasRequest(id));
        ASSERT_EQ(pool.length(id), length);
        const std::vector<int32_t> &pages = pool.pages(id);
        ASSERT_EQ(static_cast<int64_t>(pages.size()),
                  (length + pageSize - 1) / pageSize);
        ASSERT_EQ(pool.tokensWithoutNewPages(id),
                  static_cast<int64_t>(pages.size()) * pageSize - length);
        for (int64_t t = 0; t < length; ++t) {
          ASSERT_EQ(slots[t], pages[t / pageSize] * pageSize + t % pageSize);
          ASSERT_TRUE(usedSlots.insert(slots[t]).second)
              << "slot " << slots[t] << " used twice";
        }
        for (int32_t page : pages) {
          ASSERT_GE(page, 0);
          ASSERT_LT(page, numPages);
          ASSERT_TRUE(usedPages.insert(page).second)
              << "page " << page << " held twice";
        }
      }
      ASSERT_EQ(pool.numFreePages(),
                numPages - static_cast<int64_t>(usedPages.size()));
    }
    EXPECT_GT(exhausted, 10) << "the sequence never exhausted the pool";

    // The export of every request matches the model.
    std::vector<int64_t> ids;
    for (const auto &entry : model)
      ids.push_back(entry.first);
    Expected<PagePool::BlockTable> exported = pool.exportBlockTable(ids);
    ASSERT_TRUE(exported.ok()) << exported.status().toString();
    int64_t width = exported->blockTable.getShape()[1];
    for (size_t b = 0; b < ids.size(); ++b) {
      const std::vector<int32_t> &slots = model[ids[b]];
      ASSERT_EQ(exported->seqLens.dataAs<int32_t>()[b],
                static_cast<int32_t>(slots.size()));
      const int32_t *row = exported->blockTable.dataAs<int32_t>() + b * width;
      for (size_t t = 0; t < slots.size(); ++t)
        ASSERT_EQ(row[t / pageSize] * pageSize + int64_t(t) % pageSize,
                  slots[t]);
      for (int64_t p = (slots.size() + pageSize - 1) / pageSize; p < width; ++p)
        ASSERT_EQ(row[p], 0);
    }
  }
}

// The pool feeds a decode launch: slots for writing rows, then the exported
// block table and lengths.
TEST(PagePoolTest, FeedsADecodeLaunch) {
  DecodeShape shape;
  shape.pageSize = 16;
  const int64_t numPages = 12, row = shape.latentDim + shape.ropeDim;
  PagePool pool = PagePool::create(numPages, 16).take();
  std::vector<int64_t> ids = {40, 41, 42};
  std::vector<int64_t> turns[] = {{20, 1, 33}, {17, 0, 2}, {1, 15, 0}};
  DecodeData data = makeDecodeData(shape, {0, 0, 0}, 1, 5);
  data.kv = HostTensor::allocate(DType::BF16, {numPages, 16, row}).take();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const auto &turn : turns)
    for (size_t b = 0; b < ids.size(); ++b) {
      std::vector<int32_t> slots = *pool.appendTokens(ids[b], turn[b]);
      for (int32_t slot : slots)
        for (int64_t d = 0; d < row; ++d)
          data.kv.dataAs<uint16_t>()[slot * row + d] = floatToBF16(dist(rng));
    }
  PagePool::BlockTable exported = pool.exportBlockTable(ids).take();
  data.blockTable = std::move(exported.blockTable);
  data.seqLens = std::move(exported.seqLens);
  Expected<Kernel> kernel =
      Device::open("host", {2})->loadKernel(decodePackage(shape));
  ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
  Status status = kernel->launchDecode(data.args());
  ASSERT_TRUE(status.ok()) << status.toString();
  expectMatchesReference(shape, data);
}
