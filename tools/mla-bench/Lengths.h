//===- Lengths.h - mla-bench's request lengths and paged cache --*- C++ -*-===//
//
// Where mla-bench's request lengths come from (--seq-len, --ragged MIN:MAX
// with --seed, or --seq-lens FILE.npy), the generator behind --ragged and
// the inputs, the paged cache laid out for the actual lengths, and the
// small helpers the tool's files share (usage errors, integers, names).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_BENCH_LENGTHS_H
#define MLA_BENCH_LENGTHS_H

#include "mla/runtime/Status.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mla::bench {

/// splitmix64 (the reference constants of Vigna's splitmix64.c): the state
/// starts at the seed and each next() adds 0x9e3779b97f4a7c15 to it, then
/// mixes. The lengths of --ragged and the random inputs are drawn from it.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n) (up to a modulo bias below 2^-32 for n < 2^32).
  uint64_t below(uint64_t n) { return next() % n; }
  /// Uniform in [-1, 1), never closer to 0 than 2^-10 (the inputs).
  float value() {
    float v = static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f;
    if (std::fabs(v) < 1.0f / 1024)
      v = std::copysign(1.0f / 1024, v);
    return v;
  }
};

/// An InvalidArgument error: mla-bench's usage errors.
rt::Status usageError(const std::string &message);

/// A decimal integer in [min, max] (strtoll's syntax), or nullopt.
std::optional<int64_t> parseInteger(const std::string &text, int64_t min,
                                    int64_t max);

/// What follows the last '/' of `path`.
std::string baseName(const std::string &path);

/// The lengths options as given: exactly one of --seq-len (with --batch),
/// --ragged (with --batch and --seed) and --seq-lens.
struct LengthOptions {
  /// --batch B; 0 when not given.
  int64_t batch = 0;
  std::optional<int64_t> seqLen;
  /// --ragged MIN:MAX.
  std::optional<std::pair<int64_t, int64_t>> ragged;
  /// --seq-lens FILE.npy; empty when not given.
  std::string seqLensFile;
  bool seedGiven = false;
  uint64_t seed = 1;
};

/// The largest length (seq_lens is int32 in every package).
constexpr int64_t kMaxLength = INT32_MAX;

/// "MIN:MAX" of --ragged: two integers, 0 <= MIN <= MAX <= kMaxLength
/// (usage errors name the option and the value).
rt::Expected<std::pair<int64_t, int64_t>>
parseRaggedRange(const std::string &value);

/// Conflicting and missing options of `options`, as usage errors naming
/// them.
rt::Status checkLengthOptions(const LengthOptions &options);

/// The lengths of one benchmark run and their summary.
struct Lengths {
  std::vector<int64_t> values;
  int64_t sum = 0, min = 0, max = 0;
  /// The CSV's `lengths` column: "uniform", "ragged:MIN:MAX" or
  /// "file:NAME" (NAME the file's base name).
  std::string source;
  /// Not from --seq-len (the CSV's `ragged` column).
  bool ragged = false;
};

/// The lengths of request 0, 1, ..., batch - 1 for --ragged MIN:MAX --seed
/// S: length b = MIN + x_b mod (MAX - MIN + 1), x_b the b-th output
/// (counting from 0) of Random{S}, drawn for nothing else.
std::vector<int64_t> raggedLengths(int64_t batch, int64_t min, int64_t max,
                                   uint64_t seed);

/// The lengths `options` (checked by checkLengthOptions) select; the
/// --seq-lens file is read with the runtime's .npy reader as int32 (int64
/// data converted when every value fits), shape [B] with 1 <= B <= 2^24,
/// every length >= 0.
rt::Expected<Lengths> resolveLengths(const LengthOptions &options);

/// A paged KV cache for `lengths`: request b owns ceil(len_b / pageSize)
/// pages, the next ones of one random permutation of the pool (drawn from
/// `random`, Fisher-Yates from the last page), in its block-table row's
/// first entries; the other entries are 0, a valid page the kernel never
/// reads. The pool has at least one page, the table at least one column.
struct PageLayout {
  int64_t numPages = 0;
  int64_t maxPages = 0;
  /// [lengths.size(), maxPages], row-major.
  std::vector<int64_t> blockTable;
};

/// Fails (a usage error) when the pool or the block table would exceed
/// 2^31 - 1 pages or entries (int32 page indices).
rt::Expected<PageLayout> layoutPages(const std::vector<int64_t> &lengths,
                                     int64_t pageSize, Random &random);

} // namespace mla::bench

#endif // MLA_BENCH_LENGTHS_H
