//===- RefKindKernels.cpp - Reference prefill / merge / append_kv ---------===//
//
// Built as a shared object that stands in for compiled prefill, merge and
// append_kv kernels in the validation and mla-run tests, with the host ABI
// and exactly the argument layouts of the kinds' manifests (KindTestUtils.h
// writes them). One launch each; entries for f32 and bf16 data:
//
//   mla_ref_prefill_<dt>_<causal|full>(q [T,H,Dqk], k [Tk,H,Dqk],
//       v [Tk,H,Dv], cu_seqlens_q i32 [B+1], cu_seqlens_k i32 [B+1],
//       scale f32, o [T,H,Dv], lse f32 [H,T])
//       grid ceil(T / kRefTileQ) x H x B, as compiled prefill kernels:
//       workgroup (x, h, b) computes query rows [x * 4, x * 4 + 4) of
//       request b (none when the request is shorter), head h
//     causal is bottom-right aligned: query i of a request with Lq queries
//     and Lk keys sees keys j <= i + Lk - Lq; no visible key: o = 0,
//     lse = -inf.
//   mla_ref_merge_<dt>(o_parts f32 [N,T,H,Dv], lse_parts f32 [N,H,T],
//       o [T,H,Dv], lse f32 [H,T])                        grid T x H x 1
//     lse = log sum_n exp(lse_n), o = sum_n exp(lse_n - lse) o_n; every
//     part -inf: o = 0, lse = -inf.
//   mla_ref_append_kv_<dt>(kv_new [T,D], slot_mapping i32 [T],
//       kv [P,page,D])                                    grid T x 1 x 1
//     row t goes to row slot % page of page slot / page; slot -1 and slots
//     outside the pool are skipped (the runtime rejects the latter).
//
// Strides come from the descriptors, so any row-major layout works.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

template <int Rank> struct Memref {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];

  template <typename T> T *base() const {
    return static_cast<T *>(aligned) + offset;
  }
};

struct BF16 {
  uint16_t bits;
};

float toFloat(float value) { return value; }
float toFloat(BF16 value) {
  uint32_t bits = static_cast<uint32_t>(value.bits) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

template <typename T> T fromFloat(float value);
template <> float fromFloat<float>(float value) { return value; }
template <> BF16 fromFloat<BF16>(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return BF16{static_cast<uint16_t>(bits >> 16)};
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// The manifests' `config tile_q` (KindTestUtils.cpp).
constexpr int64_t kRefTileQ = 4;

template <typename T, bool Causal>
void prefill(void **args, int64_t x, int64_t h, int64_t b) {
  const auto &q = *static_cast<Memref<3> *>(args[0]);
  const auto &k = *static_cast<Memref<3> *>(args[1]);
  const auto &v = *static_cast<Memref<3> *>(args[2]);
  const auto &cuQ = *static_cast<Memref<1> *>(args[3]);
  const auto &cuK = *static_cast<Memref<1> *>(args[4]);
  float scale = *static_cast<float *>(args[5]);
  const auto &o = *static_cast<Memref<3> *>(args[6]);
  const auto &lse = *static_cast<Memref<2> *>(args[7]);

  int64_t dqk = q.sizes[2], dv = v.sizes[2];
  const int32_t *offQ = cuQ.base<int32_t>(), *offK = cuK.base<int32_t>();
  int64_t q0 = offQ[b * cuQ.strides[0]];
  int64_t lq = offQ[(b + 1) * cuQ.strides[0]] - q0;
  int64_t k0 = offK[b * cuK.strides[0]];
  int64_t lk = offK[(b + 1) * cuK.strides[0]] - k0;
  std::vector<float> scores(static_cast<size_t>(lk)), acc(dv);
  for (int64_t i = x * kRefTileQ; i < std::min(lq, (x + 1) * kRefTileQ); ++i) {
    int64_t visible = Causal ? std::clamp<int64_t>(i + lk - lq + 1, 0, lk) : lk;
    const T *qRow = q.base<T>() + (q0 + i) * q.strides[0] + h * q.strides[1];
    float maxScore = kNegInf;
    for (int64_t j = 0; j < visible; ++j) {
      const T *kRow = k.base<T>() + (k0 + j) * k.strides[0] + h * k.strides[1];
      float dot = 0;
      for (int64_t d = 0; d < dqk; ++d)
        dot += toFloat(qRow[d]) * toFloat(kRow[d]);
      scores[j] = dot * scale;
      maxScore = std::max(maxScore, scores[j]);
    }
    float sum = 0;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t j = 0; j < visible; ++j) {
      float weight = std::exp(scores[j] - maxScore);
      sum += weight;
      const T *vRow = v.base<T>() + (k0 + j) * v.strides[0] + h * v.strides[1];
      for (int64_t d = 0; d < dv; ++d)
        acc[d] += weight * toFloat(vRow[d]);
    }
    T *out = o.base<T>() + (q0 + i) * o.strides[0] + h * o.strides[1];
    for (int64_t d = 0; d < dv; ++d)
      out[d] = fromFloat<T>(visible ? acc[d] / sum : 0.0f);
    lse.base<float>()[h * lse.strides[0] + (q0 + i) * lse.strides[1]] =
        visible ? maxScore + std::log(sum) : kNegInf;
  }
}

template <typename T> void merge(void **args, int64_t t, int64_t h) {
  const auto &oParts = *static_cast<Memref<4> *>(args[0]);
  const auto &lseParts = *static_cast<Memref<3> *>(args[1]);
  const auto &o = *static_cast<Memref<3> *>(args[2]);
  const auto &lse = *static_cast<Memref<2> *>(args[3]);

  int64_t parts = oParts.sizes[0], dv = oParts.sizes[3];
  auto partLse = [&](int64_t n) {
    return lseParts
        .base<float>()[n * lseParts.strides[0] + h * lseParts.strides[1] +
                       t * lseParts.strides[2]];
  };
  float maxLse = kNegInf;
  for (int64_t n = 0; n < parts; ++n)
    maxLse = std::max(maxLse, partLse(n));
  std::vector<float> acc(dv, 0.0f);
  float sum = 0;
  if (maxLse != kNegInf) {
    for (int64_t n = 0; n < parts; ++n) {
      float weight = std::exp(partLse(n) - maxLse);
      sum += weight;
      const float *part = oParts.base<float>() + n * oParts.strides[0] +
                          t * oParts.strides[1] + h * oParts.strides[2];
      for (int64_t d = 0; d < dv; ++d)
        acc[d] += weight * part[d];
    }
  }
  T *out = o.base<T>() + t * o.strides[0] + h * o.strides[1];
  for (int64_t d = 0; d < dv; ++d)
    out[d] = fromFloat<T>(sum > 0 ? acc[d] / sum : 0.0f);
  lse.base<float>()[h * lse.strides[0] + t * lse.strides[1]] =
      sum > 0 ? maxLse + std::log(sum) : kNegInf;
}

template <typename T> void appendKv(void **args, int64_t t) {
  const auto &kvNew = *static_cast<Memref<2> *>(args[0]);
  const auto &slots = *static_cast<Memref<1> *>(args[1]);
  const auto &kv = *static_cast<Memref<3> *>(args[2]);
  int64_t dim = kvNew.sizes[1], pageSize = kv.sizes[1];
  int64_t slot = slots.base<int32_t>()[t * slots.strides[0]];
  if (slot < 0 || slot >= kv.sizes[0] * pageSize)
    return;
  const T *src = kvNew.base<T>() + t * kvNew.strides[0];
  T *dst = kv.base<T>() + (slot / pageSize) * kv.strides[0] +
           (slot % pageSize) * kv.strides[1];
  std::copy(src, src + dim, dst);
}

} // namespace

extern "C" {
void mla_ref_prefill_f32_causal(void **args, int64_t x, int64_t h, int64_t b) {
  prefill<float, true>(args, x, h, b);
}
void mla_ref_prefill_f32_full(void **args, int64_t x, int64_t h, int64_t b) {
  prefill<float, false>(args, x, h, b);
}
void mla_ref_prefill_bf16_causal(void **args, int64_t x, int64_t h, int64_t b) {
  prefill<BF16, true>(args, x, h, b);
}
void mla_ref_prefill_bf16_full(void **args, int64_t x, int64_t h, int64_t b) {
  prefill<BF16, false>(args, x, h, b);
}
void mla_ref_merge_f32(void **args, int64_t t, int64_t h, int64_t) {
  merge<float>(args, t, h);
}
void mla_ref_merge_bf16(void **args, int64_t t, int64_t h, int64_t) {
  merge<BF16>(args, t, h);
}
void mla_ref_append_kv_f32(void **args, int64_t t, int64_t, int64_t) {
  appendKv<float>(args, t);
}
void mla_ref_append_kv_bf16(void **args, int64_t t, int64_t, int64_t) {
  appendKv<BF16>(args, t);
}
}
