//===- Lengths.cpp - mla-bench's request lengths and paged cache ----------===//

#include "Lengths.h"

#include "mla/runtime/Npy.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

using namespace mla::rt;
using namespace mla::bench;

Status mla::bench::usageError(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, message);
}

std::optional<int64_t> mla::bench::parseInteger(const std::string &text,
                                                int64_t min, int64_t max) {
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || value < min || value > max)
    return std::nullopt;
  return value;
}

std::string mla::bench::baseName(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

namespace {

/// The sum, min and max of `lengths.values`.
void summarize(Lengths &lengths) {
  const std::vector<int64_t> &v = lengths.values;
  lengths.sum = 0;
  for (int64_t length : v)
    lengths.sum += length;
  lengths.min = v.empty() ? 0 : *std::min_element(v.begin(), v.end());
  lengths.max = v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

/// --seq-lens FILE.npy: int32 (or int64 within the int32 range) [B].
Expected<Lengths> readLengths(const std::string &path) {
  std::string option = "--seq-lens " + path;
  Expected<HostTensor> tensor = readNpyAs(path, DType::I32);
  if (!tensor.ok())
    return usageError("--seq-lens " + tensor.status().message());
  const std::vector<int64_t> &shape = tensor->getShape();
  if (shape.size() != 1)
    return usageError(option + ": shape " + shapeToString(shape) +
                      ", expected [B] (one length per request)");
  if (shape[0] < 1 || shape[0] > (1 << 24))
    return usageError(option + ": " + std::to_string(shape[0]) +
                      " lengths, expected 1 to 16777216 (the --batch range)");
  Lengths lengths;
  lengths.source = "file:" + baseName(path);
  lengths.ragged = true;
  for (int64_t b = 0; b < shape[0]; ++b) {
    int64_t length = tensor->dataAs<int32_t>()[b];
    if (length < 0)
      return usageError(option + ": seq_lens[" + std::to_string(b) +
                        "] = " + std::to_string(length) + " is negative");
    lengths.values.push_back(length);
  }
  return lengths;
}

} // namespace

Expected<std::pair<int64_t, int64_t>>
mla::bench::parseRaggedRange(const std::string &value) {
  size_t colon = value.find(':');
  std::optional<int64_t> min, max;
  if (colon != std::string::npos) {
    min = parseInteger(value.substr(0, colon), 0, kMaxLength);
    max = parseInteger(value.substr(colon + 1), 0, kMaxLength);
  }
  if (!min || !max)
    return usageError("--ragged '" + value +
                      "' is not MIN:MAX (two integers in [0, " +
                      std::to_string(kMaxLength) + "])");
  if (*min > *max)
    return usageError("--ragged '" + value + "': MIN " + std::to_string(*min) +
                      " is greater than MAX " + std::to_string(*max));
  return std::pair{*min, *max};
}

Status mla::bench::checkLengthOptions(const LengthOptions &options) {
  std::vector<std::string> given;
  if (options.seqLen)
    given.push_back("--seq-len");
  if (options.ragged)
    given.push_back("--ragged");
  if (!options.seqLensFile.empty())
    given.push_back("--seq-lens");
  if (given.size() > 1)
    return usageError(given[0] + " and " + given[1] +
                      " conflict (the lengths come from one of --seq-len L, "
                      "--ragged MIN:MAX or --seq-lens FILE.npy)");
  if (!options.seqLensFile.empty()) {
    if (options.batch)
      return usageError("--batch and --seq-lens conflict (the file gives the "
                        "batch: one length per request)");
    return Status::success();
  }
  if (!options.batch)
    return usageError("missing required option --batch");
  if (given.empty())
    return usageError("missing required option --seq-len (or --ragged "
                      "MIN:MAX --seed N, or --seq-lens FILE.npy)");
  if (options.ragged && !options.seedGiven)
    return usageError("--ragged needs --seed N (the seed of the lengths' "
                      "generator; see --help)");
  return Status::success();
}

std::vector<int64_t> mla::bench::raggedLengths(int64_t batch, int64_t min,
                                               int64_t max, uint64_t seed) {
  Random random{seed};
  std::vector<int64_t> lengths(batch);
  uint64_t span = static_cast<uint64_t>(max - min) + 1;
  for (int64_t &length : lengths)
    length = min + static_cast<int64_t>(random.below(span));
  return lengths;
}

Expected<Lengths> mla::bench::resolveLengths(const LengthOptions &options) {
  Lengths lengths;
  if (!options.seqLensFile.empty()) {
    Expected<Lengths> read = readLengths(options.seqLensFile);
    if (!read.ok())
      return read.status();
    lengths = read.take();
  } else if (options.ragged) {
    auto [min, max] = *options.ragged;
    lengths.values = raggedLengths(options.batch, min, max, options.seed);
    lengths.source =
        "ragged:" + std::to_string(min) + ":" + std::to_string(max);
    lengths.ragged = true;
  } else {
    lengths.values.assign(options.batch, *options.seqLen);
    lengths.source = "uniform";
  }
  summarize(lengths);
  return lengths;
}

Expected<PageLayout>
mla::bench::layoutPages(const std::vector<int64_t> &lengths, int64_t pageSize,
                        Random &random) {
  PageLayout layout;
  int64_t batch = static_cast<int64_t>(lengths.size());
  std::vector<int64_t> owned(batch);
  for (int64_t b = 0; b < batch; ++b) {
    owned[b] = (lengths[b] + pageSize - 1) / pageSize;
    layout.numPages += owned[b];
    layout.maxPages = std::max(layout.maxPages, owned[b]);
  }
  std::string pages = " pages of " + std::to_string(pageSize) + " tokens";
  if (layout.numPages > INT32_MAX)
    return usageError("the lengths need " + std::to_string(layout.numPages) +
                      pages +
                      " (the sum of ceil(len / page_size)), more than 2^31 - "
                      "1 (block_table entries are int32)");
  layout.numPages = std::max<int64_t>(layout.numPages, 1);
  layout.maxPages = std::max<int64_t>(layout.maxPages, 1);
  if (layout.maxPages > INT32_MAX / batch)
    return usageError("the block table needs " + std::to_string(batch) + " x " +
                      std::to_string(layout.maxPages) +
                      " entries (batch x the longest request's pages), more "
                      "than 2^31 - 1");
  std::vector<int64_t> permutation(layout.numPages);
  for (int64_t i = 0; i < layout.numPages; ++i)
    permutation[i] = i;
  for (int64_t i = layout.numPages - 1; i > 0; --i)
    std::swap(permutation[i], permutation[random.below(i + 1)]);
  layout.blockTable.assign(batch * layout.maxPages, 0);
  int64_t next = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < owned[b]; ++p)
      layout.blockTable[b * layout.maxPages + p] = permutation[next++];
  return layout;
}
