//===- CudaVariantPackageTest.cpp - Variant kernels (IR regions) on a GPU -===//
//
// Runs the compiled variant examples of test/e2e/variants in
// $MLA_PACKAGE_DIR/variants (scripts/gpu-packages names them
// variant_prefill_NAME and variant_decode_NAME, NAME one of softcap,
// sliding_window, alibi, sink, and softcap_input for decode: the bound an
// f32 rank-0 input `cap`) against the float64 references of
// PrefillReference.h that apply the same variant, on random data (never zeros).
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
#include <map>
#include <optional>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

constexpr int64_t kHeads = 16;

struct VariantPackage {
  std::string path, kind, variant; // kind: prefill or decode
  Package package;
};

/// The variant_KIND_NAME packages of $MLA_PACKAGE_DIR/variants.
std::vector<VariantPackage> variantPackages(std::string &why) {
  std::vector<VariantPackage> packages;
  for (KindPackage &p : packagesOfKind("", why, "variants")) {
    std::string stem = std::filesystem::path(p.path).stem().string();
    if (stem.rfind("variant_", 0) != 0)
      continue;
    stem = stem.substr(8);
    size_t underscore = stem.find('_');
    if (underscore == std::string::npos)
      continue;
    packages.push_back({p.path, stem.substr(0, underscore),
                        stem.substr(underscore + 1), std::move(p.package)});
  }
  if (packages.empty() && why.empty())
    why = "no variant_* package in $MLA_PACKAGE_DIR/variants";
  return packages;
}

class CudaVariantPackageTest : public ::testing::Test {
protected:
  void SetUp() override {
    Expected<Device> opened = openTestCudaDevice();
    if (!opened.ok())
      GTEST_SKIP() << opened.status().message();
    device = opened.take();
    std::string why;
    packages = variantPackages(why);
    if (packages.empty())
      GTEST_SKIP() << why;
    Expected<std::unique_ptr<Stream>> created =
        device->getBackend().createStream();
    ASSERT_TRUE(created.ok()) << created.status().toString();
    stream = created.take();
  }

  DeviceTensor up(void *data, DType dt, std::vector<int64_t> shape) {
    Expected<DeviceTensor> t =
        DeviceTensor::upload(*device, TensorView{data, dt, shape});
    EXPECT_TRUE(t.ok()) << t.status().toString();
    return t.take();
  }

  DeviceTensor poisoned(DType dt, std::vector<int64_t> shape) {
    Expected<DeviceTensor> t = DeviceTensor::allocate(*device, dt, shape);
    EXPECT_TRUE(t.ok()) << t.status().toString();
    EXPECT_TRUE(t->fillBytes(0xff).ok()); // NaN: unwritten outputs show
    return t.take();
  }

  std::optional<Device> device;
  std::vector<VariantPackage> packages;
  std::unique_ptr<Stream> stream;
};

void expectClose(const PrefillErrors &e, const std::string &what) {
  EXPECT_EQ(e.nans, 0) << what << ": NaN or unwritten outputs";
  EXPECT_EQ(e.wrongEmpty, 0) << what << ": rows without keys need lse -inf";
  EXPECT_LE(e.relO, 2e-2) << what << ": relative error of o";
  EXPECT_LE(e.relLse, 2e-2) << what << ": relative error of lse";
  std::cout << "[ " << what << " ] rel. error o " << e.relO << ", lse "
            << e.relLse << "\n";
}

} // namespace

TEST_F(CudaVariantPackageTest, MatchFloat64Reference) {
  for (VariantPackage &pkg : packages) {
    SCOPED_TRACE(pkg.path);
    Expected<Kernel> kernel = device->loadKernel(pkg.package);
    if (kernel.status().code() == ErrorCode::Unsupported) {
      std::cout << "[ NOTE ] " << pkg.path << ": " << kernel.status().message()
                << "\n";
      continue;
    }
    ASSERT_TRUE(kernel.ok()) << kernel.status().toString();
    std::mt19937 rng(std::hash<std::string>()(pkg.path));
    std::uniform_real_distribution<float> sinkDist(-1.0f, 3.0f);
    std::vector<float> sinks(kHeads);
    for (float &s : sinks)
      s = sinkDist(rng);
    float cap = 12.5f; // softcap_input: not the examples' 30
    VariantRef variant = pkg.variant == "softcap_input"
                             ? softcapVariant(cap)
                             : exampleVariant(pkg.variant, kHeads, sinks);
    LaunchOptions options;
    options.stream = stream->handle();
    std::map<std::string, ArgValue> args;
    DeviceTensor sinksDev = up(sinks.data(), DType::F32, {kHeads});
    DeviceTensor capDev = up(&cap, DType::F32, {});
    if (pkg.variant == "sink")
      args.emplace("sinks", sinksDev.view());
    if (pkg.variant == "softcap_input")
      args.emplace("cap", capDev.view());
    if (pkg.kind == "prefill") {
      PrefillProblem p =
          makePrefill(kHeads, 192, 128, /*causal=*/true, DType::BF16,
                      {1, 17, 200, 300}, {1, 40, 350, 300}, rng);
      if (pkg.variant == "softcap")
        p.scale = 2.0f;
      const int64_t T = p.tokens(), Tk = p.keyTokens(), B1 = p.cuQ.size();
      DeviceTensor q = up(p.q.bytes.data(), DType::BF16, {T, kHeads, 192});
      DeviceTensor k = up(p.k.bytes.data(), DType::BF16, {Tk, kHeads, 192});
      DeviceTensor v = up(p.v.bytes.data(), DType::BF16, {Tk, kHeads, 128});
      DeviceTensor cuq = up(p.cuQ.data(), DType::I32, {B1});
      DeviceTensor cuk = up(p.cuK.data(), DType::I32, {B1});
      DeviceTensor o = poisoned(DType::BF16, {T, kHeads, 128});
      DeviceTensor lse = poisoned(DType::F32, {kHeads, T});
      args.insert({{"q", q.view()},
                   {"k", k.view()},
                   {"v", v.view()},
                   {"cu_seqlens_q", cuq.view()},
                   {"cu_seqlens_k", cuk.view()},
                   {"scale", Scalar::f32(p.scale)},
                   {"o", o.view()},
                   {"lse", lse.view()}});
      options.hostData = {{"cu_seqlens_q", p.cuQ.data()},
                          {"cu_seqlens_k", p.cuK.data()}};
      Status st = kernel->launchByRole(args, options);
      ASSERT_TRUE(st.ok()) << st.toString();
      ASSERT_TRUE(device->getBackend().synchronize(stream->handle()).ok());
      std::vector<uint8_t> oh(T * kHeads * 128 * 2);
      std::vector<float> lh(kHeads * T);
      ASSERT_TRUE(o.copyToHost(oh.data()).ok());
      ASSERT_TRUE(lse.copyToHost(lh.data()).ok());
      expectClose(comparePrefill(referencePrefill(p, variant), DType::BF16,
                                 oh.data(), lh.data()),
                  "prefill " + pkg.variant);
    } else {
      DecodeProblem p = makeDecode(kHeads, 576, 512, 64, DType::BF16,
                                   {300, 1, 129, 0, 1000}, rng);
      if (pkg.variant == "softcap")
        p.scale = 2.0f;
      const int64_t B = p.batch();
      DeviceTensor q = up(p.q.bytes.data(), DType::BF16, {B, 1, kHeads, 576});
      DeviceTensor kv = up(p.kv.bytes.data(), DType::BF16, {p.pages, 64, 576});
      DeviceTensor table = up(p.table.data(), DType::I32, {B, p.maxPages});
      DeviceTensor lens = up(p.lens.data(), DType::I32, {B});
      DeviceTensor o = poisoned(DType::BF16, {B, 1, kHeads, 512});
      DeviceTensor lse = poisoned(DType::F32, {B, 1, kHeads});
      args.insert({{"q", q.view()},
                   {"kv", kv.view()},
                   {"block_table", table.view()},
                   {"seq_lens", lens.view()},
                   {"scale", Scalar::f32(p.scale)},
                   {"o", o.view()},
                   {"lse", lse.view()}});
      options.hostData = {{"block_table", p.table.data()},
                          {"seq_lens", p.lens.data()}};
      Expected<size_t> ws = kernel->workspaceBytes(*kernel->bindByRole(args));
      ASSERT_TRUE(ws.ok()) << ws.status().toString();
      ASSERT_TRUE(kernel->reserveWorkspace(*ws).ok());
      Status st = kernel->launchByRole(args, options);
      ASSERT_TRUE(st.ok()) << st.toString();
      ASSERT_TRUE(device->getBackend().synchronize(stream->handle()).ok());
      std::vector<uint8_t> oh(B * kHeads * 512 * 2);
      std::vector<float> lh(B * kHeads);
      ASSERT_TRUE(o.copyToHost(oh.data()).ok());
      ASSERT_TRUE(lse.copyToHost(lh.data()).ok());
      expectClose(comparePrefill(referenceDecode(p, variant), DType::BF16,
                                 oh.data(), lh.data()),
                  "decode " + pkg.variant);
    }
  }
}
