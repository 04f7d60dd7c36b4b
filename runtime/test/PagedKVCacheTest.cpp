//===- PagedKVCacheTest.cpp -----------------------------------------------===//

#include "TestUtils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {
PagedKVCacheConfig smallConfig() {
  PagedKVCacheConfig config;
  config.dtype = DType::BF16;
  config.numPages = 6;
  config.pageSize = 4;
  config.rowDim = 40;
  config.batch = 3;
  config.maxPagesPerSeq = 3;
  return config;
}
} // namespace

TEST(PagedKVCacheTest, AllocatesPagesAsSequencesGrow) {
  Expected<PagedKVCache> created = PagedKVCache::create(smallConfig());
  ASSERT_TRUE(created.ok()) << created.status().toString();
  PagedKVCache cache = created.take();
  EXPECT_EQ(cache.getConfig().pageSize, 4);
  EXPECT_EQ(cache.kv().shape, (std::vector<int64_t>{6, 4, 40}));
  EXPECT_EQ(cache.blockTable().shape, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(cache.seqLens().shape, (std::vector<int64_t>{3}));
  const int32_t *table = static_cast<const int32_t *>(cache.blockTable().data);
  EXPECT_EQ(table[0], -1);

  ASSERT_TRUE(cache.append(1, 5).ok()); // pages 0, 1
  ASSERT_TRUE(cache.append(0, 4).ok()); // page 2
  ASSERT_TRUE(cache.append(1, 3).ok()); // fits in page 1
  EXPECT_EQ(cache.length(1), 8);
  EXPECT_EQ(cache.numFreePages(), 3);
  EXPECT_EQ(table[3], 0);
  EXPECT_EQ(table[4], 1);
  EXPECT_EQ(table[5], -1);
  EXPECT_EQ(table[0], 2);
  EXPECT_EQ(static_cast<const int32_t *>(cache.seqLens().data)[1], 8);

  // Token 5 of sequence 1 is row 1 of page 1.
  Expected<void *> row = cache.tokenRow(1, 5);
  ASSERT_TRUE(row.ok());
  EXPECT_EQ(static_cast<uint8_t *>(*row),
            static_cast<uint8_t *>(cache.kv().data) + (1 * 4 + 1) * 40 * 2);

  ASSERT_TRUE(cache.release(1).ok());
  EXPECT_EQ(cache.length(1), 0);
  EXPECT_EQ(cache.numFreePages(), 5);
  EXPECT_EQ(table[3], -1);
}

TEST(PagedKVCacheTest, Errors) {
  PagedKVCacheConfig config = smallConfig();
  config.pageSize = 0;
  Expected<PagedKVCache> bad = PagedKVCache::create(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "paged KV cache: pageSize is 0, must be positive");

  PagedKVCache cache = PagedKVCache::create(smallConfig()).take();
  EXPECT_EQ(cache.append(3, 1).message(),
            "sequence 3 is out of range (batch 3)");
  EXPECT_EQ(cache.append(0, 13).message(),
            "sequence 0 would hold 13 tokens, more than its block table row "
            "holds (12)");
  ASSERT_TRUE(cache.append(0, 12).ok());
  ASSERT_TRUE(cache.append(1, 9).ok());
  EXPECT_EQ(cache.append(2, 1).message(),
            "the page pool is exhausted: sequence 2 needs 1 more pages, 0 are "
            "free");
  EXPECT_EQ(cache.length(2), 0);
  EXPECT_EQ(cache.tokenRow(1, 9).status().message(),
            "token 9 of sequence 1 is out of range (length 9)");
  EXPECT_EQ(cache.length(7), -1);
}

TEST(PagedKVCacheTest, FeedsADecodeLaunch) {
  DecodeShape shape;
  shape.pageSize = 4;
  PagedKVCache cache = PagedKVCache::create(smallConfig()).take();
  ASSERT_TRUE(cache.append(0, 7).ok());
  ASSERT_TRUE(cache.append(2, 9).ok());
  ASSERT_TRUE(cache.append(0, 2).ok()); // sequence 0 spans pages 0, 1, 4
  for (int64_t seq : {0, 2})
    for (int64_t t = 0; t < cache.length(seq); ++t) {
      uint16_t *row = static_cast<uint16_t *>(*cache.tokenRow(seq, t));
      for (int d = 0; d < 40; ++d)
        row[d] = floatToBF16(0.01f * ((seq * 31 + t * 7 + d) % 17));
    }
  DecodeData data = makeDecodeData(shape, {0, 0, 0}, 3, 9);
  Expected<Kernel> kernel =
      Device::open("host", {2})->loadKernel(decodePackage(shape));
  ASSERT_TRUE(kernel.ok());
  DecodeArgs args = data.args();
  args.kv = cache.kv();
  args.blockTable = cache.blockTable();
  args.seqLens = cache.seqLens();
  Status status = kernel->launchDecode(args);
  ASSERT_TRUE(status.ok()) << status.toString();

  // The same launch with copies of the cache's tensors as plain data.
  DecodeData copy = makeDecodeData(shape, {0, 0, 0}, 3, 9);
  copy.kv = HostTensor::allocate(DType::BF16, {6, 4, 40}).take();
  std::memcpy(copy.kv.data(), cache.kv().data, copy.kv.sizeInBytes());
  std::memcpy(copy.blockTable.data(), cache.blockTable().data, 9 * 4);
  std::memcpy(copy.seqLens.data(), cache.seqLens().data, 3 * 4);
  // Unused entries (-1) are fine for validation and the reference ignores
  // them.
  Reference ref = referenceDecode(shape, copy);
  std::vector<float> o = toFloats(data.o);
  for (size_t i = 0; i < o.size(); ++i)
    ASSERT_NEAR(o[i], ref.o[i], 1e-2) << i;
  EXPECT_TRUE(std::isinf(data.lse.dataAs<float>()[4])); // sequence 1: empty
}
