//===- CudaConcurrencyTest.cpp - Decode from 8 threads on 8 streams -------===//
//
// For every decode package of $MLA_PACKAGE_DIR with a target for the device:
// 8 threads share one Kernel; each has its own stream, caller workspace,
// inputs and outputs (and batch size), launches many times (outputs
// poisoned before each launch) and checks every result against the float64
// reference. Skips with the one-line reason without a CUDA driver or device,
// or without packages.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <sstream>
#include <thread>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

constexpr int kThreads = 8;
constexpr int kIterations = 25;

/// "" when the outputs match the reference, else what differs.
std::string compare(const DecodeShape &shape, const DecodeData &data,
                    const Reference &ref) {
  std::vector<float> o = toFloats(data.o);
  const float *lse = data.lse.dataAs<float>();
  double tolerance = shape.dtype == DType::F32 ? 1e-4 : 2e-2;
  for (size_t i = 0; i < o.size(); ++i)
    if (!(std::abs(o[i] - ref.o[i]) <= tolerance)) {
      std::ostringstream out;
      out << "o[" << i << "] = " << o[i] << ", expected " << ref.o[i];
      return out.str();
    }
  for (size_t i = 0; i < ref.lse.size(); ++i) {
    bool same = std::isinf(ref.lse[i])
                    ? std::isinf(lse[i]) && lse[i] < 0
                    : std::abs(lse[i] - ref.lse[i]) <=
                          1e-3 * std::max(1.0, std::abs(ref.lse[i]));
    if (!same) {
      std::ostringstream out;
      out << "lse[" << i << "] = " << lse[i] << ", expected " << ref.lse[i];
      return out.str();
    }
  }
  return "";
}

/// One thread's whole run; returns "" or the first failure.
std::string runThread(const Device &device, const Kernel &kernel,
                      const DecodeShape &shape, int t) {
  Backend &backend = device.getBackend();
  const Manifest &m = kernel.getManifest();
  int64_t page = shape.actualPageSize();
  std::vector<int32_t> lengths;
  for (int b = 0; b <= t % 4; ++b)
    lengths.push_back(b == 1 && t % 2 ? 0 : 9 + 29 * t + 7 * b);
  int64_t maxPages = (9 + 29 * kThreads + 21 + page - 1) / page;
  DecodeData host = makeDecodeData(shape, lengths, maxPages, 500 + t);
  Reference ref = referenceDecode(shape, host);
  // Index tensors in the manifest's dtypes; the host copies are what
  // validation reads.
  HostTensor table = converted(host.blockTable, m.findArg("block_table")->dtype);
  HostTensor lens = converted(host.seqLens, m.findArg("seq_lens")->dtype);
  Expected<DeviceTensor> q = DeviceTensor::upload(device, host.q.view());
  Expected<DeviceTensor> kv = DeviceTensor::upload(device, host.kv.view());
  Expected<DeviceTensor> dTable = DeviceTensor::upload(device, table.view());
  Expected<DeviceTensor> dLens = DeviceTensor::upload(device, lens.view());
  Expected<DeviceTensor> o = DeviceTensor::upload(device, host.o.view());
  Expected<DeviceTensor> lse = DeviceTensor::upload(device, host.lse.view());
  for (const Status &status : {q.status(), kv.status(), dTable.status(),
                               dLens.status(), o.status(), lse.status()})
    if (!status.ok())
      return "upload: " + status.toString();
  DecodeArgs args{q->view(),  kv->view(),   dTable->view(), dLens->view(),
                  host.scale, o->view(),    lse->view()};
  Expected<size_t> bytes = kernel.workspaceBytes(args);
  if (!bytes.ok())
    return "workspaceBytes: " + bytes.status().toString();
  Expected<std::unique_ptr<DeviceBuffer>> workspace =
      backend.allocate(std::max<size_t>(*bytes, 1));
  Expected<std::unique_ptr<Stream>> stream = backend.createStream();
  if (!workspace.ok() || !stream.ok())
    return "workspace or stream: " + workspace.status().toString() + " / " +
           stream.status().toString();
  LaunchOptions options;
  options.stream = (*stream)->handle();
  options.workspace = (*workspace)->data();
  options.workspaceBytes = (*workspace)->size();
  options.hostBlockTable = table.data();
  options.hostSeqLens = lens.data();
  for (int i = 0; i < kIterations; ++i) {
    std::string at = "launch " + std::to_string(i) + ": ";
    // NaN: an output the launch does not write shows.
    if (Status s = o->fillBytes(0xff); !s.ok())
      return at + s.toString();
    if (Status s = lse->fillBytes(0xff); !s.ok())
      return at + s.toString();
    // Two launches back to back on the stream, then one check.
    for (int repeat = 0; repeat < 2; ++repeat)
      if (Status s = kernel.launchDecode(args, options); !s.ok())
        return at + s.toString();
    if (Status s = backend.synchronize(options.stream); !s.ok())
      return at + s.toString();
    if (Status s = o->copyToHost(host.o.data()); !s.ok())
      return at + s.toString();
    if (Status s = lse->copyToHost(host.lse.data()); !s.ok())
      return at + s.toString();
    if (std::string diff = compare(shape, host, ref); !diff.empty())
      return at + diff;
  }
  return "";
}

} // namespace

TEST(CudaConcurrencyTest, DecodeFromEightThreadsOnEightStreams) {
  Expected<Device> opened = openTestCudaDevice();
  if (!opened.ok())
    GTEST_SKIP() << opened.status().message();
  Device device = opened.take();
  std::string why;
  std::vector<DecodePackage> packages = decodePackages(why);
  if (packages.empty())
    GTEST_SKIP() << why;
  int ran = 0;
  for (const DecodePackage &p : packages) {
    SCOPED_TRACE(p.path);
    Expected<Kernel> kernel = device.loadKernel(p.package);
    if (kernel.status().code() == ErrorCode::Unsupported) {
      std::cout << "[ NOTE ] " << p.path << ": " << kernel.status().message()
                << "\n";
      continue;
    }
    ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
    DecodeShape shape = shapeOf(p.package.manifest);
    std::vector<std::string> failures(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back(
          [&, t] { failures[t] = runThread(device, *kernel, shape, t); });
    for (std::thread &thread : threads)
      thread.join();
    for (int t = 0; t < kThreads; ++t)
      EXPECT_EQ(failures[t], "") << "thread " << t;
    ++ran;
  }
  if (!ran)
    GTEST_SKIP() << "no package in $MLA_PACKAGE_DIR has a target for "
                 << device.getBackend().getDescription();
}
