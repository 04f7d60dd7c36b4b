//===- KindTestUtils.cpp --------------------------------------------------===//

#include "KindTestUtils.h"
#include "TestUtils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

HostTensor allocate(DType dtype, std::vector<int64_t> shape) {
  Expected<HostTensor> tensor = HostTensor::allocate(dtype, std::move(shape));
  EXPECT_TRUE(tensor.ok()) << tensor.status().toString();
  return tensor.take();
}

void fillUniform(HostTensor &tensor, std::mt19937 &rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(tensor.numElements());
  for (float &value : values)
    value = dist(rng);
  Status status = convertElements(values.data(), DType::F32, tensor.data(),
                                  tensor.getDType(), values.size());
  EXPECT_TRUE(status.ok()) << status.toString();
}

HostTensor offsets(const std::vector<int32_t> &lengths) {
  HostTensor t = allocate(DType::I32, {int64_t(lengths.size()) + 1});
  int32_t *data = t.dataAs<int32_t>();
  data[0] = 0;
  for (size_t i = 0; i < lengths.size(); ++i)
    data[i + 1] = data[i] + lengths[i];
  return t;
}

std::string dims(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string &part : parts)
    out += (out.empty() ? "" : ",") + part;
  return out;
}

std::string entrySuffix(DType dtype) {
  return dtype == DType::F32 ? "f32" : "bf16";
}

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

} // namespace

std::vector<uint8_t> mla::rt::test::refKindKernelCode() {
  static const std::vector<uint8_t> code =
      readBytes(MLA_TEST_REF_KIND_KERNELS_PATH);
  return code;
}

std::vector<uint8_t>
mla::rt::test::kindPackageBytes(const std::string &manifest) {
  Expected<std::vector<uint8_t>> bytes =
      encodePackage(manifest, {{"code.host-x86_64", refKindKernelCode()}});
  EXPECT_TRUE(bytes.ok()) << bytes.status().toString();
  return bytes.ok() ? bytes.take() : std::vector<uint8_t>{};
}

Package mla::rt::test::kindPackage(const std::string &manifest) {
  std::vector<uint8_t> bytes = kindPackageBytes(manifest);
  Expected<Package> package = parsePackage(bytes.data(), bytes.size());
  EXPECT_TRUE(package.ok()) << package.status().toString();
  return package.ok() ? package.take() : Package{};
}

Kernel mla::rt::test::loadKindKernel(const std::string &manifest,
                                     unsigned threads) {
  Expected<Device> device = Device::open("host", {threads});
  EXPECT_TRUE(device.ok()) << device.status().toString();
  Expected<Kernel> kernel = device->loadKernel(kindPackage(manifest));
  EXPECT_TRUE(kernel.ok()) << kernel.status().toString();
  return kernel.take();
}

// ---- prefill --------------------------------------------------------------

std::string mla::rt::test::prefillManifest(const PrefillShape &s) {
  std::string dt = dtypeName(s.dtype);
  std::string h = std::to_string(s.heads), qk = std::to_string(s.qkDim),
              v = std::to_string(s.vDim);
  std::string ah = s.dynamicDims ? "?" : h, aqk = s.dynamicDims ? "?" : qk,
              av = s.dynamicDims ? "?" : v;
  std::string entry = "mla_ref_prefill_" + entrySuffix(s.dtype) +
                      (s.causal ? "_causal" : "_full");
  return "mla-manifest 1\n"
         "# reference prefill for the runtime tests\n"
         "kernel prefill\n"
         "function prefill\n"
         "dtype " +
         dt +
         "\n"
         "heads " +
         h +
         "\n"
         "qk_dim " +
         qk +
         "\n"
         "v_dim " +
         v +
         "\n"
         "causal " +
         (s.causal ? "1" : "0") +
         "\n"
         "config tile_q=4 tile_kv=64\n"
         "arg 0 q memref " +
         dt + " " + dims({"?", ah, aqk}) +
         "\n"
         "arg 1 k memref " +
         dt + " " + dims({"?", ah, aqk}) +
         "\n"
         "arg 2 v memref " +
         dt + " " + dims({"?", ah, av}) +
         "\n"
         "arg 3 cu_seqlens_q memref i32 ?\n"
         "arg 4 cu_seqlens_k memref i32 ?\n"
         "arg 5 scale scalar f32\n"
         "arg 6 o memref " +
         dt + " " + dims({"?", ah, av}) +
         "\n"
         "arg 7 lse memref f32 " +
         dims({ah, "?"}) +
         "\n"
         "target host-x86_64 code.host-x86_64\n"
         "launch " +
         entry +
         " args 0,1,2,3,4,5,6,7 grid arg0.0/4,arg0.1,arg3.0-1\n"
         "end-target\n";
}

std::map<std::string, ArgValue> PrefillData::byRole() const {
  return {{"q", q.view()},
          {"k", k.view()},
          {"v", v.view()},
          {"cu_seqlens_q", cuSeqlensQ.view()},
          {"cu_seqlens_k", cuSeqlensK.view()},
          {"scale", Scalar::f32(scale)},
          {"o", o.view()},
          {"lse", lse.view()}};
}

PrefillData mla::rt::test::makePrefillData(const PrefillShape &s,
                                           const std::vector<int32_t> &qLens,
                                           const std::vector<int32_t> &kLens,
                                           uint32_t seed) {
  std::mt19937 rng(seed);
  PrefillData data;
  data.cuSeqlensQ = offsets(qLens);
  data.cuSeqlensK = offsets(kLens);
  int64_t t = data.cuSeqlensQ.dataAs<int32_t>()[qLens.size()];
  int64_t tk = data.cuSeqlensK.dataAs<int32_t>()[kLens.size()];
  data.q = allocate(s.dtype, {t, s.heads, s.qkDim});
  data.k = allocate(s.dtype, {tk, s.heads, s.qkDim});
  data.v = allocate(s.dtype, {tk, s.heads, s.vDim});
  fillUniform(data.q, rng, -1, 1);
  fillUniform(data.k, rng, -1, 1);
  fillUniform(data.v, rng, -1, 1);
  data.o = allocate(s.dtype, {t, s.heads, s.vDim});
  data.lse = allocate(DType::F32, {s.heads, t});
  data.scale = 1.0f / std::sqrt(static_cast<float>(s.qkDim));
  return data;
}

KindReference mla::rt::test::referencePrefill(const PrefillShape &s,
                                              const PrefillData &data) {
  std::vector<float> q = toFloats(data.q), k = toFloats(data.k),
                     v = toFloats(data.v);
  const int32_t *cuQ = data.cuSeqlensQ.dataAs<int32_t>();
  const int32_t *cuK = data.cuSeqlensK.dataAs<int32_t>();
  int64_t batch = data.cuSeqlensQ.numElements() - 1;
  int64_t t = data.q.getShape()[0], h = s.heads, dqk = s.qkDim, dv = s.vDim;
  KindReference ref;
  ref.o.assign(t * h * dv, 0.0);
  ref.lse.assign(h * t, kNegInf);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t lq = cuQ[b + 1] - cuQ[b], lk = cuK[b + 1] - cuK[b];
    for (int64_t i = 0; i < lq; ++i) {
      int64_t row = cuQ[b] + i;
      int64_t visible =
          s.causal ? std::clamp<int64_t>(i + lk - lq + 1, 0, lk) : lk;
      for (int64_t hh = 0; hh < h; ++hh) {
        std::vector<double> scores(visible);
        double maxScore = kNegInf;
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < dqk; ++d)
            dot += double(q[(row * h + hh) * dqk + d]) *
                   k[((cuK[b] + j) * h + hh) * dqk + d];
          scores[j] = dot * data.scale;
          maxScore = std::max(maxScore, scores[j]);
        }
        if (visible == 0)
          continue;
        double sum = 0;
        for (int64_t j = 0; j < visible; ++j) {
          double w = std::exp(scores[j] - maxScore);
          sum += w;
          for (int64_t d = 0; d < dv; ++d)
            ref.o[(row * h + hh) * dv + d] +=
                w * v[((cuK[b] + j) * h + hh) * dv + d];
        }
        for (int64_t d = 0; d < dv; ++d)
          ref.o[(row * h + hh) * dv + d] /= sum;
        ref.lse[hh * t + row] = maxScore + std::log(sum);
      }
    }
  }
  return ref;
}

// ---- merge ----------------------------------------------------------------

std::string mla::rt::test::mergeManifest(const MergeShape &s) {
  std::string dt = dtypeName(s.dtype);
  std::string h = std::to_string(s.heads), v = std::to_string(s.vDim),
              n = std::to_string(s.parts);
  return "mla-manifest 1\n"
         "# reference merge for the runtime tests\n"
         "kernel merge\n"
         "function merge\n"
         "dtype " +
         dt +
         "\n"
         "heads " +
         h +
         "\n"
         "v_dim " +
         v +
         "\n"
         "parts " +
         n +
         "\n"
         "arg 0 o_parts memref f32 " +
         dims({n, "?", h, v}) +
         "\n"
         "arg 1 lse_parts memref f32 " +
         dims({n, h, "?"}) +
         "\n"
         "arg 2 o memref " +
         dt + " " + dims({"?", h, v}) +
         "\n"
         "arg 3 lse memref f32 " +
         dims({h, "?"}) +
         "\n"
         "target host-x86_64 code.host-x86_64\n"
         "launch mla_ref_merge_" +
         entrySuffix(s.dtype) +
         " args 0,1,2,3 grid arg0.1,arg0.2,1\n"
         "end-target\n";
}

std::map<std::string, ArgValue> MergeData::byRole() const {
  return {{"o_parts", oParts.view()},
          {"lse_parts", lseParts.view()},
          {"o", o.view()},
          {"lse", lse.view()}};
}

MergeData mla::rt::test::makeMergeData(const MergeShape &s, int64_t rows,
                                       uint32_t seed) {
  std::mt19937 rng(seed);
  MergeData data;
  data.oParts = allocate(DType::F32, {s.parts, rows, s.heads, s.vDim});
  data.lseParts = allocate(DType::F32, {s.parts, s.heads, rows});
  fillUniform(data.oParts, rng, -1, 1);
  fillUniform(data.lseParts, rng, -4, 4);
  float *lse = data.lseParts.dataAs<float>();
  for (int64_t n = 0; n < s.parts; ++n)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t t = 0; t < rows; ++t)
        if ((t + n) % 3 == 0 || t == 1)
          lse[(n * s.heads + h) * rows + t] =
              -std::numeric_limits<float>::infinity();
  data.o = allocate(s.dtype, {rows, s.heads, s.vDim});
  data.lse = allocate(DType::F32, {s.heads, rows});
  return data;
}

KindReference mla::rt::test::referenceMerge(const MergeShape &s,
                                            const MergeData &data) {
  const float *oParts = data.oParts.dataAs<float>();
  const float *lseParts = data.lseParts.dataAs<float>();
  int64_t rows = data.oParts.getShape()[1], h = s.heads, dv = s.vDim;
  KindReference ref;
  ref.o.assign(rows * h * dv, 0.0);
  ref.lse.assign(h * rows, kNegInf);
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t hh = 0; hh < h; ++hh) {
      double maxLse = kNegInf;
      for (int64_t n = 0; n < s.parts; ++n)
        maxLse = std::max<double>(maxLse, lseParts[(n * h + hh) * rows + t]);
      if (maxLse == kNegInf)
        continue;
      double sum = 0;
      for (int64_t n = 0; n < s.parts; ++n)
        sum += std::exp(lseParts[(n * h + hh) * rows + t] - maxLse);
      double total = maxLse + std::log(sum);
      ref.lse[hh * rows + t] = total;
      for (int64_t n = 0; n < s.parts; ++n) {
        double w = std::exp(lseParts[(n * h + hh) * rows + t] - total);
        for (int64_t d = 0; d < dv; ++d)
          ref.o[(t * h + hh) * dv + d] +=
              w * oParts[((n * rows + t) * h + hh) * dv + d];
      }
    }
  return ref;
}

// ---- append_kv ------------------------------------------------------------

std::string mla::rt::test::appendKvManifest(const AppendKvShape &s) {
  std::string dt = dtypeName(s.dtype);
  std::string row = std::to_string(s.row());
  std::string page = s.pageSize ? std::to_string(s.pageSize) : "?";
  return "mla-manifest 1\n"
         "# reference append_kv for the runtime tests\n"
         "kernel append_kv\n"
         "function append_kv\n"
         "dtype " +
         dt +
         "\n"
         "latent_dim " +
         std::to_string(s.latentDim) +
         "\n"
         "rope_dim " +
         std::to_string(s.ropeDim) +
         "\n"
         "page_size " +
         std::to_string(s.pageSize) +
         "\n"
         "arg 0 kv_new memref " +
         dt + " " + dims({"?", row}) +
         "\n"
         "arg 1 slot_mapping memref i32 ?\n"
         "arg 2 kv memref " +
         dt + " " + dims({"?", page, row}) +
         "\n"
         "target host-x86_64 code.host-x86_64\n"
         "launch mla_ref_append_kv_" +
         entrySuffix(s.dtype) +
         " args 0,1,2 grid arg0.0,1,1\n"
         "end-target\n";
}

std::map<std::string, ArgValue> AppendKvData::byRole() const {
  return {{"kv_new", kvNew.view()},
          {"slot_mapping", slotMapping.view()},
          {"kv", kv.view()}};
}

AppendKvData mla::rt::test::makeAppendKvData(const AppendKvShape &s,
                                             const std::vector<int32_t> &slots,
                                             int64_t numPages, uint32_t seed) {
  std::mt19937 rng(seed);
  AppendKvData data;
  int64_t tokens = static_cast<int64_t>(slots.size());
  data.kvNew = allocate(s.dtype, {tokens, s.row()});
  data.slotMapping = allocate(DType::I32, {tokens});
  data.kv = allocate(s.dtype, {numPages, s.actualPageSize(), s.row()});
  fillUniform(data.kvNew, rng, -1, 1);
  fillUniform(data.kv, rng, -1, 1);
  std::copy(slots.begin(), slots.end(), data.slotMapping.dataAs<int32_t>());
  return data;
}

std::vector<float>
mla::rt::test::referenceAppendKv(const AppendKvData &before) {
  std::vector<float> kv = toFloats(before.kv), rows = toFloats(before.kvNew);
  int64_t row = before.kvNew.getShape()[1];
  const int32_t *slots = before.slotMapping.dataAs<int32_t>();
  for (int64_t t = 0; t < before.slotMapping.numElements(); ++t)
    if (slots[t] != -1)
      std::copy(rows.begin() + t * row, rows.begin() + (t + 1) * row,
                kv.begin() + int64_t(slots[t]) * row);
  return kv;
}
