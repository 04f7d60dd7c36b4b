//===- mla-bench.cpp - Time a decode or prefill package on random inputs --===//
//
// mla-bench PKG [--device=cuda|cuda:N|host|auto] --scale X|default
//           (--batch B --seq-len L | --batch B --ragged MIN:MAX --seed S |
//            --seq-lens FILE.npy)
//           [--warmup N] [--iters N] [--rotate K] [--ceiling-gbs G]
//           [--ceiling-tflops T] [--csv FILE] [--seed S] [--q-len N]
//           [--page-size N] [--threads N]
//
// Builds random inputs (never zero) for a paged KV cache sized for the
// requests' lengths with a random page permutation (Lengths.h), uploads K
// independent copies of every tensor and rotates through them (so that the
// copies together exceed 3x a 60 MB L2), warms up, then times each launch
// on one stream (CUDA events on a GPU, a steady clock on the host) and
// prints one summary line with the median, min and max time, the achieved
// bandwidth and FLOP rate and their fraction of the given ceilings.
// docs/Runtime.md describes the metrics.
//
//===----------------------------------------------------------------------===//

#include "Lengths.h"
#include "Options.h"

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
#include <unistd.h>
#include <vector>

using namespace mla::rt;
using mla::bench::baseName;
using mla::bench::Lengths;
using mla::bench::Options;
using mla::bench::Random;
using mla::bench::usageError;

namespace {

constexpr double kL2Bytes = 60e6;

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
  errno = 0;
  bool ok = std::fputs(text.c_str(), file) >= 0;
  int err = errno;
  ok = std::fclose(file) == 0 && ok;
  if (!ok)
    return Status::error(ErrorCode::IOError, path + ": cannot write: " +
                                                 std::strerror(err     ? err
                                                               : errno ? errno
                                                                       : EIO));
  return Status::success();
}

/// Whether --csv's file can be appended to, checked before the benchmark
/// runs (a path in a missing directory used to fail only after it): an
/// existing file must be writable and not a directory, a new one's
/// directory must exist and be writable.
Status checkCsvPath(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode))
      return Status::error(ErrorCode::IOError,
                           path + ": cannot append: " + std::strerror(EISDIR));
    if (::access(path.c_str(), W_OK) != 0)
      return Status::error(ErrorCode::IOError,
                           path + ": cannot append: " + std::strerror(errno));
    return Status::success();
  }
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : path.substr(0, slash);
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return Status::error(ErrorCode::IOError,
                         path + ": cannot create: " + std::strerror(errno));
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
  /// Decode: per lse element, whether its query sees no key (length 0, or
  /// MTP with fewer keys than queries), so that lse = -inf is its value.
  std::vector<bool> lseWithoutKeys;
  /// Decode: the pages of the paged cache (0 for prefill).
  int64_t pages = 0;
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

/// The package's arguments beyond its kind's roles: a variant's own inputs
/// (docs/Variants.md, e.g. `sinks`), from the manifest's argument list.
/// Memrefs of static shape get random values (floating point) or zeros
/// (integers); anything else is refused, naming the argument.
Status addVariantInputs(Problem &p, const Manifest &m, Random &random) {
  for (const ManifestArg &arg : m.args) {
    bool known =
        arg.role == roles::kScale ||
        std::any_of(p.tensors.begin(), p.tensors.end(),
                    [&](const auto &t) { return t.first == arg.role; });
    if (known)
      continue;
    std::string what = "argument " + std::to_string(arg.index) + " '" +
                       arg.role + "' (a variant's input)";
    if (arg.kind != ArgKind::Memref)
      return usageError(what +
                        " is a scalar; mla-bench sets only the "
                        "softmax scale (run the package with mla-run, "
                        "which reads " +
                        arg.role + ".npy)");
    if (std::count(arg.dims.begin(), arg.dims.end(), kDynamicDim))
      return usageError(what +
                        " has a dynamic dim; mla-bench makes random "
                        "variant inputs of static shape only (run the "
                        "package with mla-run, which reads " +
                        arg.role + ".npy)");
    p.tensors.push_back({arg.role, {nullptr, arg.dtype, arg.dims}});
    bool floating = arg.dtype == DType::BF16 || arg.dtype == DType::F16 ||
                    arg.dtype == DType::F32;
    Status status =
        floating ? randomHost(p, arg.role, random)
                 : indexHost(p, arg.role,
                             std::vector<int64_t>(
                                 p.tensors.back().second.numElements(), 0),
                             arg.dtype, arg.dims);
    if (!status.ok())
      return status;
  }
  return Status::success();
}

/// Decode: B requests with `lengths` cached tokens, each in its own pages of
/// one paged cache (mla::bench::layoutPages).
Expected<Problem> decodeProblem(const Options &options, const Manifest &m,
                                const Lengths &lengths, Random &random) {
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
  int64_t batch = static_cast<int64_t>(lengths.values.size());
  int64_t heads = m.heads;
  int64_t row = m.latentDim + m.ropeDim, dimV = m.latentDim;
  // A random page permutation (drawn first, as before ragged batches),
  // then random q and kv.
  Problem p;
  Expected<mla::bench::PageLayout> layout =
      mla::bench::layoutPages(lengths.values, pageSize, random);
  if (!layout.ok())
    return layout.status();
  int64_t numPages = layout->numPages, maxPages = layout->maxPages;
  p.pages = numPages;
  DType tableType = m.findArg(roles::kBlockTable)->dtype;
  DType lensType = m.findArg(roles::kSeqLens)->dtype;
  p.tensors = {{roles::kQ, {nullptr, dtype, {batch, qLen, heads, row}}},
               {roles::kKv, {nullptr, dtype, {numPages, pageSize, row}}},
               {roles::kBlockTable, {nullptr, tableType, {batch, maxPages}}},
               {roles::kSeqLens, {nullptr, lensType, {batch}}},
               {roles::kO, {nullptr, dtype, {batch, qLen, heads, dimV}}},
               {roles::kLse, {nullptr, DType::F32, {batch, qLen, heads}}}};
  for (const char *role : {roles::kQ, roles::kKv})
    if (Status status = randomHost(p, role, random); !status.ok())
      return status;
  if (Status status = indexHost(p, roles::kBlockTable, layout->blockTable,
                                tableType, {batch, maxPages});
      !status.ok())
    return status;
  if (Status status =
          indexHost(p, roles::kSeqLens, lengths.values, lensType, {batch});
      !status.ok())
    return status;
  // Query i of request b sees keys [0, len_b - qLen + i].
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < qLen; ++i)
      p.lseWithoutKeys.insert(p.lseWithoutKeys.end(), heads,
                              lengths.values[b] - qLen + i < 0);
  p.scale = options.scale ? *options.scale
                          : 1.0f / std::sqrt(static_cast<float>(row));
  // The minimum bytes and the FLOPs of the actual lengths: the sum(len)
  // cached rows read once, q read once, o written once.
  double e = static_cast<double>(dtypeSize(dtype));
  double sumLen = static_cast<double>(lengths.sum);
  p.bytes =
      e * (sumLen * row + static_cast<double>(batch) * qLen * heads * row +
           static_cast<double>(batch) * qLen * heads * dimV);
  p.flops = 2.0 * qLen * heads * sumLen * (2.0 * dimV + m.ropeDim);
  p.fields = {{"sum_len", std::to_string(lengths.sum)},
              {"q_len", std::to_string(qLen)},
              {"heads", std::to_string(heads)},
              {"page_size", std::to_string(pageSize)}};
  return p;
}

/// Prefill: B requests of `lengths` queries attending to their own keys
/// (causal or not, as the package says).
Expected<Problem> prefillProblem(const Options &options, const Manifest &m,
                                 const Lengths &lengths, Random &random) {
  DType dtype = *m.dtype;
  int64_t batch = static_cast<int64_t>(lengths.values.size());
  int64_t heads = m.heads;
  std::vector<int64_t> cu = {0};
  double sumSq = 0;
  for (int64_t length : lengths.values) {
    cu.push_back(cu.back() + length);
    sumSq += static_cast<double>(length) * length;
  }
  int64_t T = cu.back();
  if (T > INT32_MAX)
    return usageError("the lengths sum to " + std::to_string(T) +
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
              {"q_len", std::to_string(lengths.max)},
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
  if (options.reusePlan) {
    // The plan the later launches reuse (every copy has the same lengths).
    if (Status status = kernel.launch(args[0], launch); !status.ok())
      return status;
    launch.reusePlan = true;
  }
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

/// Sanity: the non-finite values in copy `k` of the outputs (o and lse),
/// but for lse = -inf where the query sees no key (its defined value).
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
    const float *data = floats->dataAs<float>();
    bool isLse = role == roles::kLse;
    for (int64_t i = 0; i < floats->numElements(); ++i) {
      bool expectedInf =
          isLse && i < static_cast<int64_t>(p.lseWithoutKeys.size()) &&
          p.lseWithoutKeys[i] && std::isinf(data[i]) && data[i] < 0;
      nonFinite += !std::isfinite(data[i]) && !expectedInf;
    }
  }
  return nonFinite;
}

/// Prints the summary line (and appends the CSV row) of a finished run.
/// The columns up to nonfinite are those of earlier versions, in their
/// order (seq_len: the longest length where they differ; ragged: 1 unless
/// --seq-len); the lengths' summary and the counted bytes and FLOPs follow,
/// then reuse_plan (the plan launches each timed launch skipped).
Status report(const Options &options, const Manifest &m, const Device &device,
              const Lengths &lengths, const Problem &p,
              const std::vector<double> &micros, int64_t copies,
              int64_t nonFinite, size_t reusedPlans) {
  double median = percentileSorted(micros, 0.5);
  double gbs = p.bytes / (median * 1e-6) / 1e9;
  double tflops = p.flops / (median * 1e-6) / 1e12;
  std::vector<std::pair<std::string, std::string>> fields = {
      {"package", baseName(options.package)},
      {"device", std::string(device.getName())},
      {"dtype", dtypeName(*m.dtype)},
      {"batch", std::to_string(lengths.values.size())},
      {"seq_len", std::to_string(lengths.max)},
      {"ragged", lengths.ragged ? "1" : "0"}};
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
                    {"min_len", std::to_string(lengths.min)},
                    {"max_len", std::to_string(lengths.max)},
                    {"lengths", lengths.source},
                    {"seed", std::to_string(options.lengths.seed)},
                    {"bytes", fixed(p.bytes, 0)},
                    {"flops", fixed(p.flops, 0)},
                    {"pages", std::to_string(p.pages)},
                    {"reuse_plan", std::to_string(reusedPlans)},
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
  Expected<Lengths> lengths = mla::bench::resolveLengths(options.lengths);
  if (!lengths.ok())
    return lengths.status();
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

  Random random{options.lengths.seed};
  Expected<Problem> problem = m.kernel == kernels::kPrefill
                                  ? prefillProblem(options, m, *lengths, random)
                                  : decodeProblem(options, m, *lengths, random);
  if (!problem.ok())
    return problem.status();
  Problem &p = *problem;
  if (Status status = addVariantInputs(p, m, random); !status.ok())
    return status;
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
  // The host's pooled workspaces hold no earlier plan (Kernel.h).
  const size_t reusedPlans = options.reusePlan && backend.isAsynchronous()
                                 ? kernel->planLaunches()
                                 : 0;
  return report(options, m, *device, *lengths, p, *micros, *copies, *nonFinite,
                reusedPlans);
}

} // namespace

int main(int argc, char **argv) {
  Expected<Options> options = mla::bench::parseOptions(argc, argv);
  Status status = options.ok() ? Status::success() : options.status();
  if (status.ok() && options->help) {
    std::fputs(mla::bench::kHelp, stdout);
    return 0;
  }
  if (status.ok() && options->version) {
    std::printf("mla-bench (mla %s, package format %u)\n", mla_version_string(),
                mla_package_format_version());
    return 0;
  }
  if (status.ok() && !options->csv.empty())
    status = checkCsvPath(options->csv);
  if (status.ok())
    status = run(*options);
  if (status.ok())
    return 0;
  std::string message = status.message();
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::fprintf(stderr, "mla-bench: error: %s\n", message.c_str());
  return 1;
}
