//===- Backend.cpp - Default implementations of the Backend interface -----===//

#include "mla/runtime/Backend.h"

#include <chrono>

using namespace mla::rt;

Module::~Module() = default;
DeviceBuffer::~DeviceBuffer() = default;
Stream::~Stream() = default;
Timer::~Timer() = default;
Graph::~Graph() = default;
Backend::~Backend() = default;

namespace {

class NullStream : public Stream {
public:
  void *handle() const override { return nullptr; }
};

/// Wall-clock time between start() and stop(): right for backends whose
/// launches return when the work is done.
class SteadyClockTimer : public Timer {
public:
  Status start(void *) override {
    begin = Clock::now();
    started = true;
    stopped = false;
    return Status::success();
  }
  Status stop(void *) override {
    if (!started)
      return Status::error(ErrorCode::InvalidArgument,
                           "timer stopped before it was started");
    end = Clock::now();
    stopped = true;
    return Status::success();
  }
  Expected<double> elapsedMs() override {
    if (!stopped)
      return Status::error(ErrorCode::InvalidArgument,
                           "timer read before it was started and stopped");
    return std::chrono::duration<double, std::milli>(end - begin).count();
  }

private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point begin, end;
  bool started = false, stopped = false;
};

} // namespace

std::string Backend::getDescription() const { return std::string(getName()); }

Status Backend::checkCodeObject(const std::vector<uint8_t> &, const Manifest &,
                                const TargetSpec &) const {
  return Status::success();
}

Expected<std::string>
Backend::selectTarget(const std::vector<std::string> &targets) const {
  std::string names;
  for (const std::string &target : targets) {
    if (supportsTarget(target))
      return target;
    names += (names.empty() ? "" : ", ") + target;
  }
  return Status::error(ErrorCode::Unsupported,
                       "the package has no target for device '" +
                           std::string(getName()) + "' (its targets: " + names +
                           ")");
}

Status Backend::prepareLaunch(Module &, size_t, const LaunchConfig &) {
  return Status::success();
}

Expected<std::unique_ptr<Stream>> Backend::createStream() {
  return std::unique_ptr<Stream>(std::make_unique<NullStream>());
}

Expected<std::unique_ptr<Timer>> Backend::createTimer() {
  return std::unique_ptr<Timer>(std::make_unique<SteadyClockTimer>());
}

Expected<std::unique_ptr<Graph>>
Backend::captureGraph(void *, const std::function<Status()> &) {
  return Status::error(ErrorCode::Unsupported, "device '" +
                                                   std::string(getName()) +
                                                   "' cannot capture graphs");
}

Expected<MemoryInfo> Backend::getMemoryInfo() {
  return Status::error(ErrorCode::Unsupported,
                       "device '" + std::string(getName()) +
                           "' does not report its memory");
}
