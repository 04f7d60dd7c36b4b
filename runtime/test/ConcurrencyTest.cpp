//===- ConcurrencyTest.cpp - Launches from many threads on the host -------===//
//
// 8 threads launch decode at once, many times, each with its own inputs and
// outputs (and batch size, so workspaces of different sizes are taken from
// and returned to the kernel's pool at the same time); every launch's output
// is compared with the float64 reference. Also: kernels loaded and dropped
// while others launch, the C API from 8 threads (thread-local errors), and
// the compiled host packages of $MLA_PACKAGE_DIR. Run under
// ThreadSanitizer: see docs/Runtime.md, Threading.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "mla/runtime/mla_runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <sstream>
#include <thread>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

constexpr int kThreads = 8;

/// One thread's decode data and its reference.
struct ThreadData {
  DecodeData data;
  Reference ref;
};

ThreadData makeThreadData(const DecodeShape &shape, int t) {
  int64_t page = shape.actualPageSize();
  // 1..4 requests of different lengths (one empty in every other thread).
  std::vector<int32_t> lengths;
  for (int b = 0; b <= t % 4; ++b)
    lengths.push_back(
        b == 1 && t % 2 ? 0 : static_cast<int32_t>(7 + 13 * t + 5 * b));
  int64_t maxPages = (7 + 13 * kThreads + 20 + page - 1) / page;
  ThreadData td;
  td.data = makeDecodeData(shape, lengths, maxPages, 1000 + t);
  td.ref = referenceDecode(shape, td.data);
  return td;
}

/// "" when o and lse match the reference, else what differs.
std::string compare(const DecodeShape &shape, const ThreadData &td) {
  std::vector<float> o = toFloats(td.data.o);
  const float *lse = td.data.lse.dataAs<float>();
  double tolerance = shape.dtype == DType::F32 ? 1e-4 : 2e-2;
  for (size_t i = 0; i < o.size(); ++i)
    if (!(std::abs(o[i] - td.ref.o[i]) <= tolerance)) {
      std::ostringstream out;
      out << "o[" << i << "] = " << o[i] << ", expected " << td.ref.o[i];
      return out.str();
    }
  for (size_t i = 0; i < td.ref.lse.size(); ++i) {
    bool same = std::isinf(td.ref.lse[i])
                    ? std::isinf(lse[i]) && lse[i] < 0
                    : std::abs(lse[i] - td.ref.lse[i]) <=
                          1e-3 * std::max(1.0, std::abs(td.ref.lse[i]));
    if (!same) {
      std::ostringstream out;
      out << "lse[" << i << "] = " << lse[i] << ", expected " << td.ref.lse[i];
      return out.str();
    }
  }
  return "";
}

/// Poisons the outputs so that a launch that skips them shows.
void poison(DecodeData &data) {
  std::memset(data.o.data(), 0xff, data.o.sizeInBytes());
  std::memset(data.lse.data(), 0xff, data.lse.sizeInBytes());
}

/// 8 threads x `iterations` launches of `kernel`; returns the first failure
/// per thread.
std::vector<std::string> launchFromThreads(const Kernel &kernel,
                                           const DecodeShape &shape,
                                           int iterations) {
  std::vector<ThreadData> perThread;
  for (int t = 0; t < kThreads; ++t)
    perThread.push_back(makeThreadData(shape, t));
  std::vector<std::string> failures(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ThreadData &td = perThread[t];
      // Start together, to overlap as much as possible.
      ++ready;
      while (ready.load() < kThreads)
        std::this_thread::yield();
      for (int i = 0; i < iterations && failures[t].empty(); ++i) {
        poison(td.data);
        Status status = kernel.launchDecode(td.data.args());
        if (!status.ok())
          failures[t] =
              "launch " + std::to_string(i) + ": " + status.toString();
        else if (std::string diff = compare(shape, td); !diff.empty())
          failures[t] = "launch " + std::to_string(i) + ": " + diff;
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  return failures;
}

} // namespace

TEST(ConcurrencyTest, EightThreadsDecodeOnTheHost) {
  for (DType dtype : {DType::BF16, DType::F32}) {
    DecodeShape shape;
    shape.dtype = dtype;
    shape.pageSize = 16;
    Expected<Device> device = Device::open("host", {4});
    ASSERT_TRUE(device.ok());
    Expected<Kernel> kernel = device->loadKernel(decodePackage(shape));
    ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
    std::vector<std::string> failures = launchFromThreads(*kernel, shape, 40);
    for (int t = 0; t < kThreads; ++t)
      EXPECT_EQ(failures[t], "") << "thread " << t << ", " << dtypeName(dtype);
  }
}

// Kernels are loaded (a code object each) and dropped by some threads while
// others launch a shared kernel of the same device.
TEST(ConcurrencyTest, LoadingAndDroppingKernelsWhileOthersLaunch) {
  DecodeShape shape;
  shape.pageSize = 4;
  Package package = decodePackage(shape);
  Device device = Device::open("host", {3}).take();
  Kernel shared = device.loadKernel(package).take();
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ThreadData td = makeThreadData(shape, t);
      for (int i = 0; i < 12 && failures[t].empty(); ++i) {
        std::optional<Kernel> own;
        if (t % 2) {
          Expected<Kernel> loaded = device.loadKernel(package);
          if (!loaded.ok()) {
            failures[t] = loaded.status().toString();
            break;
          }
          own = loaded.take();
        }
        poison(td.data);
        Status status = (own ? *own : shared).launchDecode(td.data.args());
        if (!status.ok())
          failures[t] = status.toString();
        else if (std::string diff = compare(shape, td); !diff.empty())
          failures[t] = diff;
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(failures[t], "") << "thread " << t;
}

// A host code object that stays loaded after dlclose (linked -z nodelete,
// like objects with STB_GNU_UNIQUE symbols) must not be handed back by
// dlopen for a code object loaded later under a reused /proc/self/fd/N
// name; loads and drops from 8 threads at once.
TEST(ConcurrencyTest, CodeObjectsThatStayLoadedDoNotShadowNewOnes) {
  DecodeShape shape;
  shape.pageSize = 4;
  Package decode = decodePackage(shape);
  Expected<Package> merge = parsePackage(nullptr, 0);
  {
    Expected<std::vector<uint8_t>> bytes = encodePackage(
        "mla-manifest 1\nkernel custom\nfunction merge\n"
        "arg 0 o_parts memref f32 ?,?,?,?\narg 1 lse_parts memref f32 ?,?,?\n"
        "arg 2 o memref f32 ?,?,?\narg 3 lse memref f32 ?,?\n"
        "target host-x86_64 code.host-x86_64\n"
        "launch mla_test_merge args 0,1,2,3 grid arg2.0,arg2.1,1\n"
        "end-target\n",
        {{"code.host-x86_64", readBytes(MLA_TEST_KIND_KERNELS_PATH)}});
    ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
    merge = parsePackage(bytes->data(), bytes->size());
    ASSERT_TRUE(merge.ok()) << merge.status().toString();
  }
  Device device = Device::open("host", {2}).take();
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ThreadData td = makeThreadData(shape, t);
      for (int i = 0; i < 10 && failures[t].empty(); ++i) {
        // Load and drop the object that stays loaded, then a new one.
        {
          Expected<Kernel> stays = device.loadKernel(*merge);
          if (!stays.ok()) {
            failures[t] = "merge: " + stays.status().toString();
            break;
          }
        }
        Expected<Kernel> kernel = device.loadKernel(decode);
        if (!kernel.ok()) {
          failures[t] = "decode: " + kernel.status().toString();
          break;
        }
        poison(td.data);
        Status status = kernel->launchDecode(td.data.args());
        if (!status.ok())
          failures[t] = status.toString();
        else if (std::string diff = compare(shape, td); !diff.empty())
          failures[t] = diff;
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(failures[t], "") << "thread " << t;
}

// The C API from 8 threads on shared handles: every thread launches, and
// also fails a call of its own, whose message only it sees.
TEST(ConcurrencyTest, CApiFromEightThreads) {
  DecodeShape shape;
  shape.pageSize = 16;
  std::vector<uint8_t> bytes = decodePackageBytes(shape);
  mla_device *device = nullptr;
  mla_package *package = nullptr;
  mla_kernel *kernel = nullptr;
  ASSERT_EQ(mla_device_open("host", nullptr, &device), MLA_OK);
  ASSERT_EQ(mla_package_load_memory(bytes.data(), bytes.size(), &package),
            MLA_OK);
  ASSERT_EQ(mla_kernel_load(device, package, nullptr, &kernel), MLA_OK);
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ThreadData td = makeThreadData(shape, t);
      auto toC = [](const HostTensor &h) {
        mla_tensor c{};
        c.data = h.data();
        c.dtype = h.getDType() == DType::BF16  ? MLA_DTYPE_BF16
                  : h.getDType() == DType::F32 ? MLA_DTYPE_F32
                                               : MLA_DTYPE_I32;
        c.rank = static_cast<int32_t>(h.getShape().size());
        for (size_t d = 0; d < h.getShape().size(); ++d)
          c.shape[d] = h.getShape()[d];
        return c;
      };
      mla_decode_args args{toC(td.data.q),          toC(td.data.kv),
                           toC(td.data.blockTable), toC(td.data.seqLens),
                           td.data.scale,           toC(td.data.o),
                           toC(td.data.lse)};
      std::string own;
      std::string role = "thread" + std::to_string(t);
      mla_arg twice[2] = {};
      twice[0].role = twice[1].role = role.c_str();
      twice[0].kind = twice[1].kind = MLA_ARG_F32;
      for (int i = 0; i < 30 && failures[t].empty(); ++i) {
        poison(td.data);
        if (mla_launch_decode(kernel, &args, nullptr) != MLA_OK) {
          failures[t] = mla_last_error();
          break;
        }
        if (std::string diff = compare(shape, td); !diff.empty()) {
          failures[t] = diff;
          break;
        }
        if (mla_launch(kernel, twice, 2, nullptr) !=
            MLA_ERROR_INVALID_ARGUMENT) {
          failures[t] = "the duplicate role was accepted";
          break;
        }
        own = std::string("args[1]: role '") + role + "' is given twice";
        std::this_thread::yield();
        if (mla_last_error() != own)
          failures[t] = std::string("last error: '") + mla_last_error() +
                        "', expected '" + own + "'";
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(failures[t], "") << "thread " << t;
  mla_kernel_close(kernel);
  mla_package_close(package);
  mla_device_close(device);
}

// Compiled host decode packages of $MLA_PACKAGE_DIR, 8 threads each.
TEST(ConcurrencyTest, CompiledHostPackagesFromEightThreads) {
  std::string why;
  std::vector<DecodePackage> packages = decodePackages(why);
  Device device = Device::open("host", {4}).take();
  int ran = 0;
  for (const DecodePackage &p : packages) {
    if (!p.package.manifest.findTarget(hostTargetName()))
      continue;
    SCOPED_TRACE(p.path);
    Expected<Kernel> kernel = device.loadKernel(p.package);
    ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
    const Manifest &m = p.package.manifest;
    if (m.findArg("block_table")->dtype != DType::I32 ||
        m.findArg("seq_lens")->dtype != DType::I32)
      continue;
    std::vector<std::string> failures =
        launchFromThreads(*kernel, shapeOf(m), 10);
    for (int t = 0; t < kThreads; ++t)
      EXPECT_EQ(failures[t], "") << "thread " << t;
    ++ran;
  }
  if (!ran)
    GTEST_SKIP() << (why.empty() ? "no host decode package with i32 indices "
                                   "in $MLA_PACKAGE_DIR"
                                 : why);
}
