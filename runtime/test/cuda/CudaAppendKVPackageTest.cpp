//===- CudaAppendKVPackageTest.cpp - Compiled KV-append packages on a GPU -===//
//
// Runs every KV-append package in $MLA_PACKAGE_DIR (*.mlapkg whose manifest
// says `kernel append_kv`; scripts/gpu-packages compiles them) that has a
// target for the device, on a random page pool and random new rows (never
// zeros), launched by role on a stream:
//   WritesSlotsAndNothingElse   distinct slots in random order with -1
//                               padding, validated from a host copy of the
//                               slot mapping; every pool row is checked
//                               (written rows bit-exact, the rest unchanged);
//   OutOfRangeSlotsWriteNothing with validation off, slots past the pool and
//                               negative slots reach the kernel, which must
//                               skip them: guard rows around the pool stay
//                               unchanged.
// Skips without a CUDA device or without such packages.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

using AppendPackage = KindPackage;

/// `n` random values of `dtype`, none zero: magnitudes in [0.25, 2), random
/// signs.
std::vector<uint8_t> randomNonZero(DType dtype, int64_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> mag(0.25f, 2.0f);
  std::bernoulli_distribution sign(0.5);
  const size_t es = dtypeSize(dtype);
  std::vector<uint8_t> bytes(n * es);
  for (int64_t i = 0; i < n; ++i) {
    float v = sign(rng) ? -mag(rng) : mag(rng);
    uint16_t bits = 0;
    if (dtype == DType::BF16)
      bits = floatToBF16(v);
    else if (dtype == DType::F16)
      bits = floatToF16(v);
    if (es == 2)
      std::memcpy(&bytes[i * es], &bits, 2);
    else
      std::memcpy(&bytes[i * es], &v, 4);
  }
  return bytes;
}

/// Host data for one launch of a package.
struct AppendData {
  DType dt = DType::BF16;
  int64_t d = 0, page = 0, pages = 0;
  std::vector<uint8_t> pool, rows;
  std::vector<int32_t> slots;

  size_t rowBytes() const { return d * dtypeSize(dt); }
  int64_t capacity() const { return pages * page; }
};

AppendData makeData(const Manifest &m, int64_t pages, int64_t tokens,
                    int64_t padding, uint32_t seed) {
  AppendData data;
  data.dt = *m.dtype;
  data.d = m.latentDim + m.ropeDim;
  data.page = m.pageSize ? m.pageSize : 5; // 0: chosen at run time
  data.pages = pages;
  std::mt19937 rng(seed);
  data.pool = randomNonZero(data.dt, data.capacity() * data.d, rng);
  data.rows = randomNonZero(data.dt, tokens * data.d, rng);
  std::vector<int32_t> all(data.capacity());
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  int64_t used = std::min<int64_t>(tokens - padding, data.capacity());
  data.slots.assign(all.begin(), all.begin() + used);
  data.slots.resize(tokens, -1);
  std::shuffle(data.slots.begin(), data.slots.end(), rng);
  return data;
}

/// Every pool row of `got` against `data`: the new row of the token whose
/// (in-range) slot names it, else the original row; bit-exact.
void expectPool(const AppendData &data, const std::vector<uint8_t> &got) {
  std::map<int64_t, size_t> tokenOfSlot;
  for (size_t t = 0; t < data.slots.size(); ++t)
    if (data.slots[t] >= 0 && data.slots[t] < data.capacity())
      tokenOfSlot[data.slots[t]] = t;
  int64_t wrong = 0;
  for (int64_t s = 0; s < data.capacity(); ++s) {
    auto it = tokenOfSlot.find(s);
    const uint8_t *want = it == tokenOfSlot.end()
                              ? &data.pool[s * data.rowBytes()]
                              : &data.rows[it->second * data.rowBytes()];
    if (std::memcmp(&got[s * data.rowBytes()], want, data.rowBytes()) != 0 &&
        wrong++ < 5)
      ADD_FAILURE() << "pool row " << s
                    << (it == tokenOfSlot.end()
                            ? " changed although no slot names it"
                            : " differs from new row " +
                                  std::to_string(it->second));
  }
  EXPECT_EQ(wrong, 0) << "wrong rows out of " << data.capacity();
}

class CudaAppendKVPackageTest : public ::testing::Test {
protected:
  void SetUp() override {
    Expected<Device> opened = openTestCudaDevice();
    if (!opened.ok())
      GTEST_SKIP() << opened.status().message();
    device = opened.take();
    std::string why;
    packages = packagesOfKind("append_kv", why);
    if (packages.empty())
      GTEST_SKIP() << why;
    Expected<std::unique_ptr<Stream>> created =
        device->getBackend().createStream();
    ASSERT_TRUE(created.ok()) << created.status().toString();
    stream = created.take();
  }

  /// The package's kernel, or nullopt (with a note) when the device runs
  /// none of its targets.
  std::optional<Kernel> load(const AppendPackage &p) {
    Expected<Kernel> kernel = device->loadKernel(p.package);
    if (kernel.status().code() == ErrorCode::Unsupported) {
      std::cout << "[ NOTE ] " << p.path << ": " << kernel.status().message()
                << "\n";
      return std::nullopt;
    }
    EXPECT_TRUE(kernel.ok()) << kernel.status().toString();
    if (!kernel.ok())
      return std::nullopt;
    return kernel.take();
  }

  /// Uploads rows and slots, launches on the stream with `pool` as the page
  /// pool view, waits.
  Status launch(const Kernel &kernel, const AppendData &data, void *pool,
                bool validate) {
    const int64_t tokens = static_cast<int64_t>(data.slots.size());
    Expected<DeviceTensor> rows = DeviceTensor::upload(
        *device, TensorView{const_cast<uint8_t *>(data.rows.data()),
                            data.dt,
                            {tokens, data.d}});
    Expected<DeviceTensor> slots = DeviceTensor::upload(
        *device, TensorView{const_cast<int32_t *>(data.slots.data()),
                            DType::I32,
                            {tokens}});
    if (!rows.ok())
      return rows.status();
    if (!slots.ok())
      return slots.status();
    LaunchOptions options;
    options.stream = stream->handle();
    options.validate = validate;
    options.hostData = {{"slot_mapping", data.slots.data()}};
    Status status = kernel.launchByRole(
        {{"kv_new", rows->view()},
         {"slot_mapping", slots->view()},
         {"kv", TensorView{pool, data.dt, {data.pages, data.page, data.d}}}},
        options);
    if (!status.ok())
      return status;
    return device->getBackend().synchronize(stream->handle());
  }

  std::optional<Device> device;
  std::vector<AppendPackage> packages;
  std::unique_ptr<Stream> stream;
};

} // namespace

TEST_F(CudaAppendKVPackageTest, WritesSlotsAndNothingElse) {
  for (const AppendPackage &p : packages) {
    SCOPED_TRACE(p.path);
    std::optional<Kernel> kernel = load(p);
    if (!kernel)
      continue;
    const Manifest &m = kernel->getManifest();
    int64_t page = m.pageSize ? m.pageSize : 5;
    // Enough pages for 300 tokens, a few left over.
    int64_t pages = (300 + page - 1) / page + 3;
    for (auto [tokens, padding] :
         {std::pair<int64_t, int64_t>{300, 37}, {1, 0}, {7, 7}}) {
      SCOPED_TRACE("tokens " + std::to_string(tokens) + ", padding " +
                   std::to_string(padding));
      AppendData data = makeData(m, pages, tokens, padding, 17 + tokens);
      Expected<DeviceTensor> pool = DeviceTensor::upload(
          *device, TensorView{data.pool.data(),
                              data.dt,
                              {data.pages, data.page, data.d}});
      ASSERT_TRUE(pool.ok()) << pool.status().toString();
      Status status = launch(*kernel, data, pool->data(), /*validate=*/true);
      ASSERT_TRUE(status.ok()) << status.toString();
      std::vector<uint8_t> got(data.pool.size());
      ASSERT_TRUE(pool->copyToHost(got.data()).ok());
      expectPool(data, got);
    }
  }
}

TEST_F(CudaAppendKVPackageTest, OutOfRangeSlotsWriteNothing) {
  for (const AppendPackage &p : packages) {
    SCOPED_TRACE(p.path);
    std::optional<Kernel> kernel = load(p);
    if (!kernel)
      continue;
    const Manifest &m = kernel->getManifest();
    AppendData data = makeData(m, /*pages=*/4, /*tokens=*/12, 0, 99);
    const int32_t bad[] = {static_cast<int32_t>(data.capacity()),
                           static_cast<int32_t>(data.capacity() + 1),
                           static_cast<int32_t>(data.capacity() + data.page),
                           -2,
                           std::numeric_limits<int32_t>::min(),
                           std::numeric_limits<int32_t>::max()};
    for (size_t i = 0; i < std::size(bad); ++i)
      data.slots[2 * i] = bad[i];
    // The pool sits between two guard regions of one pool size each.
    std::mt19937 rng(5);
    const std::vector<uint8_t> guarded =
        randomNonZero(data.dt, 3 * data.capacity() * data.d, rng);
    const size_t poolBytes = data.pool.size();
    std::vector<uint8_t> init = guarded;
    std::memcpy(init.data() + poolBytes, data.pool.data(), poolBytes);
    Expected<DeviceTensor> buffer = DeviceTensor::upload(
        *device,
        TensorView{init.data(), data.dt, {3 * data.pages, data.page, data.d}});
    ASSERT_TRUE(buffer.ok()) << buffer.status().toString();
    void *pool = static_cast<uint8_t *>(buffer->data()) + poolBytes;
    Status status = launch(*kernel, data, pool, /*validate=*/false);
    ASSERT_TRUE(status.ok()) << status.toString();
    std::vector<uint8_t> got(init.size());
    ASSERT_TRUE(buffer->copyToHost(got.data()).ok());
    EXPECT_EQ(std::memcmp(got.data(), guarded.data(), poolBytes), 0)
        << "rows before the pool were written";
    EXPECT_EQ(std::memcmp(got.data() + 2 * poolBytes,
                          guarded.data() + 2 * poolBytes, poolBytes),
              0)
        << "rows after the pool were written";
    expectPool(data, std::vector<uint8_t>(got.begin() + poolBytes,
                                          got.begin() + 2 * poolBytes));
  }
}
