//===- RefDecodeKernel.cpp - A reference decode with the host ABI ---------===//
//
// Built as a shared object that stands in for compiler output in the tests.
// Two launches implement split-KV MLA decode:
//   *_k0 (grid batch x 1 x splits): q, kv, block_table, seq_lens, scale,
//        ws_o [B,Sq,H,S,Dv] f32, ws_lse [B,Sq,H,S] f32 -> per-split partial
//        softmax outputs over the split's share of the sequence;
//   *_k1 (grid batch x q_len x heads): ws_o, ws_lse, o, lse -> combined
//        result of one query row.
// The grids are those the decode kind requires (runtime/lib/DecodeKind.cpp)
// with head_group = heads.
// Query i of a request attends to tokens [0, seq_lens[b] - q_len + i] (MTP:
// causal within the drafts), as the compiled kernels do; values are the first
// Dv elements of each kv row. Entries exist for bf16 and f32 q/kv/o.
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

template <typename T> void partial(void **args, int64_t b, int64_t split) {
  const auto &q = *static_cast<Memref<4> *>(args[0]);
  const auto &kv = *static_cast<Memref<3> *>(args[1]);
  const auto &table = *static_cast<Memref<2> *>(args[2]);
  const auto &lens = *static_cast<Memref<1> *>(args[3]);
  float scale = *static_cast<float *>(args[4]);
  const auto &wsO = *static_cast<Memref<5> *>(args[5]);
  const auto &wsLse = *static_cast<Memref<4> *>(args[6]);

  int64_t qLen = q.sizes[1], heads = q.sizes[2], dim = q.sizes[3];
  int64_t pageSize = kv.sizes[1], splits = wsO.sizes[3], dimV = wsO.sizes[4];
  int64_t length = lens.base<int32_t>()[b * lens.strides[0]];
  int64_t chunk = (length + splits - 1) / splits;
  int64_t begin = std::min(length, split * chunk);
  int64_t end = std::min(length, begin + chunk);

  std::vector<const T *> rows;
  for (int64_t t = begin; t < end; ++t) {
    int32_t page = table.base<int32_t>()[b * table.strides[0] +
                                         (t / pageSize) * table.strides[1]];
    rows.push_back(kv.base<T>() + page * kv.strides[0] +
                   (t % pageSize) * kv.strides[1]);
  }
  std::vector<float> scores(rows.size()), acc(dimV);
  for (int64_t i = 0; i < qLen; ++i) {
    // The rows of this split that query i may see.
    size_t visible = static_cast<size_t>(std::clamp<int64_t>(
        length - qLen + i + 1 - begin, 0, static_cast<int64_t>(rows.size())));
    for (int64_t h = 0; h < heads; ++h) {
      const T *qRow =
          q.base<T>() + b * q.strides[0] + i * q.strides[1] + h * q.strides[2];
      float maxScore = -std::numeric_limits<float>::infinity();
      for (size_t t = 0; t < visible; ++t) {
        float dot = 0;
        for (int64_t d = 0; d < dim; ++d)
          dot += toFloat(qRow[d]) * toFloat(rows[t][d]);
        scores[t] = dot * scale;
        maxScore = std::max(maxScore, scores[t]);
      }
      float sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (size_t t = 0; t < visible; ++t) {
        float weight = std::exp(scores[t] - maxScore);
        sum += weight;
        for (int64_t d = 0; d < dimV; ++d)
          acc[d] += weight * toFloat(rows[t][d]);
      }
      float *out = wsO.base<float>() + b * wsO.strides[0] + i * wsO.strides[1] +
                   h * wsO.strides[2] + split * wsO.strides[3];
      for (int64_t d = 0; d < dimV; ++d)
        out[d] = visible == 0 ? 0.0f : acc[d] / sum;
      wsLse.base<float>()[b * wsLse.strides[0] + i * wsLse.strides[1] +
                          h * wsLse.strides[2] + split * wsLse.strides[3]] =
          visible == 0 ? -std::numeric_limits<float>::infinity()
                       : maxScore + std::log(sum);
    }
  }
}

template <typename T>
void combine(void **args, int64_t b, int64_t i, int64_t h) {
  const auto &wsO = *static_cast<Memref<5> *>(args[0]);
  const auto &wsLse = *static_cast<Memref<4> *>(args[1]);
  const auto &o = *static_cast<Memref<4> *>(args[2]);
  const auto &lse = *static_cast<Memref<3> *>(args[3]);

  int64_t splits = wsO.sizes[3], dimV = wsO.sizes[4];
  {
    const float *partLse = wsLse.base<float>() + b * wsLse.strides[0] +
                           i * wsLse.strides[1] + h * wsLse.strides[2];
    const float *partO = wsO.base<float>() + b * wsO.strides[0] +
                         i * wsO.strides[1] + h * wsO.strides[2];
    float maxLse = -std::numeric_limits<float>::infinity();
    for (int64_t s = 0; s < splits; ++s)
      maxLse = std::max(maxLse, partLse[s * wsLse.strides[3]]);
    float sum = 0;
    std::vector<float> acc(dimV, 0.0f);
    if (std::isfinite(maxLse)) {
      for (int64_t s = 0; s < splits; ++s) {
        float weight = std::exp(partLse[s * wsLse.strides[3]] - maxLse);
        sum += weight;
        for (int64_t d = 0; d < dimV; ++d)
          acc[d] += weight * partO[s * wsO.strides[3] + d];
      }
    }
    T *out =
        o.base<T>() + b * o.strides[0] + i * o.strides[1] + h * o.strides[2];
    for (int64_t d = 0; d < dimV; ++d)
      out[d] = fromFloat<T>(sum > 0 ? acc[d] / sum : 0.0f);
    lse.base<float>()[b * lse.strides[0] + i * lse.strides[1] +
                      h * lse.strides[2]] =
        sum > 0 ? maxLse + std::log(sum) : maxLse;
  }
}

} // namespace

extern "C" {
void mla_decode_k0(void **args, int64_t bx, int64_t, int64_t bz) {
  partial<BF16>(args, bx, bz);
}
void mla_decode_k1(void **args, int64_t bx, int64_t by, int64_t bz) {
  combine<BF16>(args, bx, by, bz);
}
void mla_decode_f32_k0(void **args, int64_t bx, int64_t, int64_t bz) {
  partial<float>(args, bx, bz);
}
void mla_decode_f32_k1(void **args, int64_t bx, int64_t by, int64_t bz) {
  combine<float>(args, bx, by, bz);
}
}
