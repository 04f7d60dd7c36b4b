//===- Options.cpp - mla-bench's command line -----------------------------===//

#include "Options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <vector>

using namespace mla::rt;
using namespace mla::bench;

const char *const mla::bench::kHelp =
    R"help(usage: mla-bench PKG --scale X|default LENGTHS [options]

Times the decode or prefill kernel of the mla package PKG on random inputs.
Decode: B requests with their cached tokens in a paged cache (each request
owns ceil(len / page_size) pages). Prefill: B requests of new tokens, each
attending to itself (causal when the package is).

LENGTHS, exactly one of:
  --batch B --seq-len L
                       B requests (1 <= B <= 2^24) of L tokens each
                       (0 <= L <= 2^31 - 1)
  --batch B --ragged MIN:MAX --seed N
                       B requests, request b of MIN + x_b mod (MAX - MIN + 1)
                       tokens, x_b the b-th output (from 0) of splitmix64
                       seeded with N (0 <= MIN <= MAX <= 2^31 - 1)
  --seq-lens FILE.npy  one request per element of an int32 [B] array (int64
                       accepted when every value fits), each length >= 0
A request of length 0 is valid (decode: o = 0, lse = -inf).

options:
  --device=NAME        cuda (default), cuda:N, hip, hip:N, host, emu (the AMD
                       emulator, for *-emu packages) or auto: the names
                       mla-run --device takes
  --scale X|default    softmax scale applied to q.k (required): a finite,
                       nonzero number, or "default" for 1/sqrt(D) with D the q.k
                       length (decode: latent_dim + rope_dim; prefill:
                       qk_dim); the value used is printed as scale=
  --warmup N           untimed launches first (default 10)
  --iters N            timed launches (default 50)
  --rotate K           input/output copies to rotate through (default: enough
                       to exceed 3 x 60 MB of L2, capped by free memory)
  --ceiling-gbs G      memory bandwidth ceiling in GB/s (default 4223)
  --ceiling-tflops T   compute ceiling in TFLOP/s (default 786)
  --csv FILE           append the result as a CSV row (header when new)
  --seed S             seed of the random inputs (splitmix64, default 1)
                       and of the --ragged lengths (required there)
  --q-len N            query length when the package's is dynamic (default 1)
  --page-size N        page size when the package's is dynamic (default 64)
  --threads N          host worker threads (default: all cores)
  --reuse-plan         decode: time the launches as the layers after the
                       first of a decode step run them, skipping the plan
                       launch of the length-aware schedule
                       (LaunchOptions::reusePlan; one untimed full launch
                       first computes the plan in the reserved workspace);
                       no effect on a kernel without a plan (reuse_plan=0
                       in the output) or on the host
  --help               print this help and exit
  --version            print the mla version and package format and exit
Options taking a value accept both "--opt VALUE" and "--opt=VALUE".

Prints one line, "mla-bench: key=value ...", with time in microseconds
(median, min, max over the timed launches), GB/s counting the minimum bytes
moved, E * (sum(len) * (Dv + rope) + B * Sq * H * (Dv + rope) + B * Sq * H *
Dv) with E the element size, and TFLOP/s counting 2 * Sq * H * sum(len) *
(2 * Dv + rope). Prefill: bytes E * T * H * (2 * Dqk + Dv) for q, k, v plus
o and lse (T = sum(len)); TFLOP/s counting 2 * H * sum(L^2) * (Dqk + Dv),
halved when causal. The lengths are summarized as batch, sum_len, min_len,
max_len and lengths (uniform, ragged:MIN:MAX or file:NAME). Errors are one
line "mla-bench: error: MESSAGE", exit 1.
)help";

namespace {

std::optional<double> parsePositive(const std::string &text) {
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || errno || !std::isfinite(value) || value <= 0)
    return std::nullopt;
  return value;
}

/// The options with a value, parsed into `options` as they come.
class OptionParser {
public:
  explicit OptionParser(Options &options) : options(options) {
    LengthOptions &lengths = options.lengths;
    integers = {
        {"--batch", {&lengths.batch, 1, 1 << 24}},
        {"--seq-len", {&seqLen, 0, kMaxLength}},
        {"--warmup", {&options.warmup, 0, 1000000}},
        {"--iters", {&options.iters, 1, 1000000}},
        {"--rotate", {&options.rotate, 1, 1000000}},
        {"--q-len", {&options.qLen, 1, 1 << 16}},
        {"--page-size", {&options.pageSize, 1, 1 << 20}},
        {"--threads", {&threads, 1, 1024}},
        {"--seed", {&seed, 0, INT64_MAX}},
    };
  }

  bool known(const std::string &name) const {
    return integers.count(name) || name == "--device" || name == "--scale" ||
           name == "--ceiling-gbs" || name == "--ceiling-tflops" ||
           name == "--csv" || name == "--ragged" || name == "--seq-lens";
  }

  /// Option `name` (known) with `value` (not empty).
  Status set(const std::string &name, const std::string &value) {
    if (auto it = integers.find(name); it != integers.end()) {
      std::optional<int64_t> parsed =
          parseInteger(value, it->second.min, it->second.max);
      if (!parsed)
        return usageError(name + " '" + value + "' is not an integer in [" +
                          std::to_string(it->second.min) + ", " +
                          std::to_string(it->second.max) + "]");
      *it->second.field = *parsed;
      options.lengths.seedGiven |= name == "--seed";
    } else if (name == "--device") {
      options.device = value;
    } else if (name == "--csv") {
      options.csv = value;
    } else if (name == "--seq-lens") {
      options.lengths.seqLensFile = value;
    } else if (name == "--ragged") {
      Expected<std::pair<int64_t, int64_t>> range = parseRaggedRange(value);
      if (!range.ok())
        return range.status();
      options.lengths.ragged = *range;
    } else if (name == "--scale" && value == "default") {
      options.scaleDefault = true;
      options.scale.reset();
    } else if (name == "--scale") {
      options.scaleDefault = false;
      char *end = nullptr;
      errno = 0;
      float scale = std::strtof(value.c_str(), &end);
      if (*end || errno || !std::isfinite(scale) || scale == 0.0f)
        return usageError("--scale '" + value +
                          "' is not a finite, nonzero number");
      options.scale = scale;
    } else {
      std::optional<double> ceiling = parsePositive(value);
      if (!ceiling)
        return usageError(name + " '" + value + "' is not a positive number");
      (name == "--ceiling-gbs" ? options.ceilingGbs : options.ceilingTflops) =
          *ceiling;
    }
    return Status::success();
  }

  /// Copies the values parsed into locals to `options`.
  void finish() {
    options.threads = static_cast<unsigned>(threads);
    options.lengths.seed = static_cast<uint64_t>(seed);
    if (seqLen >= 0)
      options.lengths.seqLen = seqLen;
  }

private:
  struct IntOption {
    int64_t *field;
    int64_t min, max;
  };
  Options &options;
  std::map<std::string, IntOption> integers;
  int64_t threads = 0, seed = 1, seqLen = -1;
};

} // namespace

Expected<Options> mla::bench::parseOptions(int argc, char **argv) {
  Options options;
  OptionParser parser(options);
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      return options;
    }
    if (arg == "--version") {
      options.version = true;
      return options;
    }
    if (arg == "--reuse-plan") {
      options.reusePlan = true;
      continue;
    }
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0 || arg == "--") {
      if (!arg.empty() && arg[0] == '-')
        return usageError("unknown option '" + arg + "' (see --help)");
      positional.push_back(arg);
      continue;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    if (!parser.known(name))
      return usageError("unknown option '" + name + "' (see --help)");
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 == argc)
        return usageError("option " + name + " needs a value");
      value = argv[++i];
    }
    if (value.empty())
      return usageError("option " + name + " needs a value");
    if (Status status = parser.set(name, value); !status.ok())
      return status;
  }
  parser.finish();
  if (positional.empty())
    return usageError("missing the package argument (see --help)");
  if (positional.size() > 1)
    return usageError("unexpected argument '" + positional[1] +
                      "' (only one package)");
  options.package = positional[0];
  if (Status status = checkLengthOptions(options.lengths); !status.ok())
    return status;
  if (!options.scale && !options.scaleDefault)
    return usageError("missing required option --scale (the softmax scale: a "
                      "number, or 'default' for 1/sqrt of the q.k length)");
  return options;
}
