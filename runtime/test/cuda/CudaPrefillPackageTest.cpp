//===- CudaPrefillPackageTest.cpp - Compiled prefill packages on a GPU ----===//
//
// Runs every prefill package in $MLA_PACKAGE_DIR (*.mlapkg whose manifest
// says `kernel prefill`; scripts/gpu-packages compiles them) that has a
// target for the device, on random ragged batches (never zeros) against the
// float64 reference of PrefillReference.h, launched by role on a stream with
// validation from host copies of the offsets:
//   RaggedBatchesMatchReference  lengths 1, 17, 300, 1000 (and, for causal
//                                kernels, more and fewer keys than queries,
//                                empty requests);
//   ChunkedPrefillMerged         with the `prefill_ctx_*` (no mask, f32 o),
//                                `prefill_new_*` (causal, f32 o) and
//                                `merge_*` packages: context chunk + new
//                                chunk merged = one causal prefill.
// Skips without a CUDA device or without such packages.
//
//===----------------------------------------------------------------------===//

#include "../PrefillReference.h"
#include "CudaTestUtils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <optional>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

using NamedPackage = KindPackage;

std::string stemOf(const NamedPackage &p) {
  return std::filesystem::path(p.path).stem().string();
}

class CudaPrefillPackageTest : public ::testing::Test {
protected:
  void SetUp() override {
    Expected<Device> opened = openTestCudaDevice();
    if (!opened.ok())
      GTEST_SKIP() << opened.status().message();
    device = opened.take();
    std::string why;
    packages = packagesOfKind("prefill", why);
    if (packages.empty())
      GTEST_SKIP() << why;
    Expected<std::unique_ptr<Stream>> created =
        device->getBackend().createStream();
    ASSERT_TRUE(created.ok()) << created.status().toString();
    stream = created.take();
  }

  std::optional<Kernel> load(const NamedPackage &p) {
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

  /// Uploads `p`, launches, downloads o (manifest dtype) and lse.
  void run(const Kernel &kernel, PrefillProblem &p, std::vector<uint8_t> &o,
           std::vector<float> &lse) {
    const Manifest &m = kernel.getManifest();
    const DType oType = m.findArg("o")->dtype;
    const int64_t T = p.tokens(), Tk = p.keyTokens(), B1 = p.cuQ.size();
    auto up = [&](void *data, DType dt, std::vector<int64_t> shape) {
      Expected<DeviceTensor> t =
          DeviceTensor::upload(*device, TensorView{data, dt, shape});
      EXPECT_TRUE(t.ok()) << t.status().toString();
      return t.take();
    };
    DeviceTensor q = up(p.q.bytes.data(), p.dtype, {T, p.heads, p.dqk});
    DeviceTensor k = up(p.k.bytes.data(), p.dtype, {Tk, p.heads, p.dqk});
    DeviceTensor v = up(p.v.bytes.data(), p.dtype, {Tk, p.heads, p.dv});
    DeviceTensor cuq = up(p.cuQ.data(), DType::I32, {B1});
    DeviceTensor cuk = up(p.cuK.data(), DType::I32, {B1});
    Expected<DeviceTensor> od =
        DeviceTensor::allocate(*device, oType, {T, p.heads, p.dv});
    Expected<DeviceTensor> ld =
        DeviceTensor::allocate(*device, DType::F32, {p.heads, T});
    ASSERT_TRUE(od.ok() && ld.ok());
    ASSERT_TRUE(od->fillBytes(0xff).ok()); // NaN: unwritten outputs show
    ASSERT_TRUE(ld->fillBytes(0xff).ok());
    LaunchOptions options;
    options.stream = stream->handle();
    options.hostData = {{"cu_seqlens_q", p.cuQ.data()},
                        {"cu_seqlens_k", p.cuK.data()}};
    Status st = kernel.launchByRole({{"q", q.view()},
                                     {"k", k.view()},
                                     {"v", v.view()},
                                     {"cu_seqlens_q", cuq.view()},
                                     {"cu_seqlens_k", cuk.view()},
                                     {"scale", Scalar::f32(p.scale)},
                                     {"o", od->view()},
                                     {"lse", ld->view()}},
                                    options);
    ASSERT_TRUE(st.ok()) << st.toString();
    ASSERT_TRUE(device->getBackend().synchronize(stream->handle()).ok());
    o.resize(T * p.heads * p.dv * dtypeSize(oType));
    lse.resize(p.heads * T);
    ASSERT_TRUE(od->copyToHost(o.data()).ok());
    ASSERT_TRUE(ld->copyToHost(lse.data()).ok());
  }

  std::optional<Device> device;
  std::vector<NamedPackage> packages;
  std::unique_ptr<Stream> stream;
};

void expectClose(const PrefillErrors &e, DType dt, const std::string &what) {
  const double tol = dt == DType::F32 ? 1e-4 : 2e-2;
  EXPECT_EQ(e.nans, 0) << what << ": NaN or unwritten outputs";
  EXPECT_EQ(e.wrongEmpty, 0) << what << ": rows without keys need lse -inf";
  EXPECT_LE(e.relO, tol) << what << ": relative error of o";
  EXPECT_LE(e.relLse, tol) << what << ": relative error of lse";
  std::cout << "[ " << what << " ] rel. error o " << e.relO << ", lse "
            << e.relLse << "\n";
}

} // namespace

TEST_F(CudaPrefillPackageTest, RaggedBatchesMatchReference) {
  for (const NamedPackage &pkg : packages) {
    SCOPED_TRACE(pkg.path);
    std::optional<Kernel> kernel = load(pkg);
    if (!kernel)
      continue;
    const Manifest &m = kernel->getManifest();
    std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> batches =
        {{{1, 17, 300, 1000}, {1, 17, 300, 1000}}};
    if (m.heads >= 128)
      batches = {{{1, 17, 130}, {1, 17, 130}}};
    if (m.causal == 1) {
      batches.push_back({{1, 17, 100}, {30, 300, 101}}); // more keys
      batches.push_back({{40, 17}, {5, 0}});             // fewer keys
      batches.push_back({{0, 33, 0, 2}, {0, 33, 5, 2}}); // empty requests
    }
    for (size_t i = 0; i < batches.size(); ++i) {
      std::mt19937 rng(1234 + i);
      PrefillProblem p =
          makePrefill(m.heads, m.qkDim, m.vDim, m.causal == 1, *m.dtype,
                      batches[i].first, batches[i].second, rng);
      std::vector<uint8_t> o;
      std::vector<float> lse;
      run(*kernel, p, o, lse);
      DType oType = m.findArg("o")->dtype;
      expectClose(
          comparePrefill(referencePrefill(p), oType, o.data(), lse.data()),
          p.dtype, stemOf(pkg) + " batch " + std::to_string(i));
    }
  }
}

TEST_F(CudaPrefillPackageTest, ChunkedPrefillMerged) {
  std::string why;
  std::vector<NamedPackage> merges = packagesOfKind("merge", why);
  auto find = [&](const std::string &stem) -> const NamedPackage * {
    for (const NamedPackage &p : packages)
      if (stemOf(p) == stem)
        return &p;
    for (const NamedPackage &p : merges)
      if (stemOf(p) == stem)
        return &p;
    return nullptr;
  };
  const NamedPackage *ctxPkg = find("prefill_ctx_h16_bf16");
  const NamedPackage *newPkg = find("prefill_new_h16_bf16");
  const NamedPackage *mergePkg = find("merge_h16_bf16");
  if (!ctxPkg || !newPkg || !mergePkg)
    GTEST_SKIP() << "needs prefill_ctx_h16_bf16, prefill_new_h16_bf16 and "
                    "merge_h16_bf16 packages";
  std::optional<Kernel> ctxK = load(*ctxPkg), newK = load(*newPkg),
                        mergeK = load(*mergePkg);
  ASSERT_TRUE(ctxK && newK && mergeK);
  const int64_t H = 16;
  const std::vector<int32_t> ctx = {300, 0, 37}, lq = {60, 20, 1};
  std::vector<int32_t> full(ctx.size());
  for (size_t b = 0; b < ctx.size(); ++b)
    full[b] = ctx[b] + lq[b];
  std::mt19937 rng(77);
  PrefillProblem whole =
      makePrefill(H, 192, 128, /*causal=*/true, DType::BF16, lq, full, rng);
  PrefillProblem context = keyChunk(whole, ctx, lq, /*newPart=*/false);
  PrefillProblem fresh = keyChunk(whole, ctx, lq, /*newPart=*/true);
  std::vector<uint8_t> oA, oB;
  std::vector<float> lA, lB;
  run(*ctxK, context, oA, lA);
  run(*newK, fresh, oB, lB);
  const int64_t T = whole.tokens();
  oA.insert(oA.end(), oB.begin(), oB.end());
  lA.insert(lA.end(), lB.begin(), lB.end());
  Expected<DeviceTensor> op = DeviceTensor::upload(
      *device, TensorView{oA.data(), DType::F32, {2, T, H, 128}});
  Expected<DeviceTensor> lp = DeviceTensor::upload(
      *device, TensorView{lA.data(), DType::F32, {2, H, T}});
  Expected<DeviceTensor> o =
      DeviceTensor::allocate(*device, DType::BF16, {T, H, 128});
  Expected<DeviceTensor> lse =
      DeviceTensor::allocate(*device, DType::F32, {H, T});
  ASSERT_TRUE(op.ok() && lp.ok() && o.ok() && lse.ok());
  LaunchOptions options;
  options.stream = stream->handle();
  Status st = mergeK->launchByRole({{"o_parts", op->view()},
                                    {"lse_parts", lp->view()},
                                    {"o", o->view()},
                                    {"lse", lse->view()}},
                                   options);
  ASSERT_TRUE(st.ok()) << st.toString();
  ASSERT_TRUE(device->getBackend().synchronize(stream->handle()).ok());
  std::vector<uint8_t> oh(T * H * 128 * 2);
  std::vector<float> lh(H * T);
  ASSERT_TRUE(o->copyToHost(oh.data()).ok());
  ASSERT_TRUE(lse->copyToHost(lh.data()).ok());
  expectClose(comparePrefill(referencePrefill(whole), DType::BF16, oh.data(),
                             lh.data()),
              DType::BF16, "chunked prefill merged");
}
