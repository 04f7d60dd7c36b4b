//===- TestUtils.h - Shared helpers of the runtime tests --------*- C++ -*-===//

#ifndef MLA_RUNTIME_TEST_TESTUTILS_H
#define MLA_RUNTIME_TEST_TESTUTILS_H

#include "mla/runtime/Runtime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mla::rt::test {

/// The shape of a decode package built around the reference test kernel.
struct DecodeShape {
  DType dtype = DType::BF16;
  int64_t heads = 4;
  int64_t qLen = 1;
  int64_t latentDim = 32;
  int64_t ropeDim = 8;
  /// Manifest page size; the actual one is `actualPageSize`.
  int64_t pageSize = 16;
  int64_t kvSplits = 3;

  int64_t actualPageSize() const { return pageSize ? pageSize : 16; }
};

/// The manifest of the reference kernel for `shape` (target host-x86_64).
std::string decodeManifest(const DecodeShape &shape);

/// The bytes of the reference kernel shared object.
std::vector<uint8_t> testKernelCode();

/// A package for `shape` with the reference kernel as code.host-x86_64.
std::vector<uint8_t> decodePackageBytes(const DecodeShape &shape);
Package decodePackage(const DecodeShape &shape);

/// Host tensors for one decode launch.
struct DecodeData {
  HostTensor q, kv, blockTable, seqLens, o, lse;
  float scale = 0;

  DecodeArgs args() const {
    return {q.view(), kv.view(), blockTable.view(), seqLens.view(),
            scale,    o.view(),  lse.view()};
  }
};

/// Random q and kv in [-1, 1) (rounded to the shape's dtype), a shuffled
/// block table over `numPages` pages with `maxPages` columns, and the given
/// lengths. The page pool is sized so each sequence gets distinct pages.
DecodeData makeDecodeData(const DecodeShape &shape,
                          const std::vector<int32_t> &lengths, int64_t maxPages,
                          uint32_t seed);

/// float64 reference for the data: o [B,Sq,H,Dv] and lse [B,Sq,H].
struct Reference {
  std::vector<double> o, lse;
};
Reference referenceDecode(const DecodeShape &shape, const DecodeData &data);

/// Compares data.o and data.lse with referenceDecode (gtest failures).
void expectMatchesReference(const DecodeShape &shape, const DecodeData &data);

/// The elements of a bf16/f16/f32 tensor as floats.
std::vector<float> toFloats(const HostTensor &tensor);

/// A fresh directory under the system temp dir, removed with its contents.
class TempDir {
public:
  TempDir();
  ~TempDir();
  const std::string &path() const { return dir; }
  std::string file(const std::string &name) const { return dir + "/" + name; }

private:
  std::string dir;
};

/// Exit code and output of a command run through the shell.
struct ToolResult {
  int exitCode = -1;
  std::string out, err;
};

/// Runs `program` with `args` (each shell-quoted) and the environment
/// assignments `env` (e.g. {"MLA_CUDA_DRIVER=/x.so"}), stdin from /dev/null.
ToolResult runTool(const std::string &program,
                   const std::vector<std::string> &args,
                   const std::vector<std::string> &env = {});

std::vector<uint8_t> readBytes(const std::string &path);
void writeBytes(const std::string &path, const std::vector<uint8_t> &bytes);

/// Builds package bytes by hand, independently of encodePackage (which
/// checks the manifest): sections in order, a valid checksum. What a
/// tampered package looks like.
std::vector<uint8_t> rawPackageBytes(
    const std::vector<std::pair<std::string, std::string>> &sections,
    uint32_t version = 1);

/// Writes `tensor` (any float dtype) as a float64 .npy file (`<f8`, what
/// numpy writes by default), each element widened exactly.
void writeF64Npy(const std::string &path, const HostTensor &tensor);

/// Device copies of the tensors of host decode data.
struct DeviceDecodeData {
  DeviceTensor q, kv, blockTable, seqLens, o, lse;
  float scale = 0;

  DecodeArgs args() const {
    return {q.view(), kv.view(), blockTable.view(), seqLens.view(),
            scale,    o.view(),  lse.view()};
  }
};

/// Uploads every tensor of `host` (o and lse too).
Expected<DeviceDecodeData> uploadDecodeData(const Device &device,
                                            const DecodeData &host);

/// Copies the device's o and lse into `host` (synchronous).
Status downloadOutputs(const DeviceDecodeData &device, DecodeData &host);

/// Captures one Kernel::launch on `options.stream` (not null) into a graph
/// (GPU devices).
/// Replays (Graph::launch) reuse the captured pointers, shapes, scalars and
/// workspace, so change only memory contents between them: e.g. upload new
/// seq_lens / block_table contents of the same shape, replay, synchronize
/// and check the outputs against the new reference.
Expected<std::unique_ptr<Graph>>
captureLaunch(const Device &device, const Kernel &kernel,
              const std::vector<ArgValue> &args, const LaunchOptions &options);
Expected<std::unique_ptr<Graph>> captureDecode(const Device &device,
                                               const Kernel &kernel,
                                               const DecodeArgs &args,
                                               const LaunchOptions &options);

/// A compiled package from $MLA_PACKAGE_DIR.
struct KindPackage {
  std::string path;
  Package package;
};
using DecodePackage = KindPackage;

/// The packages of kernel kind `kind` (any kind when empty) in
/// $MLA_PACKAGE_DIR, or its folder `subdir` (not recursing), sorted by path;
/// when there are none, `why` says why (for GTEST_SKIP).
std::vector<KindPackage> packagesOfKind(const std::string &kind,
                                        std::string &why,
                                        const std::string &subdir = "");

/// packagesOfKind("decode", why).
std::vector<DecodePackage> decodePackages(std::string &why);

/// The decode shape a package's manifest describes.
DecodeShape shapeOf(const Manifest &m);

/// `tensor` as `dtype` (a manifest may want i64 indices).
HostTensor converted(const HostTensor &tensor, DType dtype);

} // namespace mla::rt::test

#endif // MLA_RUNTIME_TEST_TESTUTILS_H
