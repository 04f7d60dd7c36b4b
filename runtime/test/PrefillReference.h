//===- PrefillReference.h - prefill data, float64 reference ----*- C++ -*-===//
//
// Shared by the host end-to-end tests (test/e2e) and the CUDA package tests:
// random ragged prefill problems (never zeros), the float64 reference with
// bottom-right causal masking, and the comparison of o and lse.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_RUNTIME_TEST_PREFILLREFERENCE_H
#define MLA_RUNTIME_TEST_PREFILLREFERENCE_H

#include "mla/runtime/DType.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace mla::rt::test {

/// Values rounded to the kernel dtype, as bytes and as the exact doubles the
/// kernel sees.
struct RoundedBuffer {
  DType dtype = DType::F32;
  std::vector<uint8_t> bytes;
  std::vector<double> exact;
};

inline RoundedBuffer makeRounded(DType dtype, size_t n, std::mt19937 &rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  RoundedBuffer b{dtype, std::vector<uint8_t>(n * dtypeSize(dtype)), {}};
  b.exact.resize(n);
  for (size_t i = 0; i < n; ++i) {
    float v = dist(rng);
    if (dtype == DType::BF16) {
      uint16_t bits = floatToBF16(v);
      std::memcpy(&b.bytes[i * 2], &bits, 2);
      b.exact[i] = bf16ToFloat(bits);
    } else if (dtype == DType::F16) {
      uint16_t bits = floatToF16(v);
      std::memcpy(&b.bytes[i * 2], &bits, 2);
      b.exact[i] = f16ToFloat(bits);
    } else {
      std::memcpy(&b.bytes[i * 4], &v, 4);
      b.exact[i] = v;
    }
  }
  return b;
}

inline double readAs(DType dtype, const uint8_t *p) {
  if (dtype == DType::F32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return dtype == DType::BF16 ? bf16ToFloat(bits) : f16ToFloat(bits);
}

/// A ragged prefill problem: q [T, H, Dqk], k [Tk, H, Dqk], v [Tk, H, Dv].
struct PrefillProblem {
  int64_t heads = 0, dqk = 0, dv = 0;
  bool causal = false;
  DType dtype = DType::F32;
  std::vector<int32_t> cuQ, cuK; // [B + 1]
  RoundedBuffer q, k, v;
  float scale = 0.0f;

  int64_t tokens() const { return cuQ.back(); }
  int64_t keyTokens() const { return cuK.back(); }
};

inline PrefillProblem makePrefill(int64_t heads, int64_t dqk, int64_t dv,
                                  bool causal, DType dtype,
                                  const std::vector<int32_t> &lensQ,
                                  const std::vector<int32_t> &lensK,
                                  std::mt19937 &rng) {
  PrefillProblem p;
  p.heads = heads;
  p.dqk = dqk;
  p.dv = dv;
  p.causal = causal;
  p.dtype = dtype;
  p.cuQ = {0};
  p.cuK = {0};
  for (size_t b = 0; b < lensQ.size(); ++b) {
    p.cuQ.push_back(p.cuQ.back() + lensQ[b]);
    p.cuK.push_back(p.cuK.back() + lensK[b]);
  }
  p.q = makeRounded(dtype, p.tokens() * heads * dqk, rng);
  p.k = makeRounded(dtype, p.keyTokens() * heads * dqk, rng);
  p.v = makeRounded(dtype, p.keyTokens() * heads * dv, rng);
  p.scale = 1.0f / std::sqrt(static_cast<float>(dqk));
  return p;
}

/// Chunked prefill: splits every request's keys of `whole` (whose requests
/// have `ctx[b]` cached context tokens followed by `lq[b]` new ones) into
/// the context chunk (`newPart` false: no mask) or the new tokens' chunk
/// (`newPart` true: causal). Queries stay those of `whole`.
inline PrefillProblem keyChunk(const PrefillProblem &whole,
                               const std::vector<int32_t> &ctx,
                               const std::vector<int32_t> &lq, bool newPart) {
  PrefillProblem c = whole;
  c.causal = newPart;
  c.cuK = {0};
  c.k.bytes.clear();
  c.v.bytes.clear();
  c.k.exact.clear();
  c.v.exact.clear();
  const size_t es = dtypeSize(whole.dtype);
  const int64_t kRow = whole.heads * whole.dqk, vRow = whole.heads * whole.dv;
  for (size_t b = 0; b < ctx.size(); ++b) {
    int64_t first = whole.cuK[b] + (newPart ? ctx[b] : 0);
    int64_t n = newPart ? lq[b] : ctx[b];
    c.cuK.push_back(c.cuK.back() + static_cast<int32_t>(n));
    c.k.bytes.insert(c.k.bytes.end(), whole.k.bytes.begin() + first * kRow * es,
                     whole.k.bytes.begin() + (first + n) * kRow * es);
    c.v.bytes.insert(c.v.bytes.end(), whole.v.bytes.begin() + first * vRow * es,
                     whole.v.bytes.begin() + (first + n) * vRow * es);
    c.k.exact.insert(c.k.exact.end(), whole.k.exact.begin() + first * kRow,
                     whole.k.exact.begin() + (first + n) * kRow);
    c.v.exact.insert(c.v.exact.end(), whole.v.exact.begin() + first * vRow,
                     whole.v.exact.begin() + (first + n) * vRow);
  }
  return c;
}

/// float64 o [T, H, Dv] and lse [H, T] (natural log; -inf and o = 0 for a
/// query that sees no key).
struct PrefillResult {
  std::vector<double> o, lse;
};

/// An attention variant (the ops' score/mask/sink regions) in float64:
/// empty functions are absent. Positions: key j of its request, query i at
/// i + Lk - Lq.
struct VariantRef {
  std::function<double(double score, int64_t b, int64_t h, int64_t qpos,
                       int64_t kpos)>
      score;
  std::function<bool(int64_t b, int64_t h, int64_t qpos, int64_t kpos)> mask;
  std::function<double(int64_t b, int64_t h, int64_t qpos)> sink;
};

/// Softmax attention of one query row over `n` keys with scores `s`
/// (already scaled and rewritten; -inf = invisible) and an optional sink
/// logit: the weights into `w` (unnormalised, relative to the returned max)
/// and the LSE; returns false when nothing is visible (o = 0, lse = -inf).
inline bool softmaxRow(const std::vector<double> &s, const double *sink,
                       std::vector<double> &w, double &lse) {
  double m = sink ? *sink : -INFINITY;
  for (double x : s)
    m = std::max(m, x);
  w.assign(s.size(), 0.0);
  if (std::isinf(m) && m < 0) {
    lse = -INFINITY;
    return false;
  }
  double sum = sink ? std::exp(*sink - m) : 0.0;
  for (size_t j = 0; j < s.size(); ++j) {
    w[j] = std::isinf(s[j]) ? 0.0 : std::exp(s[j] - m);
    sum += w[j];
  }
  for (double &x : w)
    x /= sum;
  lse = m + std::log(sum);
  return true;
}

inline PrefillResult referencePrefill(const PrefillProblem &p,
                                      const VariantRef &variant) {
  const int64_t T = p.tokens(), H = p.heads, Dqk = p.dqk, Dv = p.dv;
  PrefillResult r;
  r.o.assign(T * H * Dv, 0.0);
  r.lse.assign(H * T, -INFINITY);
  std::vector<double> s, w;
  for (size_t b = 0; b + 1 < p.cuQ.size(); ++b) {
    const int64_t q0 = p.cuQ[b], lq = p.cuQ[b + 1] - q0;
    const int64_t k0 = p.cuK[b], lk = p.cuK[b + 1] - k0;
    for (int64_t i = 0; i < lq; ++i) {
      const int64_t qpos = i + lk - lq;
      const int64_t visible =
          p.causal ? std::clamp<int64_t>(qpos + 1, 0, lk) : lk;
      for (int64_t h = 0; h < H; ++h) {
        const double *qr = &p.q.exact[((q0 + i) * H + h) * Dqk];
        s.assign(visible, 0.0);
        for (int64_t j = 0; j < visible; ++j) {
          const double *kr = &p.k.exact[((k0 + j) * H + h) * Dqk];
          double dot = 0;
          for (int64_t d = 0; d < Dqk; ++d)
            dot += qr[d] * kr[d];
          s[j] = dot * p.scale;
          if (variant.score)
            s[j] = variant.score(s[j], b, h, qpos, j);
          if (variant.mask && !variant.mask(b, h, qpos, j))
            s[j] = -INFINITY;
        }
        double sinkLogit = variant.sink ? variant.sink(b, h, qpos) : 0.0;
        double lse;
        if (!softmaxRow(s, variant.sink ? &sinkLogit : nullptr, w, lse))
          continue;
        double *orow = &r.o[((q0 + i) * H + h) * Dv];
        for (int64_t j = 0; j < visible; ++j) {
          const double *vr = &p.v.exact[((k0 + j) * H + h) * Dv];
          for (int64_t d = 0; d < Dv; ++d)
            orow[d] += w[j] * vr[d];
        }
        r.lse[h * T + q0 + i] = lse;
      }
    }
  }
  return r;
}

inline PrefillResult referencePrefill(const PrefillProblem &p) {
  const int64_t T = p.tokens(), H = p.heads, Dqk = p.dqk, Dv = p.dv;
  PrefillResult r;
  r.o.assign(T * H * Dv, 0.0);
  r.lse.assign(H * T, -INFINITY);
  std::vector<double> s;
  for (size_t b = 0; b + 1 < p.cuQ.size(); ++b) {
    const int64_t q0 = p.cuQ[b], lq = p.cuQ[b + 1] - q0;
    const int64_t k0 = p.cuK[b], lk = p.cuK[b + 1] - k0;
    for (int64_t i = 0; i < lq; ++i) {
      const int64_t visible =
          p.causal ? std::clamp<int64_t>(i + 1 + lk - lq, 0, lk) : lk;
      for (int64_t h = 0; h < H; ++h) {
        const double *qr = &p.q.exact[((q0 + i) * H + h) * Dqk];
        s.assign(visible, 0.0);
        double m = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          const double *kr = &p.k.exact[((k0 + j) * H + h) * Dqk];
          double dot = 0;
          for (int64_t d = 0; d < Dqk; ++d)
            dot += qr[d] * kr[d];
          s[j] = dot * p.scale;
          m = std::max(m, s[j]);
        }
        if (visible == 0)
          continue;
        double sum = 0;
        double *orow = &r.o[((q0 + i) * H + h) * Dv];
        for (int64_t j = 0; j < visible; ++j) {
          double e = std::exp(s[j] - m);
          sum += e;
          const double *vr = &p.v.exact[((k0 + j) * H + h) * Dv];
          for (int64_t d = 0; d < Dv; ++d)
            orow[d] += e * vr[d];
        }
        for (int64_t d = 0; d < Dv; ++d)
          orow[d] /= sum;
        r.lse[h * T + q0 + i] = m + std::log(sum);
      }
    }
  }
  return r;
}

/// A paged decode problem with one query per request (the variant
/// examples' shape): q [B, 1, H, D], a page pool [pages, P, D] in a random
/// page order, block table [B, maxPages], lengths.
struct DecodeProblem {
  int64_t heads = 0, d = 0, dv = 0, page = 0, maxPages = 0, pages = 0;
  std::vector<int32_t> lens, table;
  RoundedBuffer q, kv;
  float scale = 0.0f;

  int64_t batch() const { return static_cast<int64_t>(lens.size()); }
};

inline DecodeProblem makeDecode(int64_t heads, int64_t d, int64_t dv,
                                int64_t page, DType dtype,
                                const std::vector<int32_t> &lens,
                                std::mt19937 &rng) {
  DecodeProblem p;
  p.heads = heads;
  p.d = d;
  p.dv = dv;
  p.page = page;
  p.lens = lens;
  int32_t maxLen = *std::max_element(lens.begin(), lens.end());
  p.maxPages = std::max<int64_t>(1, (maxLen + page - 1) / page);
  p.pages = p.batch() * p.maxPages;
  p.table.resize(p.pages);
  for (int64_t i = 0; i < p.pages; ++i)
    p.table[i] = static_cast<int32_t>(i);
  std::shuffle(p.table.begin(), p.table.end(), rng);
  p.q = makeRounded(dtype, p.batch() * heads * d, rng);
  p.kv = makeRounded(dtype, p.pages * page * d, rng);
  p.scale = 1.0f / std::sqrt(192.0f);
  return p;
}

/// float64 o [B, 1, H, Dv] and lse [B, 1, H] of a decode with a variant:
/// the query sits at position len - 1, keys at 0 .. len - 1.
inline PrefillResult referenceDecode(const DecodeProblem &p,
                                     const VariantRef &variant) {
  const int64_t B = p.batch(), H = p.heads, D = p.d, Dv = p.dv, P = p.page;
  PrefillResult r;
  r.o.assign(B * H * Dv, 0.0);
  r.lse.assign(B * H, -INFINITY);
  std::vector<double> s, w;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t qpos = p.lens[b] - 1;
    auto row = [&](int64_t t) {
      int64_t pg = p.table[b * p.maxPages + t / P];
      return &p.kv.exact[(pg * P + t % P) * D];
    };
    for (int64_t h = 0; h < H; ++h) {
      const double *qr = &p.q.exact[(b * H + h) * D];
      s.assign(p.lens[b], 0.0);
      for (int64_t t = 0; t < p.lens[b]; ++t) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += qr[d] * row(t)[d];
        s[t] = dot * p.scale;
        if (variant.score)
          s[t] = variant.score(s[t], b, h, qpos, t);
        if (variant.mask && !variant.mask(b, h, qpos, t))
          s[t] = -INFINITY;
      }
      double sinkLogit = variant.sink ? variant.sink(b, h, qpos) : 0.0;
      double l;
      if (!softmaxRow(s, variant.sink ? &sinkLogit : nullptr, w, l))
        continue;
      for (int64_t t = 0; t < p.lens[b]; ++t)
        for (int64_t d = 0; d < Dv; ++d)
          r.o[(b * H + h) * Dv + d] += w[t] * row(t)[d];
      r.lse[b * H + h] = l;
    }
  }
  return r;
}

/// score <- cap * tanh(score / cap): the softcap examples (cap 30) and
/// decode_softcap_input (cap read from its rank-0 input `cap`).
inline VariantRef softcapVariant(double cap) {
  VariantRef v;
  v.score = [cap](double s, int64_t, int64_t, int64_t, int64_t) {
    return cap * std::tanh(s / cap);
  };
  return v;
}

/// The float64 form of the variant examples of test/e2e/variants (and
/// docs/Variants.md): softcap, sliding_window, alibi (over `heads` heads),
/// sink (per-head logits `sinks`).
inline VariantRef exampleVariant(const std::string &name, int64_t heads,
                                 const std::vector<float> &sinks) {
  VariantRef v;
  if (name == "softcap")
    v = softcapVariant(30.0);
  if (name == "sliding_window")
    v.mask = [](int64_t, int64_t, int64_t qpos, int64_t kpos) {
      return qpos - kpos < 128;
    };
  if (name == "alibi")
    v.score = [heads](double s, int64_t, int64_t h, int64_t qpos,
                      int64_t kpos) {
      double slope = std::exp2(-8.0 * (h + 1) / static_cast<double>(heads));
      return s - slope * static_cast<double>(qpos - kpos);
    };
  if (name == "sink")
    v.sink = [sinks](int64_t, int64_t h, int64_t) { return double(sinks[h]); };
  return v;
}

/// Relative L2 errors of o and of the finite LSEs, and whether the kernel
/// left a NaN anywhere or got the -inf LSEs (rows without keys) wrong.
struct PrefillErrors {
  double relO = 0, relLse = 0;
  int64_t nans = 0, wrongEmpty = 0;
};

inline PrefillErrors comparePrefill(const PrefillResult &ref, DType oType,
                                    const uint8_t *o, const float *lse) {
  PrefillErrors e;
  double errO = 0, normO = 0, errL = 0, normL = 0;
  const size_t es = dtypeSize(oType);
  for (size_t i = 0; i < ref.o.size(); ++i) {
    double g = readAs(oType, o + i * es);
    if (std::isnan(g)) {
      ++e.nans;
      continue;
    }
    errO += (g - ref.o[i]) * (g - ref.o[i]);
    normO += ref.o[i] * ref.o[i];
  }
  for (size_t i = 0; i < ref.lse.size(); ++i) {
    if (std::isnan(lse[i])) {
      ++e.nans;
      continue;
    }
    if (std::isinf(ref.lse[i])) {
      e.wrongEmpty += !(std::isinf(lse[i]) && lse[i] < 0);
      continue;
    }
    errL += (lse[i] - ref.lse[i]) * (lse[i] - ref.lse[i]);
    normL += ref.lse[i] * ref.lse[i];
  }
  e.relO = std::sqrt(errO / std::max(normO, 1e-30));
  e.relLse = std::sqrt(errL / std::max(normL, 1e-30));
  return e;
}

} // namespace mla::rt::test

#endif // MLA_RUNTIME_TEST_PREFILLREFERENCE_H
