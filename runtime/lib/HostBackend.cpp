//===- HostBackend.cpp - Runs host code objects on a thread pool ----------===//

#include "mla/runtime/Backend.h"

#include "Memory.h"
#include "ThreadPool.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

using namespace mla::rt;

namespace {

#if defined(__x86_64__)
constexpr const char *kHostTarget = "host-x86_64";
constexpr uint16_t kElfMachine = 62; // EM_X86_64
#elif defined(__aarch64__)
constexpr const char *kHostTarget = "host-aarch64";
constexpr uint16_t kElfMachine = 183; // EM_AARCH64
#else
#error "the host backend supports x86-64 and AArch64 hosts"
#endif

/// The C signature of every host entry.
using EntryFn = void (*)(void **args, int64_t bx, int64_t by, int64_t bz);

Status backendError(const std::string &message) {
  return Status::error(ErrorCode::BackendError, message);
}

/// Checks the ELF header: a 64-bit little-endian shared object for this
/// host's machine.
Status checkElf(const std::vector<uint8_t> &code) {
  static const uint8_t kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
  if (code.size() < 64 || std::memcmp(code.data(), kElfMagic, 4) != 0)
    return backendError("host code object is not an ELF file");
  uint16_t type = code[16] | (code[17] << 8);
  uint16_t machine = code[18] | (code[19] << 8);
  if (code[4] != 2 || code[5] != 1 || type != 3 || machine != kElfMachine)
    return backendError(std::string("host code object is not a 64-bit "
                                    "little-endian shared object for ") +
                        kHostTarget);
  return Status::success();
}

class HostModule : public Module {
public:
  HostModule(const Backend &backend, int fd, void *handle)
      : Module(backend), fd(fd), handle(handle) {}
  ~HostModule() override {
    dlclose(handle);
    // Closed only after dlclose: while the library is loaded its
    // /proc/self/fd/N name must not be reused by another code object, or
    // dlopen would hand back this one. dlclose may leave it loaded (objects
    // with STB_GNU_UNIQUE symbols or DF_1_NODELETE): then the descriptor,
    // and so the name, is kept for the life of the process.
    if (!isLoaded(fd))
      close(fd);
  }

  /// Whether a library loaded from /proc/self/fd/FD is in the process.
  static bool isLoaded(int fd) {
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    void *loaded = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (loaded)
      dlclose(loaded);
    return loaded != nullptr;
  }

  int fd;
  void *handle;
  std::vector<EntryFn> entries;
};

class HostBuffer : public DeviceBuffer {
public:
  HostBuffer(void *ptr, size_t bytes) : ptr(ptr), bytes(bytes) {}
  ~HostBuffer() override { std::free(ptr); }
  void *data() const override { return ptr; }
  size_t size() const override { return bytes; }

private:
  void *ptr;
  size_t bytes;
};

class HostBackend : public Backend {
public:
  explicit HostBackend(unsigned threads) : pool(threads) {}

  std::string_view getName() const override { return "host"; }
  bool supportsTarget(std::string_view target) const override {
    return target == kHostTarget;
  }
  Expected<std::unique_ptr<Module>>
  loadModule(const std::vector<uint8_t> &code,
             const std::vector<std::string> &entries) override;
  Expected<std::unique_ptr<DeviceBuffer>> allocate(size_t bytes) override;
  bool usesHostMemory() const override { return true; }
  bool isAsynchronous() const override { return false; }
  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    if (bytes)
      std::memcpy(dst, src, bytes);
    return Status::success();
  }
  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (bytes)
      std::memcpy(dst, src, bytes);
    return Status::success();
  }
  Status fillBytes(void *dst, uint8_t value, size_t bytes) override {
    if (bytes)
      std::memset(dst, value, bytes);
    return Status::success();
  }
  Status launch(const Module &module, size_t entryIndex,
                const LaunchConfig &config,
                const std::vector<const ArgValue *> &args) override;
  Status synchronize(void *) override { return Status::success(); }
  Expected<MemoryInfo> getMemoryInfo() override;

private:
  ThreadPool pool;
};

} // namespace

Expected<std::unique_ptr<Module>>
HostBackend::loadModule(const std::vector<uint8_t> &code,
                        const std::vector<std::string> &entries) {
  if (Status status = checkElf(code); !status.ok())
    return status;
  int fd = memfd_create("mla-code-object", MFD_CLOEXEC);
  if (fd < 0)
    return backendError(std::string("memfd_create failed: ") +
                        std::strerror(errno));
  size_t done = 0;
  while (done < code.size()) {
    ssize_t wrote = write(fd, code.data() + done, code.size() - done);
    if (wrote < 0 && errno == EINTR)
      continue;
    if (wrote < 0) {
      int err = errno;
      close(fd);
      return backendError(std::string("cannot write the code object: ") +
                          std::strerror(err));
    }
    done += static_cast<size_t>(wrote);
  }
  // A name still held by a library that stayed loaded (not one of ours,
  // see ~HostModule) would make dlopen hand that one back: move to another
  // descriptor number.
  std::vector<int> stale;
  while (HostModule::isLoaded(fd)) {
    int other = dup(fd);
    if (other < 0) {
      int err = errno;
      for (int f : stale)
        close(f);
      close(fd);
      return backendError(std::string("dup failed: ") + std::strerror(err));
    }
    stale.push_back(fd);
    fd = other;
  }
  for (int f : stale)
    close(f);
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    close(fd);
    return backendError(std::string("cannot load the host code object: ") +
                        (reason ? reason : "unknown dlopen error"));
  }
  auto module = std::make_unique<HostModule>(*this, fd, handle);
  for (const std::string &entry : entries) {
    void *symbol = dlsym(handle, entry.c_str());
    if (!symbol)
      return backendError("the host code object has no entry '" + entry + "'");
    module->entries.push_back(reinterpret_cast<EntryFn>(symbol));
  }
  return std::unique_ptr<Module>(std::move(module));
}

Expected<std::unique_ptr<DeviceBuffer>> HostBackend::allocate(size_t bytes) {
  void *ptr = allocateAligned64(bytes);
  if (!ptr)
    return backendError("out of memory allocating " + std::to_string(bytes) +
                        " bytes");
  return std::unique_ptr<DeviceBuffer>(
      std::make_unique<HostBuffer>(ptr, bytes));
}

Status HostBackend::launch(const Module &module, size_t entryIndex,
                           const LaunchConfig &config,
                           const std::vector<const ArgValue *> &args) {
  const Grid &grid = config.grid;
  if (&module.getBackend() != this)
    return backendError("module was loaded by another backend");
  const auto &hostModule = static_cast<const HostModule &>(module);
  if (entryIndex >= hostModule.entries.size())
    return backendError("entry index " + std::to_string(entryIndex) +
                        " is out of range");
  int64_t total = 1;
  for (int64_t dim : grid)
    if (dim < 0 || __builtin_mul_overflow(total, dim, &total))
      return Status::error(ErrorCode::InvalidArgument,
                           "invalid grid " +
                               shapeToString({grid[0], grid[1], grid[2]}));

  // Memref descriptors: {allocated, aligned, offset, sizes[r], strides[r]}
  // with row-major element strides; every field is 8 bytes.
  std::vector<std::vector<int64_t>> descriptors(args.size());
  std::vector<void *> argv(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgValue &arg = *args[i];
    if (arg.isScalar()) {
      argv[i] = const_cast<void *>(arg.scalar().data());
      continue;
    }
    const TensorView &t = arg.tensor();
    size_t rank = t.shape.size();
    std::vector<int64_t> &desc = descriptors[i];
    desc.resize(3 + 2 * rank);
    desc[0] = desc[1] = reinterpret_cast<intptr_t>(t.data);
    desc[2] = 0;
    int64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      desc[3 + d] = t.shape[d];
      desc[3 + rank + d] = stride;
      stride *= t.shape[d];
    }
    argv[i] = desc.data();
  }

  EntryFn entry = hostModule.entries[entryIndex];
  int64_t sizeX = grid[0], sizeXY = grid[0] * grid[1];
  void **argPtrs = argv.data();
  pool.parallelFor(total, [&](int64_t id) {
    entry(argPtrs, id % sizeX, id % sizeXY / sizeX, id / sizeXY);
  });
  return Status::success();
}

Expected<MemoryInfo> HostBackend::getMemoryInfo() {
  long pageSize = sysconf(_SC_PAGESIZE);
  long available = sysconf(_SC_AVPHYS_PAGES);
  long total = sysconf(_SC_PHYS_PAGES);
  if (pageSize <= 0 || available < 0 || total <= 0)
    return backendError("cannot read the host's memory size");
  return MemoryInfo{static_cast<size_t>(available) * pageSize,
                    static_cast<size_t>(total) * pageSize};
}

std::shared_ptr<Backend>
mla::rt::createHostBackend(const HostBackendOptions &options) {
  unsigned threads = options.threads;
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  return std::make_shared<HostBackend>(threads);
}

std::string_view mla::rt::hostTargetName() { return kHostTarget; }
