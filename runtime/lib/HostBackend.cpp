//===- HostBackend.cpp - Runs host code objects on a thread pool ----------===//

#include "mla/runtime/Backend.h"

#include "HostObject.h"
#include "Memory.h"
#include "ThreadPool.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>

using namespace mla::rt;

namespace {

/// The C signature of every host entry.
using EntryFn = void (*)(void **args, int64_t bx, int64_t by, int64_t bz);

Status backendError(const std::string &message) {
  return Status::error(ErrorCode::BackendError, message);
}

class HostModule : public Module {
public:
  HostModule(const Backend &backend, std::unique_ptr<HostObject> object)
      : Module(backend), object(std::move(object)) {}

  std::unique_ptr<HostObject> object;
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
    return target == hostTargetName();
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
  Expected<std::unique_ptr<HostObject>> object = HostObject::load(code);
  if (!object.ok())
    return object.status();
  auto module = std::make_unique<HostModule>(*this, object.take());
  for (const std::string &entry : entries) {
    void *symbol = module->object->lookup(entry);
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
  Expected<int64_t> count = workgroupCount(grid);
  if (!count.ok())
    return count.status();
  int64_t total = *count;

  HostArgs hostArgs = buildHostArgs(args);
  EntryFn entry = hostModule.entries[entryIndex];
  int64_t sizeX = grid[0], sizeXY = grid[0] * grid[1];
  void **argPtrs = hostArgs.argv.data();
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
