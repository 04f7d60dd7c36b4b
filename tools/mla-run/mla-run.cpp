//===- mla-run.cpp - Run an .mlapkg kernel on .npy files ------------------===//
//
// mla-run PKG --inputs DIR --outputs DIR [--scale X] [--device=NAME]
//         [--threads=N] [--repeat=N]
// mla-run --info PKG
//
// Reads the kernel's input roles from DIR/<role>.npy, runs the kernel on the
// host or a GPU (inputs uploaded, outputs downloaded), writes its output
// roles (and the inputs it updates, e.g. append_kv's kv) to DIR/<role>.npy,
// floats as float32, and prints the median kernel time. Every
// error is one "mla-run: error: ..." line on stderr, exit code 1, and no output
// file. docs/FileContract.md is the contract.
//
//===----------------------------------------------------------------------===//

#include "PackageInfo.h"

#include "mla/runtime/Kinds.h"
#include "mla/runtime/OutputShapes.h"
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

namespace {

const char *const kHelp =
    R"help(usage: mla-run PKG --inputs DIR --outputs DIR [--scale X] [options]
       mla-run --info PKG

Runs the kernel of the mla package PKG on .npy inputs and writes .npy outputs.
Kernel kinds: decode, prefill, merge, append_kv (the package's manifest says
which); the files of each are listed below.

options:
  --inputs DIR     directory holding the input files (see below)
  --outputs DIR    directory for the output files; created if missing
  --scale X        softmax scale applied to q.k (finite, not 0); required
                   for decode and prefill, not accepted for merge, append_kv
  --device=NAME    device to run on: host (default), cuda (device 0),
                   cuda:N, hip (AMD GPU 0), hip:N, emu (the AMD emulator on
                   the host, for gfx90a-emu/gfx942-emu/gfx950-emu packages;
                   emu:reverse or emu:random[:SEED] change the wave order,
                   emu:check-orders runs all three and compares the results),
                   or auto (cuda when usable, else hip, else host)
  --threads=N      host or emulator worker threads, 1 <= N <= 1024
                   (default: all cores)
  --repeat=N       run the kernel N >= 1 times and report the median time
                   (default: 1)
  --info           print what the package's manifest says (kind, compiler,
                   arguments, targets with their config, workspaces,
                   launches and grids) and exit; loads and runs nothing
  --help           print this help and exit
  --version        print the mla version and package format and exit
Options taking a value accept both "--opt VALUE" and "--opt=VALUE".

files for a decode kernel (B batch, Sq query length, H heads, D = latent_dim
+ rope_dim, Dv = latent_dim, all C-order little-endian .npy version 1.0/2.0):
  inputs   q.npy            [B, Sq, H, D]          float
           kv.npy           [pages, page_size, D]  float
           block_table.npy  [B, max_pages]         int
           seq_lens.npy     [B]                    int
  outputs  o.npy            [B, Sq, H, Dv]         float32
           lse.npy          [B, Sq, H]             float32 (natural log)
Every used block_table entry (pages below ceil(seq_len / page_size)) must
lie in [0, pages), and each seq_len in [0, max_pages * page_size].

files for a prefill kernel (T query rows, Tk key rows, B requests, H heads,
Dqk = qk_dim, Dv = v_dim):
  inputs   q.npy            [T, H, Dqk]            float
           k.npy            [Tk, H, Dqk]           float
           v.npy            [Tk, H, Dv]            float
           cu_seqlens_q.npy [B + 1]                int
           cu_seqlens_k.npy [B + 1]                int
  outputs  o.npy            [T, H, Dv]             float32
           lse.npy          [H, T]                 float32 (natural log)
Request b's queries are rows cu_seqlens_q[b] .. cu_seqlens_q[b+1] of q, its
keys rows cu_seqlens_k[b] .. cu_seqlens_k[b+1] of k and v; the offsets start
at 0, never decrease and end at T (resp. Tk). Causal kernels align the mask
bottom-right; a query that sees no key gets o = 0, lse = -inf.

files for a merge kernel (N = parts partial results of T query rows):
  inputs   o_parts.npy      [N, T, H, Dv]          float
           lse_parts.npy    [N, H, T]              float (-inf: empty part)
  outputs  o.npy            [T, H, Dv]             float32
           lse.npy          [H, T]                 float32

files for an append_kv kernel (T new tokens, D = latent_dim + rope_dim):
  inputs   kv_new.npy       [T, D]                 float
           slot_mapping.npy [T]                    int
           kv.npy           [pages, page_size, D]  float
  outputs  kv.npy           [pages, page_size, D]  float32: kv with row t of
                                                   kv_new at slot_mapping[t]
Slot s is row s % page_size of page s / page_size; -1 skips the token; any
other slot outside [0, pages * page_size) is an error.

Any other memref argument of the kernel (the inputs of a variant's regions,
e.g. the per-head logits of an attention sink, role "sinks") is read from
ROLE.npy as well; docs/Variants.md lists them for the examples.

Input types: "float" is float64 (numpy's default), float32 or float16,
converted to the argument's dtype, rounded once to nearest even; "int" is
int64 (numpy's default) or int32, converted to the argument's integer type
(an int64 value outside the int32 range is an error naming the file, the
element and the value).
Dims fixed by the package's manifest must match it exactly.

On success mla-run prints one line: "kernel time: T ms (median of N runs)".
On any error it prints one line "mla-run: error: MESSAGE" on stderr, exits
with status 1 and writes no output file.
)help";

/// How mla-run feeds a kernel kind: which roles are read from files, which
/// inputs the kernel updates (written back to --outputs), which outputs are
/// allocated and written, and which scalar role --scale sets (nullptr: the
/// kind takes no --scale).
struct KindFiles {
  std::vector<const char *> inputs;
  std::vector<const char *> updated;
  std::vector<const char *> outputs;
  const char *scaleRole = nullptr;
};

/// The files of `kind` from its Kinds.def roles; nullopt when the runtime
/// cannot size one of its outputs.
std::optional<KindFiles> kindFiles(KernelKind kind) {
  if (!canSizeOutputs(kind))
    return std::nullopt;
  KindFiles files;
  for (const KindRole &role : kindRoles(kind)) {
    if (role.argKind == ArgKind::Scalar) {
      if (role.role == Role::Scale)
        files.scaleRole = role.name;
      continue;
    }
    if (role.isInput())
      files.inputs.push_back(role.name);
    if (role.use == RoleUse::InOut)
      files.updated.push_back(role.name);
    if (role.use == RoleUse::Output)
      files.outputs.push_back(role.name);
  }
  return files;
}

/// Every role `files` names: inputs, outputs, then the scale.
std::vector<const char *> kindRoleNames(const KindFiles &files) {
  std::vector<const char *> names = files.inputs;
  names.insert(names.end(), files.outputs.begin(), files.outputs.end());
  if (files.scaleRole)
    names.push_back(files.scaleRole);
  return names;
}

struct Options {
  std::string package;
  std::string inputs;
  std::string outputs;
  std::string device = "host";
  std::optional<float> scale;
  unsigned threads = 0;
  int repeat = 1;
  bool help = false;
  bool version = false;
  bool info = false;
  /// The value options given, for --info's check.
  std::vector<std::string> given;
};

Status usageError(const std::string &message) {
  return Status::error(ErrorCode::InvalidArgument, message);
}

/// Parses an integer in [1, max].
std::optional<int64_t> parseCount(const std::string &text, int64_t max) {
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || value < 1 || value > max)
    return std::nullopt;
  return value;
}

Expected<Options> parseOptions(int argc, char **argv) {
  Options options;
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
    if (arg == "--info") {
      options.info = true;
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
    if (name != "--inputs" && name != "--outputs" && name != "--scale" &&
        name != "--device" && name != "--threads" && name != "--repeat")
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
    options.given.push_back(name);
    if (name == "--inputs") {
      options.inputs = value;
    } else if (name == "--outputs") {
      options.outputs = value;
    } else if (name == "--device") {
      options.device = value;
    } else if (name == "--scale") {
      // Underflow (a subnormal or zero result, ERANGE) is a finite scale;
      // overflow gives infinity.
      char *end = nullptr;
      float scale = std::strtof(value.c_str(), &end);
      if (end == value.c_str() || *end)
        return usageError("--scale '" + value + "' is not a number");
      if (!std::isfinite(scale))
        return usageError("--scale '" + value + "' is " +
                          (std::isnan(scale)
                               ? std::string("not a finite number")
                               : std::string("beyond the float32 range "
                                             "(the scale is a float32)")));
      if (scale == 0 && std::strtod(value.c_str(), nullptr) != 0)
        return usageError("--scale '" + value +
                          "' underflows to 0 as a float32 (the scale is a "
                          "float32)");
      options.scale = scale;
    } else {
      int64_t max = name == "--threads" ? 1024 : 1000000;
      std::optional<int64_t> count = parseCount(value, max);
      if (!count)
        return usageError(name + " '" + value + "' is not an integer in [1, " +
                          std::to_string(max) + "]");
      if (name == "--threads")
        options.threads = static_cast<unsigned>(*count);
      else
        options.repeat = static_cast<int>(*count);
    }
  }
  if (positional.empty())
    return usageError("missing the package argument (see --help)");
  if (positional.size() > 1)
    return usageError("unexpected argument '" + positional[1] +
                      "' (only one package)");
  options.package = positional[0];
  if (options.info && !options.given.empty())
    return usageError("--info prints the package and runs nothing: " +
                      options.given[0] + " does not apply");
  if (options.info)
    return options;
  if (options.inputs.empty())
    return usageError("missing required option --inputs");
  if (options.outputs.empty())
    return usageError("missing required option --outputs");
  return options;
}

/// Reads DIR/<role>.npy and converts it to the argument's dtype: floats
/// from float64/float32/float16, integers from int64/int32 (int64 to int32
/// only when every value fits).
Expected<HostTensor> readInput(const std::string &dir, const ManifestArg &arg) {
  return readNpyAs(dir + "/" + arg.role + ".npy", arg.dtype);
}

/// An output of the manifest's shape, dynamic dims taken from the inputs
/// (outputShape, the runtime's table).
Expected<HostTensor>
allocateOutput(const Manifest &manifest, const char *role,
               const std::map<std::string, HostTensor> &inputs) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto &[name, tensor] : inputs)
    shapes.emplace(name, tensor.getShape());
  Expected<std::vector<int64_t>> shape = outputShape(manifest, role, shapes);
  if (!shape.ok())
    return shape.status();
  return HostTensor::allocate(manifest.findArg(role)->dtype, *shape);
}

Status makeDirectory(const std::string &dir) {
  if (::mkdir(dir.c_str(), 0777) == 0 || errno == EEXIST) {
    struct stat info;
    if (::stat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
      return Status::success();
    return Status::error(ErrorCode::IOError, dir + ": not a directory");
  }
  return Status::error(ErrorCode::IOError,
                       dir + ": cannot create: " + std::strerror(errno));
}

/// Writes every output as float32 (floats) or as is (integers). Conversions
/// happen before the first write; each output goes to a hidden partial file
/// (`.ROLE.npy.partial`) and all of them are renamed into place only when
/// every write succeeded, so a failed run leaves the previous results as
/// they were and no partial file behind.
Status writeOutputs(const std::string &dir,
                    std::vector<std::pair<std::string, HostTensor>> outputs) {
  for (auto &[role, tensor] : outputs) {
    if (!isFloatingPoint(tensor.getDType()) || tensor.getDType() == DType::F32)
      continue;
    Expected<HostTensor> f32 =
        HostTensor::allocate(DType::F32, tensor.getShape());
    if (!f32.ok())
      return f32.status();
    if (Status status =
            convertElements(tensor.data(), tensor.getDType(), f32->data(),
                            DType::F32, tensor.numElements());
        !status.ok())
      return status;
    tensor = f32.take();
  }
  if (Status status = makeDirectory(dir); !status.ok())
    return status;
  std::vector<std::pair<std::string, std::string>> partials; // (tmp, final)
  auto removePartials = [&]() {
    for (const auto &[tmp, final] : partials)
      ::unlink(tmp.c_str());
  };
  for (const auto &[role, tensor] : outputs) {
    std::string tmp = dir + "/." + role + ".npy.partial";
    if (Status status = writeNpy(tmp, tensor.view()); !status.ok()) {
      ::unlink(tmp.c_str());
      removePartials();
      return status;
    }
    partials.emplace_back(tmp, dir + "/" + role + ".npy");
  }
  // A destination that a rename cannot replace (a directory) fails before
  // any output is renamed into place, so that no run leaves a new o.npy
  // beside an old lse.npy.
  for (const auto &[tmp, final] : partials) {
    struct stat info;
    if (::stat(final.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
      removePartials();
      return Status::error(ErrorCode::IOError,
                           final + ": cannot write: " + std::strerror(EISDIR));
    }
  }
  for (const auto &[tmp, final] : partials)
    if (std::rename(tmp.c_str(), final.c_str()) != 0) {
      Status status =
          Status::error(ErrorCode::IOError,
                        final + ": cannot write: " + std::strerror(errno));
      removePartials();
      return status;
    }
  return Status::success();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

/// The files of the manifest's kind, after checking that the options and
/// the manifest fit them; `scaleType` is the dtype of the scale arg.
Expected<KindFiles> filesFor(const Manifest &manifest, const Options &options,
                             DType &scaleType) {
  std::optional<KindFiles> files;
  std::string kinds;
  for (KernelKind kind : kKernelKinds) {
    std::optional<KindFiles> candidate = kindFiles(kind);
    if (!candidate)
      continue;
    if (manifest.kernel == kindName(kind))
      files = std::move(candidate);
    kinds += (kinds.empty() ? "" : ", ") + std::string(kindName(kind));
  }
  if (!files)
    return Status::error(
        ErrorCode::Unsupported,
        "kernel kind '" + manifest.kernel +
            "' is not supported by mla-run (supported: " + kinds + ")");
  if (files->scaleRole && !options.scale)
    return usageError("missing required option --scale (the softmax scale of "
                      "the " +
                      manifest.kernel + " kernel)");
  if (!files->scaleRole && options.scale)
    return usageError("--scale does not apply to a " + manifest.kernel +
                      " kernel (it has no scale argument)");
  for (const char *role : kindRoleNames(*files))
    if (!manifest.findArg(role))
      return Status::error(ErrorCode::Unsupported,
                           "the manifest has no arg with role '" +
                               std::string(role) + "'");
  scaleType = DType::F32;
  if (files->scaleRole) {
    scaleType = manifest.findArg(files->scaleRole)->dtype;
    if (!isFloatingPoint(scaleType))
      return Status::error(ErrorCode::Unsupported,
                           "--scale cannot set the " +
                               std::string(dtypeName(scaleType)) + " arg '" +
                               files->scaleRole + "'");
  }
  return *files;
}

/// The host tensors of one run, by role: `args` views `inputs` and
/// `outputs` (and holds the scale); on a GPU, device copies take their
/// place in `args`.
struct HostArgs {
  std::map<std::string, ArgValue> args;
  std::map<std::string, HostTensor> inputs;
  std::vector<std::pair<std::string, HostTensor>> outputs;
};

/// Reads the inputs and allocates the outputs: the kind's inputs, then any
/// other memref argument of the kernel (the inputs of a variant's regions,
/// e.g. `sinks`), each from ROLE.npy.
Status readArgs(const Manifest &manifest, const KindFiles &files,
                const Options &options, DType scaleType, HostArgs &host) {
  std::vector<const char *> known = kindRoleNames(files);
  std::vector<std::string> inputRoles(files.inputs.begin(), files.inputs.end());
  for (const ManifestArg &arg : manifest.args)
    if (arg.kind == ArgKind::Memref &&
        std::find(known.begin(), known.end(), arg.role) == known.end())
      inputRoles.push_back(arg.role);
  for (const std::string &role : inputRoles) {
    Expected<HostTensor> input =
        readInput(options.inputs, *manifest.findArg(role));
    if (!input.ok())
      return input.status();
    host.args.emplace(role, input->view());
    host.inputs.emplace(role, input.take());
  }
  if (files.scaleRole)
    host.args.emplace(files.scaleRole,
                      Scalar::ofFloat(scaleType, *options.scale));
  for (const char *role : files.outputs) {
    Expected<HostTensor> output = allocateOutput(manifest, role, host.inputs);
    if (!output.ok())
      return output.status();
    host.args.emplace(role, output->view());
    host.outputs.emplace_back(role, output.take());
  }
  return Status::success();
}

/// On a GPU: replaces the tensors of `host.args` by device copies (inputs
/// uploaded, outputs zeroed like the host's) and points the content checks
/// at the host copies of the index inputs (block_table, seq_lens,
/// cu_seqlens_*, slot_mapping).
Status moveToDevice(Device &device, HostArgs &host,
                    std::map<std::string, DeviceTensor> &deviceTensors,
                    LaunchOptions &launchOptions) {
  for (auto &[role, arg] : host.args) {
    if (!arg.isTensor())
      continue;
    bool isInput = host.inputs.count(role);
    Expected<DeviceTensor> tensor =
        isInput ? DeviceTensor::upload(device, arg.tensor())
                : DeviceTensor::allocate(device, arg.tensor().dtype,
                                         arg.tensor().shape);
    if (!tensor.ok())
      return tensor.status().withContext(role);
    if (!isInput)
      if (Status status = tensor->fillBytes(0); !status.ok())
        return status.withContext(role);
    arg = tensor->view();
    deviceTensors.emplace(role, tensor.take());
  }
  for (const auto &[role, tensor] : host.inputs)
    if (!isFloatingPoint(tensor.getDType()))
      launchOptions.hostData[role] = tensor.data();
  return Status::success();
}

/// Validates once, reserves the workspace, launches `repeat` times and
/// returns each launch's time in ms.
Expected<std::vector<double>> timeLaunches(const Kernel &kernel,
                                           Backend &backend,
                                           const std::vector<ArgValue> &bound,
                                           LaunchOptions launchOptions,
                                           int repeat) {
  if (Status status = kernel.validate(bound, launchOptions); !status.ok())
    return status;
  Expected<size_t> workspaceBytes = kernel.workspaceBytes(bound);
  if (!workspaceBytes.ok())
    return workspaceBytes.status();
  if (Status status = kernel.reserveWorkspace(*workspaceBytes); !status.ok())
    return status;
  Expected<std::unique_ptr<Timer>> timer = backend.createTimer();
  if (!timer.ok())
    return timer.status();
  launchOptions.validate = false;
  std::vector<double> times;
  for (int i = 0; i < repeat; ++i) {
    if (Status status = (*timer)->start(launchOptions.stream); !status.ok())
      return status;
    if (Status status = kernel.launch(bound, launchOptions); !status.ok())
      return status;
    if (Status status = (*timer)->stop(launchOptions.stream); !status.ok())
      return status;
    Expected<double> ms = (*timer)->elapsedMs();
    if (!ms.ok())
      return ms.status();
    times.push_back(*ms);
  }
  if (Status status = backend.synchronize(); !status.ok())
    return status;
  return times;
}

/// The files to write: the outputs, then the inputs the kernel updated,
/// their host copies filled from the device where they live there.
Expected<std::vector<std::pair<std::string, HostTensor>>>
collectOutputs(const KindFiles &files, HostArgs &host,
               std::map<std::string, DeviceTensor> &deviceTensors) {
  std::vector<std::pair<std::string, HostTensor>> outputs =
      std::move(host.outputs);
  for (const char *role : files.updated) {
    auto it = host.inputs.find(role);
    outputs.emplace_back(role, std::move(it->second));
    host.inputs.erase(it);
  }
  for (auto &[role, tensor] : outputs) {
    auto it = deviceTensors.find(role);
    if (it == deviceTensors.end())
      continue;
    if (Status status = it->second.copyToHost(tensor.data()); !status.ok())
      return status.withContext(role);
  }
  return outputs;
}

Status run(const Options &options) {
  Expected<Package> package = readPackage(options.package);
  if (!package.ok())
    return package.status();
  if (options.info) {
    std::fputs(describePackage(options.package, *package).c_str(), stdout);
    return Status::success();
  }
  const Manifest &manifest = package->manifest;
  DType scaleType;
  Expected<KindFiles> files = filesFor(manifest, options, scaleType);
  if (!files.ok())
    return files.status();

  Expected<Device> device = Device::open(options.device, {options.threads});
  if (!device.ok())
    return device.status();
  Expected<Kernel> kernel = device->loadKernel(*package);
  if (!kernel.ok())
    return kernel.status();
  Backend &backend = device->getBackend();

  HostArgs host;
  if (Status status = readArgs(manifest, *files, options, scaleType, host);
      !status.ok())
    return status;
  LaunchOptions launchOptions;
  std::map<std::string, DeviceTensor> deviceTensors;
  if (!backend.usesHostMemory())
    if (Status status =
            moveToDevice(*device, host, deviceTensors, launchOptions);
        !status.ok())
      return status;

  Expected<std::vector<ArgValue>> bound = kernel->bindByRole(host.args);
  if (!bound.ok())
    return bound.status();
  Expected<std::vector<double>> times =
      timeLaunches(*kernel, backend, *bound, launchOptions, options.repeat);
  if (!times.ok())
    return times.status();
  Expected<std::vector<std::pair<std::string, HostTensor>>> outputs =
      collectOutputs(*files, host, deviceTensors);
  if (!outputs.ok())
    return outputs.status();
  if (Status status = writeOutputs(options.outputs, outputs.take());
      !status.ok())
    return status;
  std::printf("kernel time: %.3f ms (median of %d run%s)\n", median(*times),
              options.repeat, options.repeat == 1 ? "" : "s");
  return Status::success();
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
    std::printf("mla-run (mla %s, package format %u)\n", mla_version_string(),
                mla_package_format_version());
    return 0;
  }
  if (status.ok())
    status = run(*options);
  if (status.ok())
    return 0;
  std::string message = status.message();
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::fprintf(stderr, "mla-run: error: %s\n", message.c_str());
  return 1;
}
