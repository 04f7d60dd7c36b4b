//===- KindTestKernels.cpp - f32 prefill / merge / append_kv, host ABI ----===//
//
// Built as a shared object that stands in for compiled prefill, merge and
// append_kv kernels in the C API tests (the convenience launchers bind roles
// by name: these kernels make a wrong binding visible in the results). Every
// tensor is f32 except the i32 index tensors. One entry each:
//
//   mla_test_prefill(q [T,H,Dqk], k [Tk,H,Dqk], v [Tk,H,Dv],
//                    cu_seqlens_q i32 [B+1], cu_seqlens_k i32 [B+1], scale,
//                    o [T,H,Dv], lse [H,T])           grid T x H x B
//     (a prefill grid with tile_q 1: workgroup (x, h, b) computes query
//     row x of request b, if it has one, for head h)
//     causal, bottom-right aligned: query i of a request (Lq queries, Lk
//     keys) sees keys [0, i + Lk - Lq]; no visible key: o = 0, lse = -inf.
//   mla_test_merge(o_parts [S,T,H,D], lse_parts [S,H,T], o [T,H,D],
//                  lse [H,T])                          grid T x H x 1
//     o = sum_s exp(lse_s - lse) o_s, lse = log sum_s exp(lse_s).
//   mla_test_append_kv(kv_new [T,D], slot_mapping i32 [T],
//                      kv [P,page,D])                  grid T x 1 x 1
//     copies row t to row slot % page of page slot / page (slots outside
//     the pool are skipped).
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cmath>
#include <cstdint>
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

} // namespace

extern "C" void mla_test_prefill(void **args, int64_t x, int64_t h, int64_t b) {
  const auto &q = *static_cast<Memref<3> *>(args[0]);
  const auto &k = *static_cast<Memref<3> *>(args[1]);
  const auto &v = *static_cast<Memref<3> *>(args[2]);
  const int32_t *cuQ = static_cast<Memref<1> *>(args[3])->base<int32_t>();
  const int32_t *cuK = static_cast<Memref<1> *>(args[4])->base<int32_t>();
  float scale = *static_cast<float *>(args[5]);
  const auto &o = *static_cast<Memref<3> *>(args[6]);
  const auto &lse = *static_cast<Memref<2> *>(args[7]);
  int64_t heads = q.sizes[1], dqk = q.sizes[2], dv = v.sizes[2];
  int64_t totalQ = q.sizes[0];
  int64_t q0 = cuQ[b], lq = cuQ[b + 1] - cuQ[b];
  int64_t k0 = cuK[b], lk = cuK[b + 1] - cuK[b];
  std::vector<float> scores(static_cast<size_t>(std::max<int64_t>(lk, 0)));
  for (int64_t i = x; i < std::min(lq, x + 1); ++i) {
    const float *qRow = q.base<float>() + ((q0 + i) * heads + h) * dqk;
    float *oRow = o.base<float>() + ((q0 + i) * heads + h) * dv;
    int64_t visible = std::min(lk, i + lk - lq + 1);
    float maxScore = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < visible; ++j) {
      const float *kRow = k.base<float>() + ((k0 + j) * heads + h) * dqk;
      float dot = 0;
      for (int64_t d = 0; d < dqk; ++d)
        dot += qRow[d] * kRow[d];
      scores[j] = dot * scale;
      maxScore = std::max(maxScore, scores[j]);
    }
    std::fill(oRow, oRow + dv, 0.0f);
    float *lseOut = lse.base<float>() + h * totalQ + q0 + i;
    if (visible <= 0) {
      *lseOut = -std::numeric_limits<float>::infinity();
      continue;
    }
    float sum = 0;
    for (int64_t j = 0; j < visible; ++j) {
      float w = std::exp(scores[j] - maxScore);
      sum += w;
      const float *vRow = v.base<float>() + ((k0 + j) * heads + h) * dv;
      for (int64_t d = 0; d < dv; ++d)
        oRow[d] += w * vRow[d];
    }
    for (int64_t d = 0; d < dv; ++d)
      oRow[d] /= sum;
    *lseOut = maxScore + std::log(sum);
  }
}

extern "C" void mla_test_merge(void **args, int64_t t, int64_t h, int64_t) {
  const auto &oParts = *static_cast<Memref<4> *>(args[0]);
  const auto &lseParts = *static_cast<Memref<3> *>(args[1]);
  const auto &o = *static_cast<Memref<3> *>(args[2]);
  const auto &lse = *static_cast<Memref<2> *>(args[3]);
  int64_t parts = oParts.sizes[0], rows = oParts.sizes[1],
          heads = oParts.sizes[2], dim = oParts.sizes[3];
  auto partLse = [&](int64_t s) {
    return lseParts.base<float>()[(s * heads + h) * rows + t];
  };
  float maxLse = -std::numeric_limits<float>::infinity();
  for (int64_t s = 0; s < parts; ++s)
    maxLse = std::max(maxLse, partLse(s));
  float *oRow = o.base<float>() + (t * heads + h) * dim;
  float *lseOut = lse.base<float>() + h * rows + t;
  std::fill(oRow, oRow + dim, 0.0f);
  if (std::isinf(maxLse)) {
    *lseOut = -std::numeric_limits<float>::infinity();
    return;
  }
  float sum = 0;
  for (int64_t s = 0; s < parts; ++s)
    sum += std::exp(partLse(s) - maxLse);
  float total = maxLse + std::log(sum);
  for (int64_t s = 0; s < parts; ++s) {
    float w = std::exp(partLse(s) - total);
    const float *part =
        oParts.base<float>() + ((s * rows + t) * heads + h) * dim;
    for (int64_t d = 0; d < dim; ++d)
      oRow[d] += w * part[d];
  }
  *lseOut = total;
}

extern "C" void mla_test_append_kv(void **args, int64_t t, int64_t, int64_t) {
  const auto &kvNew = *static_cast<Memref<2> *>(args[0]);
  const int32_t *slots = static_cast<Memref<1> *>(args[1])->base<int32_t>();
  const auto &kv = *static_cast<Memref<3> *>(args[2]);
  int64_t dim = kvNew.sizes[1];
  int64_t pageSize = kv.sizes[1];
  int64_t slot = slots[t];
  if (slot < 0 || slot >= kv.sizes[0] * pageSize)
    return;
  const float *src = kvNew.base<float>() + t * dim;
  float *dst = kv.base<float>() + slot * dim;
  std::copy(src, src + dim, dst);
}
