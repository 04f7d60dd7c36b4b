//===- EmuBackend.cpp - The AMD emulator backend --------------------------===//

#include "mla/runtime/EmuBackend.h"
#include "mla/runtime/EmuAbi.h"

#include "HostObject.h"
#include "ThreadPool.h"
#include "emu/Emulator.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

using namespace mla::rt;

namespace {

Status backendError(const std::string &message) {
  return Status::error(ErrorCode::BackendError, "emu: " + message);
}

struct Chip {
  std::string_view target, chip;
  int64_t ldsBytes;
};
/// The emulated chips and the LDS one workgroup may use (lib/Target/Arch.cpp
/// has the compiler's side of the same table).
constexpr Chip kChips[] = {
    {"gfx90a-emu", "gfx90a", 64 * 1024},
    {"gfx942-emu", "gfx942", 64 * 1024},
    {"gfx950-emu", "gfx950", 160 * 1024},
};

const Chip *findChip(std::string_view target) {
  for (const Chip &c : kChips)
    if (c.target == target)
      return &c;
  return nullptr;
}

class EmuModule : public Module {
public:
  EmuModule(const Backend &backend, std::unique_ptr<HostObject> object)
      : Module(backend), object(std::move(object)) {}
  std::unique_ptr<HostObject> object;
  std::vector<emu::EmuKernel> entries;
};

class EmuBackend : public Backend {
public:
  EmuBackend(std::shared_ptr<Backend> host, const EmuBackendOptions &options)
      : host(std::move(host)), pool(options.threads), options(options) {
    std::string seed = std::to_string(options.seed);
    name = options.order == EmuWaveOrder::Forward   ? "emu"
           : options.order == EmuWaveOrder::Reverse ? "emu:reverse"
           : options.order == EmuWaveOrder::Random ? "emu:random:" + seed
                                                   : "emu:check-orders:" + seed;
  }

  std::string_view getName() const override { return name; }
  std::string getDescription() const override {
    return name + " (AMD emulator on the host: gfx90a-emu, gfx942-emu, "
                  "gfx950-emu code objects; not AMD hardware)";
  }
  bool supportsTarget(std::string_view target) const override {
    return findChip(target) != nullptr;
  }
  bool usesHostMemory() const override { return true; }
  bool isAsynchronous() const override { return false; }

  Status checkCodeObject(const std::vector<uint8_t> &, const Manifest &,
                         const TargetSpec &target) const override {
    const Chip *chip = findChip(target.name);
    if (!chip)
      return backendError("target '" + target.name + "' is not emulated");
    for (const LaunchSpec &l : target.launches) {
      int64_t threads = l.block[0] * l.block[1] * l.block[2];
      if (threads < 1 || threads > kMaxBlockThreads)
        return backendError("launch " + l.entry + ": block of " +
                            std::to_string(threads) + " threads (1.." +
                            std::to_string(kMaxBlockThreads) + " on " +
                            std::string(chip->chip) + ")");
      if (l.sharedBytes < 0 || l.sharedBytes > chip->ldsBytes)
        return backendError("launch " + l.entry + " asks for " +
                            std::to_string(l.sharedBytes) + " bytes of LDS; " +
                            std::string(chip->chip) + " has " +
                            std::to_string(chip->ldsBytes));
    }
    return Status::success();
  }

  Expected<std::unique_ptr<Module>>
  loadModule(const std::vector<uint8_t> &code,
             const std::vector<std::string> &entries) override {
    Expected<std::unique_ptr<HostObject>> object = HostObject::load(code);
    if (!object.ok())
      return object.status();
    auto module = std::make_unique<EmuModule>(*this, object.take());
    HostObject &obj = *module->object;
    auto *abi =
        static_cast<const int32_t *>(obj.lookup(mla::emu::kEmuAbiSymbol));
    auto **table = static_cast<void **>(obj.lookup(mla::emu::kEmuHookTable));
    auto *const *sites =
        static_cast<const char *const *>(obj.lookup(mla::emu::kEmuSiteTable));
    auto *siteCount =
        static_cast<const int32_t *>(obj.lookup(mla::emu::kEmuSiteCount));
    if (!abi || !table || !sites || !siteCount)
      return backendError("the code object is not an emulated AMD code object "
                          "(no " +
                          std::string(mla::emu::kEmuAbiSymbol) + ")");
    if (*abi != mla::emu::kEmuAbiVersion)
      return backendError("the code object uses emulator ABI " +
                          std::to_string(*abi) + ", this runtime " +
                          std::to_string(mla::emu::kEmuAbiVersion) +
                          ": recompile it");
    if (Status s = emu::fillHookTable(
            table, static_cast<int64_t>(mla::emu::Hook::Count));
        !s.ok())
      return s;
    for (const std::string &entry : entries) {
      void *symbol = obj.lookup(entry);
      if (!symbol)
        return backendError("the code object has no entry '" + entry + "'");
      emu::EmuKernel k;
      k.entry = reinterpret_cast<emu::LaneEntry>(symbol);
      k.sites = sites;
      k.siteCount = *siteCount;
      module->entries.push_back(k);
    }
    return std::unique_ptr<Module>(std::move(module));
  }

  Expected<std::unique_ptr<DeviceBuffer>> allocate(size_t bytes) override {
    return host->allocate(bytes);
  }
  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    return host->copyToHost(dst, src, bytes);
  }
  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    return host->copyToDevice(dst, src, bytes);
  }
  Status fillBytes(void *dst, uint8_t value, size_t bytes) override {
    return host->fillBytes(dst, value, bytes);
  }
  Status synchronize(void *) override { return Status::success(); }
  Expected<MemoryInfo> getMemoryInfo() override {
    return host->getMemoryInfo();
  }

  Status launch(const Module &module, size_t entryIndex,
                const LaunchConfig &config,
                const std::vector<const ArgValue *> &args) override;

private:
  Status runGrid(const emu::EmuKernel &kernel, const emu::EmuLaunch &launch,
                 emu::EmuOrder order);

  std::shared_ptr<Backend> host;
  ThreadPool pool;
  EmuBackendOptions options;
  std::string name;
};

Status EmuBackend::launch(const Module &module, size_t entryIndex,
                          const LaunchConfig &config,
                          const std::vector<const ArgValue *> &args) {
  if (&module.getBackend() != this)
    return backendError("module was loaded by another backend");
  const auto &emuModule = static_cast<const EmuModule &>(module);
  if (entryIndex >= emuModule.entries.size())
    return backendError("entry index " + std::to_string(entryIndex) +
                        " is out of range");
  if (Expected<int64_t> count = workgroupCount(config.grid); !count.ok())
    return count.status();
  int64_t threads = config.block[0] * config.block[1] * config.block[2];
  if (threads < 1 || threads > kMaxBlockThreads || config.sharedBytes < 0)
    return backendError("invalid block or LDS size");
  HostArgs hostArgs = buildHostArgs(args);
  emu::EmuLaunch launch;
  launch.grid = config.grid;
  launch.block = config.block;
  launch.ldsBytes = config.sharedBytes;
  launch.args = hostArgs.argv.data();
  const emu::EmuKernel &kernel = emuModule.entries[entryIndex];
  if (options.order != EmuWaveOrder::CheckOrders)
    return runGrid(
        kernel, launch,
        options.order == EmuWaveOrder::Forward   ? emu::EmuOrder::Forward
        : options.order == EmuWaveOrder::Reverse ? emu::EmuOrder::Reverse
                                                 : emu::EmuOrder::Random);
  // Every order from the same memory state; the results must agree.
  std::vector<std::pair<uint8_t *, size_t>> memory;
  for (const ArgValue *arg : args)
    if (!arg->isScalar())
      memory.push_back({static_cast<uint8_t *>(arg->tensor().data),
                        arg->tensor().sizeInBytes()});
  auto snapshot = [&] {
    std::vector<std::vector<uint8_t>> copy;
    for (auto [p, n] : memory)
      copy.emplace_back(p, p + n);
    return copy;
  };
  const std::vector<std::vector<uint8_t>> before = snapshot();
  if (Status s = runGrid(kernel, launch, emu::EmuOrder::Forward); !s.ok())
    return s;
  const std::vector<std::vector<uint8_t>> forward = snapshot();
  for (emu::EmuOrder order : {emu::EmuOrder::Reverse, emu::EmuOrder::Random}) {
    for (size_t i = 0; i < memory.size(); ++i)
      std::copy(before[i].begin(), before[i].end(), memory[i].first);
    if (Status s = runGrid(kernel, launch, order); !s.ok())
      return s;
    for (size_t i = 0; i < memory.size(); ++i) {
      const uint8_t *p = memory[i].first;
      auto diff = std::mismatch(forward[i].begin(), forward[i].end(), p);
      if (diff.first != forward[i].end())
        return backendError(
            "the results depend on the wave order: memref argument " +
            std::to_string(i) + " differs at byte " +
            std::to_string(diff.first - forward[i].begin()) +
            " between the forward and the " +
            (order == emu::EmuOrder::Reverse ? "reverse" : "random") +
            " order (a race the LDS checker cannot see, e.g. in global "
            "memory)");
    }
  }
  return Status::success();
}

Status EmuBackend::runGrid(const emu::EmuKernel &kernel,
                           const emu::EmuLaunch &launch, emu::EmuOrder order) {
  emu::EmuOptions emuOptions;
  emuOptions.order = order;
  emuOptions.seed = options.seed;
  std::mutex mutex;
  Status first = Status::success();
  std::atomic<bool> failed{false};
  const auto &grid = launch.grid;
  int64_t total = grid[0] * grid[1] * grid[2];
  int64_t sizeX = grid[0], sizeXY = grid[0] * grid[1];
  pool.parallelFor(total, [&](int64_t id) {
    if (failed.load(std::memory_order_relaxed))
      return;
    Status s = emu::runWorkgroup(kernel, launch,
                                 {id % sizeX, id % sizeXY / sizeX, id / sizeXY},
                                 emuOptions);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!failed.exchange(true))
        first = s;
    }
  });
  return first;
}

} // namespace

std::shared_ptr<Backend>
mla::rt::createEmuBackend(const EmuBackendOptions &options) {
  EmuBackendOptions o = options;
  if (o.threads == 0)
    o.threads = std::max(1u, std::thread::hardware_concurrency());
  return std::make_shared<EmuBackend>(createHostBackend({1}), o);
}

std::optional<EmuBackendOptions>
mla::rt::parseEmuDeviceName(std::string_view name) {
  EmuBackendOptions o;
  if (name == "emu" || name == "emu:forward")
    return o;
  if (name == "emu:reverse") {
    o.order = EmuWaveOrder::Reverse;
    return o;
  }
  if (name == "emu:random") {
    o.order = EmuWaveOrder::Random;
    return o;
  }
  if (name == "emu:check-orders") {
    o.order = EmuWaveOrder::CheckOrders;
    return o;
  }
  std::string_view digits;
  for (auto [prefix, order] :
       {std::pair<std::string_view, EmuWaveOrder>{"emu:random:",
                                                  EmuWaveOrder::Random},
        {"emu:check-orders:", EmuWaveOrder::CheckOrders}})
    if (name.substr(0, prefix.size()) == prefix) {
      digits = name.substr(prefix.size());
      o.order = order;
    }
  if (o.order == EmuWaveOrder::Forward)
    return std::nullopt;
  if (digits.empty() || digits.size() > 19)
    return std::nullopt;
  uint64_t seed = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return std::nullopt;
    seed = seed * 10 + uint64_t(c - '0');
  }
  o.seed = seed;
  return o;
}

std::string_view mla::rt::emulatedChip(std::string_view target) {
  const Chip *chip = findChip(target);
  return chip ? chip->chip : std::string_view();
}
