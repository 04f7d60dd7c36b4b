//===- HipDecodePackageTest.cpp - Compiled decode packages on an AMD GPU --===//
//
// Runs every decode package in $MLA_PACKAGE_DIR (*.mlapkg, not recursing)
// that has a target for the device, against the float64 reference:
//   DecodeSmallMatchesReference    ragged small lengths (incl. 0), stream,
//                                  reserved workspace, full validation from
//                                  host copies;
//   GraphReplayWithChangedLengths  one captured launch replayed after new
//                                  seq_lens / block_table contents.
// Skips without ROCm and an AMD GPU (everywhere so far: this has never run
// on AMD hardware) or without packages.
//
//===----------------------------------------------------------------------===//

#include "HipTestUtils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

class HipDecodePackageTest : public ::testing::Test {
protected:
  void SetUp() override {
    Expected<Device> opened = openTestHipDevice();
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

  /// Host data for `lengths`, device copies (indices in the manifest's
  /// dtypes), outputs NaN-filled.
  void prepare(const Kernel &kernel, const DecodeShape &shape,
               const std::vector<int32_t> &lengths, int64_t maxPages,
               uint32_t seed) {
    host = makeDecodeData(shape, lengths, maxPages, seed);
    Expected<DeviceDecodeData> uploaded = uploadDecodeData(*device, host);
    ASSERT_TRUE(uploaded.ok()) << uploaded.status().toString();
    data = uploaded.take();
    ASSERT_TRUE(data.o.fillBytes(0xff).ok());
    ASSERT_TRUE(data.lse.fillBytes(0xff).ok());
    uploadIndices(kernel);
  }

  void uploadIndices(const Kernel &kernel) {
    const Manifest &m = kernel.getManifest();
    tableCopy = converted(host.blockTable, m.findArg("block_table")->dtype);
    lensCopy = converted(host.seqLens, m.findArg("seq_lens")->dtype);
    if (data.blockTable.getDType() != tableCopy.getDType()) {
      Expected<DeviceTensor> table = DeviceTensor::allocate(
          *device, tableCopy.getDType(), tableCopy.getShape());
      Expected<DeviceTensor> lens = DeviceTensor::allocate(
          *device, lensCopy.getDType(), lensCopy.getShape());
      ASSERT_TRUE(table.ok() && lens.ok());
      data.blockTable = table.take();
      data.seqLens = lens.take();
    }
    ASSERT_TRUE(data.blockTable.copyFromHost(tableCopy.data()).ok());
    ASSERT_TRUE(data.seqLens.copyFromHost(lensCopy.data()).ok());
  }

  LaunchOptions options() const {
    LaunchOptions o;
    o.stream = stream->handle();
    o.hostBlockTable = tableCopy.data();
    o.hostSeqLens = lensCopy.data();
    return o;
  }

  void checkOutputs(const DecodeShape &shape) {
    ASSERT_TRUE(device->getBackend().synchronize(stream->handle()).ok());
    ASSERT_TRUE(downloadOutputs(data, host).ok());
    expectMatchesReference(shape, host);
  }

  std::optional<Device> device;
  std::vector<DecodePackage> packages;
  std::unique_ptr<Stream> stream;
  DecodeData host;
  DeviceDecodeData data;
  HostTensor tableCopy, lensCopy;
};

} // namespace

TEST_F(HipDecodePackageTest, DecodeSmallMatchesReference) {
  for (const DecodePackage &p : packages) {
    SCOPED_TRACE(p.path);
    std::optional<Kernel> kernel = load(p);
    if (!kernel)
      continue;
    DecodeShape shape = shapeOf(p.package.manifest);
    int64_t page = shape.actualPageSize();
    std::vector<int32_t> lengths = {1, 37, 0,
                                    static_cast<int32_t>(3 * page + 5), 130};
    int64_t maxPages =
        (*std::max_element(lengths.begin(), lengths.end()) + page - 1) / page +
        1;
    prepare(*kernel, shape, lengths, maxPages, 11);
    Expected<size_t> bytes = kernel->workspaceBytes(data.args());
    ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
    ASSERT_TRUE(kernel->reserveWorkspace(*bytes).ok());
    Status status = kernel->launchDecode(data.args(), options());
    ASSERT_TRUE(status.ok()) << status.toString();
    checkOutputs(shape);
  }
}

TEST_F(HipDecodePackageTest, GraphReplayWithChangedLengths) {
  for (const DecodePackage &p : packages) {
    SCOPED_TRACE(p.path);
    std::optional<Kernel> kernel = load(p);
    if (!kernel)
      continue;
    DecodeShape shape = shapeOf(p.package.manifest);
    int64_t page = shape.actualPageSize();
    int64_t maxPages = std::max<int64_t>(6, (70 + page - 1) / page);
    prepare(*kernel, shape, {static_cast<int32_t>(page), 3, 70, 0}, maxPages,
            21);
    ASSERT_TRUE(
        kernel->reserveWorkspace(*kernel->workspaceBytes(data.args())).ok());
    Expected<std::unique_ptr<Graph>> graph =
        captureDecode(*device, *kernel, data.args(), options());
    if (!graph.ok() && graph.status().code() == ErrorCode::Unsupported)
      GTEST_SKIP() << graph.status().message();
    ASSERT_TRUE(graph.ok()) << graph.status().toString();
    ASSERT_TRUE((*graph)->launch(stream->handle()).ok());
    checkOutputs(shape);

    std::vector<int32_t> lengths = {static_cast<int32_t>(maxPages * page), 1, 0,
                                    static_cast<int32_t>(2 * page + 1)};
    int32_t *table = host.blockTable.dataAs<int32_t>();
    std::reverse(table, table + host.blockTable.numElements());
    std::copy(lengths.begin(), lengths.end(), host.seqLens.dataAs<int32_t>());
    uploadIndices(*kernel);
    ASSERT_TRUE(
        kernel->validate(*kernel->bindDecode(data.args()), options()).ok());
    ASSERT_TRUE((*graph)->launch(stream->handle()).ok());
    checkOutputs(shape);
  }
}
