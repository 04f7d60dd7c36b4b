//===- mla-bench.cpp - Time a decode or prefill package on random inputs --===//
//
// mla-bench PKG [--device=cuda|cuda:N|host|auto] --batch B --seq-len L
//           --scale X|default [--ragged] [--warmup N] [--iters N] [--rotate K]
//           [--ceiling-gbs G] [--ceiling-tflops T] [--csv FILE] [--seed S]
//           [--q-len N] [--page-size N] [--threads N]
//
// Builds random inputs (never zero) for a paged KV cache with a random page
// permutation, uploads K independent copies of every tensor and rotates
// through them (so that the copies together exceed 3x a 60 MB L2), warms
// up, then times each launch on one stream (CUDA events on a GPU, a steady
// clock on the host) and prints one summary line with the median, min and
// max time, the achieved bandwidth and FLOP rate and their fraction of the
// given ceilings. docs/Runtime.md describes the metrics.
//
//===----------------------------------------------------------------------===//

#include "mla/runtime/Kinds.h"
#include "mla/runtime/Runtime.h"
#include "mla/runtime/mla_runtime.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace mla::rt;

namespace {

const char *const kHelp =
    R"help(usage: mla-bench PKG --batch B --seq-len L --scale X|default [options]

Times the decode or prefill kernel of the mla package PKG on random inputs.
Decode: B requests with L cached tokens each in a paged cache. Prefill: B
requests of L new tokens each attending to themselves (causal when the
package is).

options:
  --device=NAME        cuda (default), cuda:N, host or auto
  --batch B            requests (B >= 1, required)
  --seq-len L          cached tokens per request (L >= 1, required)
  --scale X|default    softmax scale applied to q.k (required): a finite
                       number, or "default" for 1/sqrt(D) with D the q.k
                       length (decode: latent_dim + rope_dim; prefill:
                       qk_dim); the value used is printed as scale=
  --ragged             draw each length uniformly from [ceil(L/2), L]
  --warmup N           untimed launches first (default 10)
  --iters N            timed launches (default 50)
  --rotate K           input/output copies to rotate through (default: enough
                       to exceed 3 x 60 MB of L2, capped by free memory)
  --ceiling-gbs G      memory bandwidth ceiling in GB/s (default 4223)
  --ceiling-tflops T   compute ceiling in TFLOP/s (default 786)
  --csv FILE           append the result as a CSV row (header when new)
  --seed S             random seed (default 1)
  --q-len N            query length when the package's is dynamic (default 1)
  --page-size N        page size when the package's is dynamic (default 64)
  --threads N          host worker threads (default: all cores)
  --help               print this help and exit
  --version            print the mla version and package format and exit
Options taking a value accept both "--opt VALUE" and "--opt=VALUE".

Prints one line, "mla-bench: key=value ...", with time in microseconds
(median, min, max over the timed launches), GB/s counting the minimum bytes
moved, E * (sum(len) * (Dv + rope) + B * Sq * H * (Dv + rope) + B * Sq * H *
Dv) with E the element size, and TFLOP/s counting 2 * Sq * H * sum(len) *
(2 * Dv + rope). Prefill: bytes E * T * H * (2 * Dqk + Dv) for q, k, v plus
o and lse; TFLOP/s counting 2 * H * sum(L^2) * (Dqk + Dv), halved when
causal. Errors are one line "mla-bench: error: MESSAGE", exit 1.
)help";

constexpr double kL2Bytes = 60e6;

struct Options {
  std::string package;
  std::string device = "cuda";
  int64_t batch = 0;
  int64_t seqLen = 0;
  bool ragged = false;
  /// --scale X; nullopt with scaleDefault for --scale=default.
  std::optional<float> scale;
  bool scaleDefault = false;
  int64_t warmup = 10;
  int64_t iters = 50;
  int64_t rotate = 0;
  double ceilingGbs = 4223;
  double ceilingTflops = 786;
  std::string csv;
  uint64_t seed = 1;
  int64_t qLen = 0;
  int64_t pageSize = 0;
  unsigned threads = 0;
  bool help = false;
  bool version = false;
};

Status usageError(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, message);
}

std::optional<int64_t> parseInteger(const std::string &text, int64_t min,
                                    int64_t max) {
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || value < min || value > max)
    return std::nullopt;
  return value;
}

std::optional<double> parsePositive(const std::string &text) {
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || errno || !std::isfinite(value) || value <= 0)
    return std::nullopt;
  return value;
}

Expected<Options> parseOptions(int argc, char **argv) {
  Options options;
  std::vector<std::string> positional;
  // Integer options: name -> (field, min, max).
  struct IntOption {
    int64_t *field;
    int64_t min, max;
  };
  std::map<std::string, IntOption> integers = {
      {"--batch", {&options.batch, 1, 1 << 24}},
      {"--seq-len", {&options.seqLen, 1, int64_t{1} << 31}},
      {"--warmup", {&options.warmup, 0, 1000000}},
      {"--iters", {&options.iters, 1, 1000000}},
      {"--rotate", {&options.rotate, 1, 1000000}},
      {"--q-len", {&options.qLen, 1, 1 << 16}},
      {"--page-size", {&options.pageSize, 1, 1 << 20}},
  };
  int64_t threads = 0, seed = 1;
  integers["--threads"] = {&threads, 1, 1024};
  integers["--seed"] = {&seed, 0, INT64_MAX};
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
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0 || arg == "--") {
      if (!arg.empty() && arg[0] == '-')
        return usageError("unknown option '" + arg + "' (see --help)");
      positional.push_back(arg);
      continue;
    }
    if (arg == "--ragged") {
      options.ragged = true;
      continue;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    bool known = integers.count(name) || name == "--device" ||
                 name == "--scale" || name == "--ceiling-gbs" ||
                 name == "--ceiling-tflops" || name == "--csv";
    if (!known)
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
    if (auto it = integers.find(name); it != integers.end()) {
      std::optional<int64_t> parsed =
          parseInteger(value, it->second.min, it->second.max);
      if (!parsed)
        return usageError(name + " '" + value + "' is not an integer in [" +
                          std::to_string(it->second.min) + ", " +
                          std::to_string(it->second.max) + "]");
      *it->second.field = *parsed;
    } else if (name == "--device") {
      options.device = value;
    } else if (name == "--csv") {
      options.csv = value;
    } else if (name == "--scale" && value == "default") {
      options.scaleDefault = true;
      options.scale.reset();
    } else if (name == "--scale") {
      options.scaleDefault = false;
      char *end = nullptr;
      errno = 0;
      float scale = std::strtof(value.c_str(), &end);
      if (*end || errno || !std::isfinite(scale))
        return usageError("--scale '" + value + "' is not a finite number");
      options.scale = scale;
    } else {
      std::optional<double> ceiling = parsePositive(value);
      if (!ceiling)
        return usageError(name + " '" + value + "' is not a positive number");
      (name == "--ceiling-gbs" ? options.ceilingGbs : options.ceilingTflops) =
          *ceiling;
    }
  }
  options.threads = static_cast<unsigned>(threads);
  options.seed = static_cast<uint64_t>(seed);
  if (positional.empty())
    return usageError("missing the package argument (see --help)");
  if (positional.size() > 1)
    return usageError("unexpected argument '" + positional[1] +
                      "' (only one package)");
  options.package = positional[0];
  if (!options.batch)
    return usageError("missing required option --batch");
  if (!options.seqLen)
    return usageError("missing required option --seq-len");
  if (!options.scale && !options.scaleDefault)
    return usageError("missing required option --scale (the softmax scale: a "
                      "number, or 'default' for 1/sqrt of the q.k length)");
  return options;
}

/// splitmix64: fast, seedable, good enough for benchmark inputs.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n).
  uint64_t below(uint64_t n) { return next() % n; }
  /// Uniform in [-1, 1), never closer to 0 than 2^-10.
  float value() {
    float v = static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f;
    if (std::fabs(v) < 1.0f / 1024)
      v = std::copysign(1.0f / 1024, v);
    return v;
  }
};

/// Fills `count` elements of floating type `dtype` at `dst` with
/// Random::value(), converting chunk by chunk.
Status fillRandom(void *dst, DType dtype, size_t count, Random &random) {
  std::vector<float> chunk(std::min<size_t>(count, 1 << 16));
  size_t elementBytes = dtypeSize(dtype);
  for (size_t done = 0; done < count;) {
    size_t n = std::min(chunk.size(), count - done);
    for (size_t i = 0; i < n; ++i)
      chunk[i] = random.value();
    if (Status status = convertElements(
            chunk.data(), DType::F32,
            static_cast<uint8_t *>(dst) + done * elementBytes, dtype, n);
        !status.ok())
      return status;
    done += n;
  }
  return Status::success();
}

/// K copies of one tensor in one device allocation, each 256-byte aligned.
struct Copies {
  std::unique_ptr<DeviceBuffer> buffer;
  size_t stride = 0;
  TensorView view(size_t k, const TensorView &shape) const {
    TensorView v = shape;
    v.data = static_cast<uint8_t *>(buffer->data()) + k * stride;
    return v;
  }
};

size_t alignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

double percentileSorted(const std::vector<double> &sorted, double q) {
  if (sorted.size() % 2 == 0 && q == 0.5)
    return (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  return sorted[static_cast<size_t>(q * (sorted.size() - 1) + 0.5)];
}

std::string baseName(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string csvField(const std::string &text) {
  if (text.find_first_of(",\"\n") == std::string::npos)
    return text;
  std::string quoted = "\"";
  for (char c : text)
    quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

Status appendCsv(const std::string &path,
                 const std::vector<std::pair<std::string, std::string>> &row) {
  struct stat info;
  bool fresh = ::stat(path.c_str(), &info) != 0 || info.st_size == 0;
  FILE *file = std::fopen(path.c_str(), "a");
  if (!file)
    return Status::error(ErrorCode::IOError,
                         path + ": cannot open: " + std::strerror(errno));
  std::string text;
  if (fresh) {
    for (size_t i = 0; i < row.size(); ++i)
      text += (i ? "," : "") + row[i].first;
    text += "\n";
  }
  for (size_t i = 0; i < row.size(); ++i)
    text += (i ? "," : "") + csvField(row[i].second);
  text += "\n";
  bool ok = std::fputs(text.c_str(), file) >= 0;
  ok = std::fclose(file) == 0 && ok;
  if (!ok)
    return Status::error(ErrorCode::IOError, path + ": write failed");
  return Status::success();
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

/// One benchmark problem: the kernel's tensors by role (shapes; data null),
/// host contents of the inputs, the minimum bytes moved and the FLOPs.
struct Problem {
  std::vector<std::pair<std::string, TensorView>> tensors;
  std::map<std::string, HostTensor> host;
  float scale = 1.0f;
  double bytes = 0, flops = 0;
  /// Extra CSV/summary fields (shape description).
  std::vector<std::pair<std::string, std::string>> fields;
};

Status randomHost(Problem &p, const std::string &role, Random &random) {
  for (auto &[r, t] : p.tensors) {
    if (r != role)
      continue;
    Expected<HostTensor> allocated = HostTensor::allocate(t.dtype, t.shape);
    if (!allocated.ok())
      return allocated.status();
    if (Status status = fillRandom(allocated->data(), t.dtype,
                                   allocated->numElements(), random);
        !status.ok())
      return status;
    p.host.emplace(role, allocated.take());
    return Status::success();
  }
  return Status::error(ErrorCode::InvalidManifest, "no role " + role);
}

Status indexHost(Problem &p, const std::string &role,
                 const std::vector<int64_t> &values, DType dtype,
                 std::vector<int64_t> shape) {
  Expected<HostTensor> allocated = HostTensor::allocate(dtype, shape);
  if (!allocated.ok())
    return allocated.status();
  if (Status status = convertElements(values.data(), DType::I64,
                                      allocated->data(), dtype, values.size());
      !status.ok())
    return status;
  p.host.emplace(role, allocated.take());
  return Status::success();
}

Expected<Problem> decodeProblem(const Options &options, const Manifest &m,
                                Random &random) {
  int64_t qLen = m.qLen ? m.qLen : (options.qLen ? options.qLen : 1);
  if (m.qLen && options.qLen && options.qLen != m.qLen)
    return usageError("--q-len " + std::to_string(options.qLen) +
                      " differs from the package's q_len " +
                      std::to_string(m.qLen));
  int64_t pageSize =
      m.pageSize ? m.pageSize : (options.pageSize ? options.pageSize : 64);
  if (m.pageSize && options.pageSize && options.pageSize != m.pageSize)
    return usageError("--page-size " + std::to_string(options.pageSize) +
                      " differs from the package's page_size " +
                      std::to_string(m.pageSize));
  DType dtype = *m.dtype;
  int64_t batch = options.batch, heads = m.heads;
  int64_t row = m.latentDim + m.ropeDim, dimV = m.latentDim;
  int64_t maxPages = (options.seqLen + pageSize - 1) / pageSize;
  int64_t numPages = batch * maxPages;
  if (numPages > INT32_MAX)
    return usageError("batch x pages per request = " +
                      std::to_string(numPages) + " pages, more than 2^31 - 1");
  DType tableType = m.findArg(roles::kBlockTable)->dtype;
  DType lensType = m.findArg(roles::kSeqLens)->dtype;
  Problem p;
  p.tensors = {{roles::kQ, {nullptr, dtype, {batch, qLen, heads, row}}},
               {roles::kKv, {nullptr, dtype, {numPages, pageSize, row}}},
               {roles::kBlockTable, {nullptr, tableType, {batch, maxPages}}},
               {roles::kSeqLens, {nullptr, lensType, {batch}}},
               {roles::kO, {nullptr, dtype, {batch, qLen, heads, dimV}}},
               {roles::kLse, {nullptr, DType::F32, {batch, qLen, heads}}}};
  // Random q and kv, a random page permutation, the lengths.
  std::vector<int64_t> lengths(batch, options.seqLen);
  if (options.ragged)
    for (int64_t &length : lengths) {
      int64_t low = (options.seqLen + 1) / 2;
      length = low + random.below(options.seqLen - low + 1);
    }
  int64_t sumLen = 0;
  for (int64_t length : lengths)
    sumLen += length;
  std::vector<int64_t> pages(numPages);
  for (int64_t i = 0; i < numPages; ++i)
    pages[i] = i;
  for (int64_t i = numPages - 1; i > 0; --i)
    std::swap(pages[i], pages[random.below(i + 1)]);
  for (const char *role : {roles::kQ, roles::kKv})
    if (Status status = randomHost(p, role, random); !status.ok())
      return status;
  if (Status status =
          indexHost(p, roles::kBlockTable, pages, tableType, {batch, maxPages});
      !status.ok())
    return status;
  if (Status status = indexHost(p, roles::kSeqLens, lengths, lensType, {batch});
      !status.ok())
    return status;
  p.scale = options.scale ? *options.scale
                          : 1.0f / std::sqrt(static_cast<float>(row));
  double e = static_cast<double>(dtypeSize(dtype));
  p.bytes = e * (static_cast<double>(sumLen) * row +
                 static_cast<double>(batch) * qLen * heads * row +
                 static_cast<double>(batch) * qLen * heads * dimV);
  p.flops = 2.0 * qLen * heads * static_cast<double>(sumLen) *
            (2.0 * dimV + m.ropeDim);
  p.fields = {{"sum_len", std::to_string(sumLen)},
              {"q_len", std::to_string(qLen)},
              {"heads", std::to_string(heads)},
              {"page_size", std::to_string(pageSize)}};
  return p;
}

/// B requests of L queries attending to their own L keys (causal or not,
/// as the package says).
Expected<Problem> prefillProblem(const Options &options, const Manifest &m,
                                 Random &random) {
  DType dtype = *m.dtype;
  int64_t batch = options.batch, heads = m.heads;
  std::vector<int64_t> lengths(batch, options.seqLen);
  if (options.ragged)
    for (int64_t &length : lengths) {
      int64_t low = (options.seqLen + 1) / 2;
      length = low + random.below(options.seqLen - low + 1);
    }
  std::vector<int64_t> cu = {0};
  double sumSq = 0;
  for (int64_t length : lengths) {
    cu.push_back(cu.back() + length);
    sumSq += static_cast<double>(length) * length;
  }
  int64_t T = cu.back();
  if (T > INT32_MAX)
    return usageError("batch x seq-len = " + std::to_string(T) +
                      " tokens, more than 2^31 - 1");
  DType oType = m.findArg(roles::kO)->dtype;
  DType cuType = m.findArg(roles::kCuSeqlensQ)->dtype;
  Problem p;
  p.tensors = {{roles::kQ, {nullptr, dtype, {T, heads, m.qkDim}}},
               {roles::kK, {nullptr, dtype, {T, heads, m.qkDim}}},
               {roles::kV, {nullptr, dtype, {T, heads, m.vDim}}},
               {roles::kCuSeqlensQ, {nullptr, cuType, {batch + 1}}},
               {roles::kCuSeqlensK, {nullptr, cuType, {batch + 1}}},
               {roles::kO, {nullptr, oType, {T, heads, m.vDim}}},
               {roles::kLse, {nullptr, DType::F32, {heads, T}}}};
  for (const char *role : {roles::kQ, roles::kK, roles::kV})
    if (Status status = randomHost(p, role, random); !status.ok())
      return status;
  for (const char *role : {roles::kCuSeqlensQ, roles::kCuSeqlensK})
    if (Status status = indexHost(p, role, cu, cuType, {batch + 1});
        !status.ok())
      return status;
  p.scale = options.scale ? *options.scale
                          : 1.0f / std::sqrt(static_cast<float>(m.qkDim));
  double e = static_cast<double>(dtypeSize(dtype));
  p.bytes = e * static_cast<double>(T) * heads * (2.0 * m.qkDim + m.vDim) +
            static_cast<double>(dtypeSize(oType)) * T * heads * m.vDim +
            4.0 * T * heads;
  // Causal: half of the score matrix, 2 * H * L^2 * (Dqk + Dv) / 2.
  p.flops =
      2.0 * heads * sumSq * (m.qkDim + m.vDim) * (m.causal == 1 ? 0.5 : 1.0);
  p.fields = {{"sum_len", std::to_string(T)},
              {"q_len", std::to_string(options.seqLen)},
              {"heads", std::to_string(heads)},
              {"page_size", "0"}};
  return p;
}

/// How many copies of the inputs and outputs to rotate through: --rotate,
/// or enough to exceed 3 x L2 within 80% of the free memory.
Expected<int64_t> chooseCopies(const Options &options, Device &device,
                               size_t copyBytes, size_t workspaceBytes) {
  int64_t copies = options.rotate;
  if (copies)
    return copies;
  copies = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(3 * kL2Bytes / copyBytes)));
  if (Expected<MemoryInfo> memory = device.getBackend().getMemoryInfo();
      memory.ok()) {
    double usable = 0.8 * memory->freeBytes - workspaceBytes;
    int64_t fit = static_cast<int64_t>(usable / copyBytes);
    if (fit < 1)
      return Status::error(ErrorCode::Unsupported,
                           "one copy of the inputs and outputs needs " +
                               std::to_string(copyBytes + workspaceBytes) +
                               " bytes, " + device.getName().data() + " has " +
                               std::to_string(memory->freeBytes) + " free");
    copies = std::min(copies, fit);
  }
  return copies;
}

/// `copies` device copies of every tensor of `p`, by role: inputs uploaded
/// from the host tensors, outputs zeroed.
Status uploadCopies(Backend &backend, const Problem &p, int64_t copies,
                    std::map<std::string, Copies> &onDevice) {
  for (const auto &[role, t] : p.tensors) {
    Copies &c = onDevice[role];
    c.stride = alignUp(t.sizeInBytes());
    Expected<std::unique_ptr<DeviceBuffer>> buffer =
        backend.allocate(std::max<size_t>(c.stride * copies, 256));
    if (!buffer.ok())
      return buffer.status().withContext("allocating " +
                                         std::to_string(copies) + " copies");
    c.buffer = buffer.take();
    for (int64_t k = 0; k < copies; ++k) {
      void *dst = c.view(k, t).data;
      auto input = p.host.find(role);
      Status status =
          input != p.host.end()
              ? backend.copyToDevice(dst, input->second.data(), t.sizeInBytes())
              : backend.fillBytes(dst, 0, t.sizeInBytes());
      if (!status.ok())
        return status;
    }
  }
  return Status::success();
}

/// Validates the first copy's arguments, launches `warmup` untimed and
/// `iters` timed launches rotating through `args` on `launch.stream`, and
/// returns the sorted times in microseconds; `next` ends at the copy after
/// the last launched one.
Expected<std::vector<double>>
timeLaunches(const Kernel &kernel, Backend &backend, const Options &options,
             const std::vector<std::vector<ArgValue>> &args,
             LaunchOptions launch, int64_t &next) {
  if (Status status = kernel.validate(args[0], launch); !status.ok())
    return status;
  launch.validate = false;
  int64_t copies = static_cast<int64_t>(args.size());
  std::vector<std::unique_ptr<Timer>> timers;
  for (int64_t i = 0; i < options.iters; ++i) {
    Expected<std::unique_ptr<Timer>> timer = backend.createTimer();
    if (!timer.ok())
      return timer.status();
    timers.push_back(timer.take());
  }
  next = 0;
  for (int64_t i = 0; i < options.warmup; ++i, next = (next + 1) % copies)
    if (Status status = kernel.launch(args[next], launch); !status.ok())
      return status;
  for (int64_t i = 0; i < options.iters; ++i, next = (next + 1) % copies) {
    if (Status status = timers[i]->start(launch.stream); !status.ok())
      return status;
    if (Status status = kernel.launch(args[next], launch); !status.ok())
      return status;
    if (Status status = timers[i]->stop(launch.stream); !status.ok())
      return status;
  }
  if (Status status = backend.synchronize(launch.stream); !status.ok())
    return status;
  std::vector<double> micros;
  for (const auto &timer : timers) {
    Expected<double> ms = timer->elapsedMs();
    if (!ms.ok())
      return ms.status();
    micros.push_back(*ms * 1000);
  }
  std::sort(micros.begin(), micros.end());
  return micros;
}

/// Sanity: the non-finite values in copy `k` of the outputs (o and lse).
Expected<int64_t> countNonFinite(Backend &backend, const Problem &p,
                                 const std::map<std::string, Copies> &onDevice,
                                 int64_t k) {
  int64_t nonFinite = 0;
  for (const auto &[role, t] : p.tensors) {
    if (role != roles::kO && role != roles::kLse)
      continue;
    Expected<HostTensor> values = HostTensor::allocate(t.dtype, t.shape);
    Expected<HostTensor> floats = HostTensor::allocate(DType::F32, t.shape);
    if (!values.ok() || !floats.ok())
      return values.ok() ? floats.status() : values.status();
    if (Status status = backend.copyToHost(
            values->data(), onDevice.at(role).view(k, t).data, t.sizeInBytes());
        !status.ok())
      return status;
    if (Status status = convertElements(values->data(), t.dtype, floats->data(),
                                        DType::F32, values->numElements());
        !status.ok())
      return status;
    for (int64_t i = 0; i < floats->numElements(); ++i)
      nonFinite += !std::isfinite(floats->dataAs<float>()[i]);
  }
  return nonFinite;
}

/// Prints the summary line (and appends the CSV row) of a finished run.
Status report(const Options &options, const Manifest &m, const Device &device,
              const Problem &p, const std::vector<double> &micros,
              int64_t copies, int64_t nonFinite) {
  double median = percentileSorted(micros, 0.5);
  double gbs = p.bytes / (median * 1e-6) / 1e9;
  double tflops = p.flops / (median * 1e-6) / 1e12;
  std::vector<std::pair<std::string, std::string>> fields = {
      {"package", baseName(options.package)},
      {"device", std::string(device.getName())},
      {"dtype", dtypeName(*m.dtype)},
      {"batch", std::to_string(options.batch)},
      {"seq_len", std::to_string(options.seqLen)},
      {"ragged", options.ragged ? "1" : "0"}};
  fields.insert(fields.end(), p.fields.begin(), p.fields.end());
  // Nine significant digits give the float back exactly.
  char scale[32];
  std::snprintf(scale, sizeof(scale), "%.9g", static_cast<double>(p.scale));
  fields.insert(fields.end(),
                {
                    {"scale", scale},
                    {"warmup", std::to_string(options.warmup)},
                    {"iters", std::to_string(options.iters)},
                    {"rotate", std::to_string(copies)},
                    {"median_us", fixed(median, 2)},
                    {"min_us", fixed(micros.front(), 2)},
                    {"max_us", fixed(micros.back(), 2)},
                    {"gbs", fixed(gbs, 1)},
                    {"tflops", fixed(tflops, 3)},
                    {"bw_frac", fixed(gbs / options.ceilingGbs, 3)},
                    {"flop_frac", fixed(tflops / options.ceilingTflops, 3)},
                    {"nonfinite", std::to_string(nonFinite)},
                });
  std::string line = "mla-bench:";
  for (const auto &[key, value] : fields)
    line += " " + key + "=" + value;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (!options.csv.empty())
    return appendCsv(options.csv, fields);
  return Status::success();
}

Status run(const Options &options) {
  Expected<Package> package = readPackage(options.package);
  if (!package.ok())
    return package.status();
  const Manifest &m = package->manifest;
  if (m.kernel != kernels::kDecode && m.kernel != kernels::kPrefill)
    return Status::error(ErrorCode::Unsupported,
                         "mla-bench times decode and prefill kernels, this "
                         "one is '" +
                             m.kernel + "'");
  Expected<Device> device = Device::open(options.device, {options.threads});
  if (!device.ok())
    return device.status();
  Backend &backend = device->getBackend();
  Expected<Kernel> kernel = device->loadKernel(*package);
  if (!kernel.ok())
    return kernel.status();

  Random random{options.seed};
  Expected<Problem> problem = m.kernel == kernels::kPrefill
                                  ? prefillProblem(options, m, random)
                                  : decodeProblem(options, m, random);
  if (!problem.ok())
    return problem.status();
  Problem &p = *problem;
  Scalar scaleArg = Scalar::ofFloat(m.findArg(roles::kScale)->dtype, p.scale);
  std::map<std::string, ArgValue> shapesByRole;
  for (auto &[role, t] : p.tensors)
    shapesByRole.emplace(role, t);
  shapesByRole.emplace(roles::kScale, scaleArg);
  Expected<std::vector<ArgValue>> shapeArgs = kernel->bindByRole(shapesByRole);
  if (!shapeArgs.ok())
    return shapeArgs.status();

  size_t copyBytes = 0;
  for (const auto &entry : p.tensors)
    copyBytes += alignUp(entry.second.sizeInBytes());
  Expected<size_t> workspaceBytes = kernel->workspaceBytes(*shapeArgs);
  if (!workspaceBytes.ok())
    return workspaceBytes.status();
  Expected<int64_t> copies =
      chooseCopies(options, *device, copyBytes, *workspaceBytes);
  if (!copies.ok())
    return copies.status();
  std::map<std::string, Copies> onDevice;
  if (Status status = uploadCopies(backend, p, *copies, onDevice); !status.ok())
    return status;
  if (Status status = kernel->reserveWorkspace(*workspaceBytes); !status.ok())
    return status;

  std::vector<std::vector<ArgValue>> args;
  for (int64_t k = 0; k < *copies; ++k) {
    std::map<std::string, ArgValue> byRole;
    for (const auto &[role, t] : p.tensors)
      byRole.emplace(role, onDevice[role].view(k, t));
    byRole.emplace(roles::kScale, scaleArg);
    Expected<std::vector<ArgValue>> bound = kernel->bindByRole(byRole);
    args.push_back(bound.ok() ? bound.take() : std::vector<ArgValue>{});
  }

  Expected<std::unique_ptr<Stream>> stream = backend.createStream();
  if (!stream.ok())
    return stream.status();
  LaunchOptions launch;
  launch.stream = (*stream)->handle();
  for (const auto &[role, tensor] : p.host)
    if (m.findArg(role) && m.findArg(role)->dtype != DType::BF16 &&
        m.findArg(role)->dtype != DType::F16 &&
        m.findArg(role)->dtype != DType::F32)
      launch.hostData.emplace(role, tensor.data());
  int64_t next = 0;
  Expected<std::vector<double>> micros =
      timeLaunches(*kernel, backend, options, args, launch, next);
  if (!micros.ok())
    return micros.status();
  Expected<int64_t> nonFinite =
      countNonFinite(backend, p, onDevice, (next + *copies - 1) % *copies);
  if (!nonFinite.ok())
    return nonFinite.status();
  return report(options, m, *device, p, *micros, *copies, *nonFinite);
}

} // namespace

int main(int argc, char **argv) {
  Expected<Options> options = parseOptions(argc, argv);
  Status status = options.ok() ? Status::success() : options.status();
  if (status.ok() && options->help) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (status.ok() && options->version) {
    std::printf("mla-bench (mla %s, package format %u)\n", mla_version_string(),
                mla_package_format_version());
    return 0;
  }
  if (status.ok())
    status = run(*options);
  if (status.ok())
    return 0;
  std::string message = status.message();
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::fprintf(stderr, "mla-bench: error: %s\n", message.c_str());
  return 1;
}
