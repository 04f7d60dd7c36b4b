//===- CudaDecodePackageTest.cpp - Compiled decode packages on the GPU ----===//
//
// Runs every decode package in $MLA_PACKAGE_DIR (*.mlapkg, not recursing)
// that has a target for the device, against the float64 reference:
//   DecodeSmallMatchesReference    ragged small lengths (incl. 0), stream,
//                                  reserved workspace, full validation from
//                                  host copies;
//   GraphReplayWithChangedLengths  one captured launch replayed after new
//                                  seq_lens / block_table contents;
//   ReusedPlanAcrossLayersInAGraph two layers in one graph, the second
//                                  reusing the first's plan.
// Skips without a CUDA device or without packages.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

/// A loaded package with device data for one set of lengths.
class DecodeRun {
public:
  DecodeRun(const Device &device, const Kernel &kernel,
            const DecodeShape &shape)
      : device(device), kernel(kernel), shape(shape) {}

  /// Makes host data for `lengths` and uploads it (indices in the manifest's
  /// dtypes).
  void prepare(const std::vector<int32_t> &lengths, int64_t maxPages,
               uint32_t seed) {
    host = makeDecodeData(shape, lengths, maxPages, seed);
    Expected<DeviceDecodeData> uploaded = uploadDecodeData(device, host);
    ASSERT_TRUE(uploaded.ok()) << uploaded.status().toString();
    data = uploaded.take();
    ASSERT_TRUE(data.o.fillBytes(0xff).ok()); // NaN: unwritten outputs show
    ASSERT_TRUE(data.lse.fillBytes(0xff).ok());
    uploadIndices();
  }

  /// Re-uploads host.blockTable and host.seqLens into the same buffers.
  void uploadIndices() {
    const Manifest &m = kernel.getManifest();
    tableCopy = converted(host.blockTable, m.findArg("block_table")->dtype);
    lensCopy = converted(host.seqLens, m.findArg("seq_lens")->dtype);
    if (data.blockTable.getDType() != tableCopy.getDType()) {
      Expected<DeviceTensor> table = DeviceTensor::allocate(
          device, tableCopy.getDType(), tableCopy.getShape());
      Expected<DeviceTensor> lens = DeviceTensor::allocate(
          device, lensCopy.getDType(), lensCopy.getShape());
      ASSERT_TRUE(table.ok() && lens.ok());
      data.blockTable = table.take();
      data.seqLens = lens.take();
    }
    ASSERT_TRUE(data.blockTable.copyFromHost(tableCopy.data()).ok());
    ASSERT_TRUE(data.seqLens.copyFromHost(lensCopy.data()).ok());
  }

  LaunchOptions options(void *stream) const {
    LaunchOptions options;
    options.stream = stream;
    options.hostBlockTable = tableCopy.data();
    options.hostSeqLens = lensCopy.data();
    return options;
  }

  void checkOutputs(void *stream) {
    ASSERT_TRUE(device.getBackend().synchronize(stream).ok());
    ASSERT_TRUE(downloadOutputs(data, host).ok());
    expectMatchesReference(shape, host);
  }

  const Device &device;
  const Kernel &kernel;
  DecodeShape shape;
  DecodeData host;
  DeviceDecodeData data;
  HostTensor tableCopy, lensCopy;
};

class CudaDecodePackageTest : public ::testing::Test {
protected:
  void SetUp() override {
    Expected<Device> opened = openTestCudaDevice();
    if (!opened.ok())
      GTEST_SKIP() << opened.status().message();
    device = opened.take();
    std::string why;
    packages = decodePackages(why);
    if (packages.empty())
      GTEST_SKIP() << why;
    Expected<std::unique_ptr<Stream>> created =
        device->getBackend().createStream();
    ASSERT_TRUE(created.ok()) << created.status().toString();
    stream = created.take();
  }

  /// The package's kernel, or nullopt (with a note) when the device runs
  /// none of its targets.
  std::optional<Kernel> load(const DecodePackage &p) {
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

  std::optional<Device> device;
  std::vector<DecodePackage> packages;
  std::unique_ptr<Stream> stream;
};

} // namespace

TEST_F(CudaDecodePackageTest, DecodeSmallMatchesReference) {
  for (const DecodePackage &p : packages) {
    SCOPED_TRACE(p.path);
    std::optional<Kernel> kernel = load(p);
    if (!kernel)
      continue;
    DecodeRun run(*device, *kernel, shapeOf(p.package.manifest));
    int64_t page = run.shape.actualPageSize();
    std::vector<int32_t> lengths = {1, 37, 0,
                                    static_cast<int32_t>(3 * page + 5), 130};
    int64_t maxPages =
        (*std::max_element(lengths.begin(), lengths.end()) + page - 1) / page +
        1;
    run.prepare(lengths, maxPages, 11);
    Expected<size_t> bytes = kernel->workspaceBytes(run.data.args());
    ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
    ASSERT_TRUE(kernel->reserveWorkspace(*bytes).ok());
    void *s = stream->handle();
    Status status = kernel->launchDecode(run.data.args(), run.options(s));
    ASSERT_TRUE(status.ok()) << status.toString();
    run.checkOutputs(s);
  }
}

TEST_F(CudaDecodePackageTest, GraphReplayWithChangedLengths) {
  for (const DecodePackage &p : packages) {
    SCOPED_TRACE(p.path);
    std::optional<Kernel> kernel = load(p);
    if (!kernel)
      continue;
    DecodeRun run(*device, *kernel, shapeOf(p.package.manifest));
    int64_t page = run.shape.actualPageSize();
    // Room for 70 tokens at any page size (page size 1 needs 70 pages).
    int64_t maxPages = std::max<int64_t>(6, (70 + page - 1) / page);
    run.prepare({static_cast<int32_t>(page), 3, 70, 0}, maxPages, 21);
    ASSERT_TRUE(
        kernel->reserveWorkspace(*kernel->workspaceBytes(run.data.args()))
            .ok());
    void *s = stream->handle();
    Expected<std::unique_ptr<Graph>> graph =
        captureDecode(*device, *kernel, run.data.args(), run.options(s));
    ASSERT_TRUE(graph.ok()) << graph.status().toString();
    ASSERT_TRUE((*graph)->launch(s).ok());
    run.checkOutputs(s);

    // New lengths (one longer, one shorter, one emptied, one filled) and a
    // reshuffled block table: same buffers, new contents, same graph.
    std::vector<int32_t> lengths = {static_cast<int32_t>(maxPages * page), 1, 0,
                                    static_cast<int32_t>(2 * page + 1)};
    int32_t *table = run.host.blockTable.dataAs<int32_t>();
    std::reverse(table, table + run.host.blockTable.numElements());
    std::copy(lengths.begin(), lengths.end(),
              run.host.seqLens.dataAs<int32_t>());
    run.uploadIndices();
    ASSERT_TRUE(
        kernel->validate(*kernel->bindDecode(run.data.args()), run.options(s))
            .ok());
    ASSERT_TRUE((*graph)->launch(s).ok());
    run.checkOutputs(s);
  }
}

// Two layers of a decode step in one captured graph, as a serving engine
// runs them: layer 0 computes the plan, layer 1 (other q, cache and block
// table, the same lengths) reuses it (LaunchOptions::reusePlan) from the
// reserved workspace; replayed after new lengths, layer 0 recomputes it.
// Packages without a plan (fixed split-KV) run the same way.
TEST_F(CudaDecodePackageTest, ReusedPlanAcrossLayersInAGraph) {
  for (const DecodePackage &p : packages) {
    SCOPED_TRACE(p.path);
    std::optional<Kernel> kernel = load(p);
    if (!kernel)
      continue;
    DecodeShape shape = shapeOf(p.package.manifest);
    DecodeRun layer0(*device, *kernel, shape), layer1(*device, *kernel, shape);
    int64_t page = shape.actualPageSize();
    int64_t maxPages = std::max<int64_t>(6, (70 + page - 1) / page);
    const std::vector<int32_t> lengths = {70, 0, 3, static_cast<int32_t>(page)};
    layer0.prepare(lengths, maxPages, 31);
    layer1.prepare(lengths, maxPages, 32);
    ASSERT_TRUE(
        kernel->reserveWorkspace(*kernel->workspaceBytes(layer0.data.args()))
            .ok());
    void *s = stream->handle();
    LaunchOptions reuse = layer1.options(s);
    reuse.reusePlan = true;
    Expected<std::vector<ArgValue>> args0 =
        kernel->bindDecode(layer0.data.args());
    Expected<std::vector<ArgValue>> args1 =
        kernel->bindDecode(layer1.data.args());
    ASSERT_TRUE(args0.ok() && args1.ok());
    Expected<std::unique_ptr<Graph>> graph =
        device->getBackend().captureGraph(s, [&]() -> Status {
          if (Status st = kernel->launch(*args0, layer0.options(s)); !st.ok())
            return st;
          return kernel->launch(*args1, reuse);
        });
    ASSERT_TRUE(graph.ok()) << graph.status().toString();
    ASSERT_TRUE((*graph)->launch(s).ok());
    layer0.checkOutputs(s);
    layer1.checkOutputs(s);

    const std::vector<int32_t> longer = {1,
                                         static_cast<int32_t>(maxPages * page),
                                         0, static_cast<int32_t>(2 * page + 1)};
    for (DecodeRun *run : {&layer0, &layer1}) {
      std::copy(longer.begin(), longer.end(),
                run->host.seqLens.dataAs<int32_t>());
      run->uploadIndices();
    }
    ASSERT_TRUE((*graph)->launch(s).ok());
    layer0.checkOutputs(s);
    layer1.checkOutputs(s);
  }
}
