//===- TestUtils.cpp ------------------------------------------------------===//

#include "TestUtils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sys/wait.h>

using namespace mla::rt;
using namespace mla::rt::test;

std::string mla::rt::test::decodeManifest(const DecodeShape &s) {
  std::string dt = dtypeName(s.dtype);
  std::string row = std::to_string(s.latentDim + s.ropeDim);
  std::string qLen = std::to_string(s.qLen), heads = std::to_string(s.heads);
  std::string latent = std::to_string(s.latentDim);
  std::string splits = std::to_string(s.kvSplits);
  std::string page = s.pageSize ? std::to_string(s.pageSize) : "?";
  std::string entry = s.dtype == DType::F32 ? "mla_decode_f32" : "mla_decode";
  return "mla-manifest 1\n"
         "# reference decode for the runtime tests\n"
         "kernel decode\n"
         "function decode\n"
         "dtype " +
         dt +
         "\n"
         "heads " +
         heads +
         "\n"
         "q_len " +
         qLen +
         "\n"
         "latent_dim " +
         latent +
         "\n"
         "rope_dim " +
         std::to_string(s.ropeDim) +
         "\n"
         "page_size " +
         std::to_string(s.pageSize) +
         "\n"
         "config tile_kv=64 kv_splits=" +
         splits + " head_group=" + heads +
         "\n"
         "arg 0 q memref " +
         dt + " ?," + qLen + "," + heads + "," + row +
         "\n"
         "arg 1 kv memref " +
         dt + " ?," + page + "," + row +
         "\n"
         "arg 2 block_table memref i32 ?,?\n"
         "arg 3 seq_lens memref i32 ?\n"
         "arg 4 scale scalar f32\n"
         "arg 5 o memref " +
         dt + " ?," + qLen + "," + heads + "," + latent +
         "\n"
         "arg 6 lse memref f32 ?," +
         qLen + "," + heads +
         "\n"
         "target host-x86_64 code.host-x86_64\n"
         "workspace 7 f32 arg0.0,arg0.1," +
         heads + "," + splits + "," + latent +
         "\n"
         "workspace 8 f32 arg0.0,arg0.1," +
         heads + "," + splits +
         "\n"
         "launch " +
         entry + "_k0 args 0,1,2,3,4,7,8 grid arg0.0,1," + splits +
         "\n"
         "launch " +
         entry +
         "_k1 args 7,8,5,6 grid arg0.0,arg0.1,arg0.2\n"
         "end-target\n";
}

std::vector<uint8_t> mla::rt::test::readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

void mla::rt::test::writeBytes(const std::string &path,
                               const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  EXPECT_TRUE(out.good()) << "cannot write " << path;
}

std::vector<uint8_t> mla::rt::test::rawPackageBytes(
    const std::vector<std::pair<std::string, std::string>> &sections,
    uint32_t version) {
  std::vector<uint8_t> out = {'M', 'L', 'A', 'P', 'K', 'G', 0, 1};
  auto put = [&](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i)
      out.push_back(static_cast<uint8_t>(value >> (8 * i)));
  };
  put(version, 4);
  put(sections.size(), 4);
  for (const auto &[name, data] : sections) {
    put(name.size(), 4);
    out.insert(out.end(), name.begin(), name.end());
    put(data.size(), 8);
    out.insert(out.end(), data.begin(), data.end());
  }
  put(fnv1a64(out.data(), out.size()), 8);
  return out;
}

void mla::rt::test::writeF64Npy(const std::string &path,
                                const HostTensor &tensor) {
  // encodeNpy writes the float32 file; its header is rewritten to <f8 and
  // its data replaced by the widened values (the header keeps its length).
  HostTensor f32 = HostTensor::allocate(DType::F32, tensor.getShape()).take();
  ASSERT_TRUE(convertElements(tensor.data(), tensor.getDType(), f32.data(),
                              DType::F32, tensor.numElements())
                  .ok());
  Expected<std::vector<uint8_t>> bytes = encodeNpy(f32.view());
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  std::vector<uint8_t> out(bytes->begin(), bytes->end() - f32.sizeInBytes());
  std::string text(out.begin(), out.end());
  size_t descr = text.find("'<f4'");
  ASSERT_NE(descr, std::string::npos);
  out[descr + 3] = '8';
  for (int64_t i = 0; i < f32.numElements(); ++i) {
    double value = f32.dataAs<float>()[i];
    const auto *raw = reinterpret_cast<const uint8_t *>(&value);
    out.insert(out.end(), raw, raw + sizeof(value));
  }
  writeBytes(path, out);
}

std::vector<uint8_t> mla::rt::test::testKernelCode() {
  static const std::vector<uint8_t> code = readBytes(MLA_TEST_KERNEL_PATH);
  return code;
}

std::vector<uint8_t> mla::rt::test::decodePackageBytes(const DecodeShape &s) {
  Expected<std::vector<uint8_t>> bytes = encodePackage(
      decodeManifest(s), {{"code.host-x86_64", testKernelCode()}});
  EXPECT_TRUE(bytes.ok()) << bytes.status().toString();
  return bytes.ok() ? bytes.take() : std::vector<uint8_t>{};
}

Package mla::rt::test::decodePackage(const DecodeShape &s) {
  std::vector<uint8_t> bytes = decodePackageBytes(s);
  Expected<Package> package = parsePackage(bytes.data(), bytes.size());
  EXPECT_TRUE(package.ok()) << package.status().toString();
  return package.ok() ? package.take() : Package{};
}

static HostTensor allocate(DType dtype, std::vector<int64_t> shape) {
  Expected<HostTensor> tensor = HostTensor::allocate(dtype, std::move(shape));
  EXPECT_TRUE(tensor.ok()) << tensor.status().toString();
  return tensor.take();
}

static void fillRandom(HostTensor &tensor, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(tensor.numElements());
  for (float &value : values)
    value = dist(rng);
  Status status = convertElements(values.data(), DType::F32, tensor.data(),
                                  tensor.getDType(), values.size());
  EXPECT_TRUE(status.ok()) << status.toString();
}

std::vector<float> mla::rt::test::toFloats(const HostTensor &tensor) {
  std::vector<float> values(tensor.numElements());
  Status status = convertElements(tensor.data(), tensor.getDType(),
                                  values.data(), DType::F32, values.size());
  EXPECT_TRUE(status.ok()) << status.toString();
  return values;
}

DecodeData mla::rt::test::makeDecodeData(const DecodeShape &s,
                                         const std::vector<int32_t> &lengths,
                                         int64_t maxPages, uint32_t seed) {
  std::mt19937 rng(seed);
  int64_t batch = static_cast<int64_t>(lengths.size());
  int64_t pageSize = s.actualPageSize();
  int64_t numPages = std::max<int64_t>(1, batch * maxPages);
  int64_t row = s.latentDim + s.ropeDim;
  DecodeData data;
  data.q = allocate(s.dtype, {batch, s.qLen, s.heads, row});
  data.kv = allocate(s.dtype, {numPages, pageSize, row});
  data.blockTable = allocate(DType::I32, {batch, maxPages});
  data.seqLens = allocate(DType::I32, {batch});
  data.o = allocate(s.dtype, {batch, s.qLen, s.heads, s.latentDim});
  data.lse = allocate(DType::F32, {batch, s.qLen, s.heads});
  data.scale = 1.0f / std::sqrt(static_cast<float>(row));
  fillRandom(data.q, rng);
  fillRandom(data.kv, rng);
  std::vector<int32_t> pages(numPages);
  for (int64_t p = 0; p < numPages; ++p)
    pages[p] = static_cast<int32_t>(p);
  std::shuffle(pages.begin(), pages.end(), rng);
  std::copy_n(pages.begin(), batch * maxPages,
              data.blockTable.dataAs<int32_t>());
  std::copy(lengths.begin(), lengths.end(), data.seqLens.dataAs<int32_t>());
  return data;
}

Reference mla::rt::test::referenceDecode(const DecodeShape &s,
                                         const DecodeData &data) {
  const std::vector<int64_t> &qShape = data.q.getShape();
  int64_t batch = qShape[0], qLen = qShape[1], heads = qShape[2],
          row = qShape[3];
  int64_t pageSize = data.kv.getShape()[1];
  int64_t maxPages = data.blockTable.getShape()[1];
  int64_t dimV = s.latentDim;
  std::vector<float> q = toFloats(data.q), kv = toFloats(data.kv);
  Reference ref;
  ref.o.assign(batch * qLen * heads * dimV, 0.0);
  ref.lse.assign(batch * qLen * heads, -INFINITY);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t length = data.seqLens.dataAs<int32_t>()[b];
    std::vector<int64_t> rows;
    for (int64_t t = 0; t < length; ++t) {
      int32_t page =
          data.blockTable.dataAs<int32_t>()[b * maxPages + t / pageSize];
      rows.push_back((page * pageSize + t % pageSize) * row);
    }
    for (int64_t i = 0; i < qLen; ++i) {
      // MTP: query i sees tokens [0, length - qLen + i].
      size_t visible = static_cast<size_t>(std::clamp<int64_t>(
          length - qLen + i + 1, 0, static_cast<int64_t>(rows.size())));
      for (int64_t h = 0; h < heads; ++h) {
        int64_t qBase = ((b * qLen + i) * heads + h) * row;
        std::vector<double> scores;
        double maxScore = -INFINITY;
        for (size_t t = 0; t < visible; ++t) {
          int64_t kvBase = rows[t];
          double dot = 0;
          for (int64_t d = 0; d < row; ++d)
            dot += static_cast<double>(q[qBase + d]) * kv[kvBase + d];
          scores.push_back(dot * data.scale);
          maxScore = std::max(maxScore, scores.back());
        }
        if (visible == 0)
          continue;
        double sum = 0;
        std::vector<double> acc(dimV, 0.0);
        for (size_t t = 0; t < visible; ++t) {
          double weight = std::exp(scores[t] - maxScore);
          sum += weight;
          for (int64_t d = 0; d < dimV; ++d)
            acc[d] += weight * kv[rows[t] + d];
        }
        int64_t outIndex = (b * qLen + i) * heads + h;
        for (int64_t d = 0; d < dimV; ++d)
          ref.o[outIndex * dimV + d] = acc[d] / sum;
        ref.lse[outIndex] = maxScore + std::log(sum);
      }
    }
  }
  return ref;
}

/// Compares the kernel's outputs with the float64 reference.
void mla::rt::test::expectMatchesReference(const DecodeShape &shape,
                                           const DecodeData &data) {
  Reference ref = referenceDecode(shape, data);
  std::vector<float> o = toFloats(data.o);
  const float *lse = data.lse.dataAs<float>();
  double oTolerance = shape.dtype == DType::F32 ? 1e-5 : 1e-2;
  ASSERT_EQ(o.size(), ref.o.size());
  for (size_t i = 0; i < o.size(); ++i)
    ASSERT_NEAR(o[i], ref.o[i], oTolerance) << "o element " << i;
  for (size_t i = 0; i < ref.lse.size(); ++i) {
    if (std::isinf(ref.lse[i])) {
      EXPECT_TRUE(std::isinf(lse[i]) && lse[i] < 0) << "lse element " << i;
      continue;
    }
    ASSERT_NEAR(lse[i], ref.lse[i], 1e-4 * std::max(1.0, std::abs(ref.lse[i])))
        << "lse element " << i;
  }
}

static std::string shellQuote(const std::string &text) {
  std::string quoted = "'";
  for (char c : text)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

ToolResult mla::rt::test::runTool(const std::string &program,
                                  const std::vector<std::string> &args,
                                  const std::vector<std::string> &env) {
  TempDir dir;
  std::string command;
  for (const std::string &assignment : env)
    command += shellQuote(assignment) + " ";
  if (!env.empty())
    command = "env " + command;
  command += shellQuote(program);
  for (const std::string &arg : args)
    command += " " + shellQuote(arg);
  command += " >" + shellQuote(dir.file("stdout")) + " 2>" +
             shellQuote(dir.file("stderr")) + " </dev/null";
  int status = std::system(command.c_str());
  ToolResult result;
  result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::vector<uint8_t> out = readBytes(dir.file("stdout"));
  std::vector<uint8_t> err = readBytes(dir.file("stderr"));
  result.out.assign(out.begin(), out.end());
  result.err.assign(err.begin(), err.end());
  return result;
}

TempDir::TempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "mla-rt-test-XXXXXX").string();
  char *made = mkdtemp(pattern.data());
  EXPECT_NE(made, nullptr) << "mkdtemp failed";
  dir = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

Expected<DeviceDecodeData>
mla::rt::test::uploadDecodeData(const Device &device, const DecodeData &host) {
  DeviceDecodeData data;
  data.scale = host.scale;
  std::pair<DeviceTensor *, const HostTensor *> tensors[] = {
      {&data.q, &host.q},
      {&data.kv, &host.kv},
      {&data.blockTable, &host.blockTable},
      {&data.seqLens, &host.seqLens},
      {&data.o, &host.o},
      {&data.lse, &host.lse}};
  for (auto [deviceTensor, hostTensor] : tensors) {
    Expected<DeviceTensor> uploaded =
        DeviceTensor::upload(device, hostTensor->view());
    if (!uploaded.ok())
      return uploaded.status();
    *deviceTensor = uploaded.take();
  }
  return data;
}

Status mla::rt::test::downloadOutputs(const DeviceDecodeData &device,
                                      DecodeData &host) {
  if (Status status = device.o.copyToHost(host.o.data()); !status.ok())
    return status;
  return device.lse.copyToHost(host.lse.data());
}

Expected<std::unique_ptr<Graph>>
mla::rt::test::captureLaunch(const Device &device, const Kernel &kernel,
                             const std::vector<ArgValue> &args,
                             const LaunchOptions &options) {
  return device.getBackend().captureGraph(
      options.stream, [&] { return kernel.launch(args, options); });
}

Expected<std::unique_ptr<Graph>>
mla::rt::test::captureDecode(const Device &device, const Kernel &kernel,
                             const DecodeArgs &args,
                             const LaunchOptions &options) {
  Expected<std::vector<ArgValue>> bound = kernel.bindDecode(args);
  if (!bound.ok())
    return bound.status();
  return captureLaunch(device, kernel, *bound, options);
}

std::vector<mla::rt::test::KindPackage>
mla::rt::test::packagesOfKind(const std::string &kind, std::string &why,
                              const std::string &subdir) {
  const char *root = std::getenv("MLA_PACKAGE_DIR");
  if (!root || !*root) {
    why = "MLA_PACKAGE_DIR is not set";
    return {};
  }
  std::string dir =
      subdir.empty() ? std::string(root) : std::string(root) + "/" + subdir;
  std::vector<std::string> paths;
  std::error_code error;
  for (const auto &entry : std::filesystem::directory_iterator(dir, error))
    if (entry.path().extension() == ".mlapkg")
      paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  std::vector<KindPackage> packages;
  for (const std::string &path : paths) {
    Expected<Package> package = readPackage(path);
    EXPECT_TRUE(package.ok()) << package.status().toString();
    if (package.ok() && (kind.empty() || package->manifest.kernel == kind))
      packages.push_back({path, package.take()});
  }
  if (packages.empty())
    why = "no " + (kind.empty() ? std::string("") : kind + " ") +
          "package in " + dir;
  return packages;
}

std::vector<mla::rt::test::DecodePackage>
mla::rt::test::decodePackages(std::string &why) {
  return packagesOfKind("decode", why);
}

mla::rt::test::DecodeShape mla::rt::test::shapeOf(const Manifest &m) {
  DecodeShape shape;
  shape.dtype = *m.dtype;
  shape.heads = m.heads;
  shape.qLen = m.qLen ? m.qLen : 1;
  shape.latentDim = m.latentDim;
  shape.ropeDim = m.ropeDim;
  shape.pageSize = m.pageSize;
  return shape;
}

mla::rt::HostTensor mla::rt::test::converted(const HostTensor &tensor,
                                             DType dtype) {
  Expected<HostTensor> out = HostTensor::allocate(dtype, tensor.getShape());
  EXPECT_TRUE(out.ok());
  Status status = convertElements(tensor.data(), tensor.getDType(), out->data(),
                                  dtype, tensor.numElements());
  EXPECT_TRUE(status.ok()) << status.toString();
  return out.take();
}
