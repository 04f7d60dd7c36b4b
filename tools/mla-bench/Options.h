//===- Options.h - mla-bench's command line --------------------*- C++ -*-===//

#ifndef MLA_BENCH_OPTIONS_H
#define MLA_BENCH_OPTIONS_H

#include "Lengths.h"

#include "mla/runtime/Status.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mla::bench {

/// mla-bench's command line.
struct Options {
  std::string package;
  std::string device = "cuda";
  /// --batch, --seq-len, --ragged, --seq-lens and --seed.
  LengthOptions lengths;
  /// --scale X; nullopt with scaleDefault for --scale=default.
  std::optional<float> scale;
  bool scaleDefault = false;
  int64_t warmup = 10;
  int64_t iters = 50;
  int64_t rotate = 0;
  double ceilingGbs = 4223;
  double ceilingTflops = 786;
  std::string csv;
  int64_t qLen = 0;
  int64_t pageSize = 0;
  unsigned threads = 0;
  /// --reuse-plan: LaunchOptions::reusePlan after one full launch.
  bool reusePlan = false;
  bool help = false;
  bool version = false;
};

/// --help's text.
extern const char *const kHelp;

/// The options of argv (usage errors name the option and the value).
rt::Expected<Options> parseOptions(int argc, char **argv);

} // namespace mla::bench

#endif // MLA_BENCH_OPTIONS_H
