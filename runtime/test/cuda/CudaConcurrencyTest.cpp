//===- CudaConcurrencyTest.cpp - Decode from 8 threads on 8 streams -------===//
//
// For every decode package of $MLA_PACKAGE_DIR with a target for the device:
// 8 threads share one Kernel; each has its own stream, caller workspace,
// inputs and outputs (and batch size), launches many times (outputs
// poisoned before each launch) and checks every result against the float64
// reference. Also the same packages through the C API. Skips with the
// one-line reason without a CUDA driver or device, or without packages.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtils.h"

#include "mla/runtime/mla_runtime.h"

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
  HostTensor table =
      converted(host.blockTable, m.findArg("block_table")->dtype);
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
  DecodeArgs args{q->view(),  kv->view(), dTable->view(), dLens->view(),
                  host.scale, o->view(),  lse->view()};
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

// The C API on the GPU: device pointers, a stream, a workspace reserved
// through mla_kernel_reserve_workspace, host copies for validation (which
// must reject a bad length without launching).
TEST(CudaCApiTest, DecodePackagesThroughTheCApi) {
  mla_device *device = nullptr;
  if (mla_device_open("cuda", nullptr, &device) != MLA_OK)
    GTEST_SKIP() << mla_last_error();
  std::string why;
  std::vector<DecodePackage> packages = decodePackages(why);
  if (packages.empty()) {
    mla_device_close(device);
    GTEST_SKIP() << why;
  }
  Device cpp = Device::open("cuda").take(); // uploads and streams
  Expected<std::unique_ptr<Stream>> stream = cpp.getBackend().createStream();
  ASSERT_TRUE(stream.ok()) << stream.status().toString();
  for (const DecodePackage &p : packages) {
    SCOPED_TRACE(p.path);
    mla_package *package = nullptr;
    mla_kernel *kernel = nullptr;
    ASSERT_EQ(mla_package_load_file(p.path.c_str(), &package), MLA_OK)
        << mla_last_error();
    mla_status loaded = mla_kernel_load(device, package, nullptr, &kernel);
    mla_package_close(package);
    if (loaded == MLA_ERROR_UNSUPPORTED)
      continue;
    ASSERT_EQ(loaded, MLA_OK) << mla_last_error();
    const Manifest &m = p.package.manifest;
    DecodeShape shape = shapeOf(m);
    int64_t page = shape.actualPageSize();
    int64_t longest = std::max<int64_t>(17, 3 * page + 2);
    DecodeData host = makeDecodeData(shape, {17, 0, 3 * int32_t(page) + 2},
                                     (longest + page - 1) / page + 1, 77);
    HostTensor table =
        converted(host.blockTable, m.findArg("block_table")->dtype);
    HostTensor lens = converted(host.seqLens, m.findArg("seq_lens")->dtype);
    std::vector<DeviceTensor> d;
    for (const HostTensor *t :
         {&host.q, &host.kv, &table, &lens, &host.o, &host.lse})
      d.push_back(DeviceTensor::upload(cpp, t->view()).take());
    auto toC = [](const DeviceTensor &t) {
      mla_tensor c{};
      c.data = t.data();
      c.dtype = t.getDType() == DType::BF16  ? MLA_DTYPE_BF16
                : t.getDType() == DType::F16 ? MLA_DTYPE_F16
                : t.getDType() == DType::F32 ? MLA_DTYPE_F32
                : t.getDType() == DType::I32 ? MLA_DTYPE_I32
                                             : MLA_DTYPE_I64;
      c.rank = static_cast<int32_t>(t.getShape().size());
      for (size_t i = 0; i < t.getShape().size(); ++i)
        c.shape[i] = t.getShape()[i];
      return c;
    };
    mla_decode_args args{toC(d[0]),  toC(d[1]), toC(d[2]), toC(d[3]),
                         host.scale, toC(d[4]), toC(d[5])};
    mla_arg roles[7] = {};
    const char *names[7] = {"q",     "kv", "block_table", "seq_lens",
                            "scale", "o",  "lse"};
    const mla_tensor *tensors[7] = {&args.q,        &args.kv, &args.block_table,
                                    &args.seq_lens, nullptr,  &args.o,
                                    &args.lse};
    for (int i = 0; i < 7; ++i) {
      roles[i].role = names[i];
      roles[i].kind = tensors[i] ? MLA_ARG_TENSOR : MLA_ARG_F32;
      if (tensors[i])
        roles[i].tensor = *tensors[i];
      roles[i].f32 = host.scale;
    }
    size_t bytes = 0;
    ASSERT_EQ(mla_kernel_workspace_bytes(kernel, roles, 7, &bytes), MLA_OK)
        << mla_last_error();
    ASSERT_EQ(mla_kernel_reserve_workspace(kernel, bytes), MLA_OK)
        << mla_last_error();
    mla_host_copy copies[2] = {{"block_table", table.data()},
                               {"seq_lens", lens.data()}};
    mla_launch_options options{};
    options.stream = (*stream)->handle();
    options.host_copies = copies;
    options.num_host_copies = 2;
    ASSERT_EQ(mla_launch_decode(kernel, &args, &options), MLA_OK)
        << mla_last_error();
    ASSERT_EQ(mla_device_synchronize(device, options.stream), MLA_OK)
        << mla_last_error();
    ASSERT_TRUE(d[4].copyToHost(host.o.data()).ok());
    ASSERT_TRUE(d[5].copyToHost(host.lse.data()).ok());
    expectMatchesReference(shape, host);

    // Validation reads the host copies, never device memory.
    HostTensor badLens = converted(lens, lens.getDType());
    if (badLens.getDType() == DType::I32)
      badLens.dataAs<int32_t>()[0] = 1 << 30;
    else
      badLens.dataAs<int64_t>()[0] = 1 << 30;
    copies[1].data = badLens.data();
    EXPECT_EQ(mla_launch_decode(kernel, &args, &options),
              MLA_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(mla_last_error())
                  .rfind("seq_lens[0] = 1073741824 "
                         "exceeds",
                         0),
              0u)
        << mla_last_error();
    mla_kernel_close(kernel);
  }
  mla_device_close(device);
}
