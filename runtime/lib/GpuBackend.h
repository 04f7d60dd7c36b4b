//===- GpuBackend.h - What the CUDA and HIP backends share ------*- C++ -*-===//
//
// The CUDA driver API and the HIP runtime API mirror each other for
// streams, events, graphs and memory. GpuBackend<Traits> implements those
// parts of Backend once; a backend's Traits struct names its API, its
// device state and the scope that makes the device current, and wraps each
// entry point (returning the backend's "PREFIX: CALL failed: ..." Status).
// Each backend keeps what is its own: module loading, launch checks and
// argument passing, device and target naming.
//
// A Traits struct provides:
//   Api, State (holding `const Api &api`, `int ordinal`, `std::string
//   deviceName`), Scope (constructible from `const State &`), Result,
//   StreamHandle, EventHandle, GraphHandle, GraphExecHandle;
//   kPrefix ("cuda"), kNoGraphApi (the Unsupported message), kMemAlloc (the
//   allocation call's name), kOutOfMemory (its result for out of memory);
//   static callError(api, call, result) and the wrappers used below.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LIB_GPUBACKEND_H
#define MLA_RUNTIME_LIB_GPUBACKEND_H

#include "mla/runtime/Backend.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mla::rt::gpu {

/// success if `result` is 0, the backend's callError otherwise.
template <typename Traits>
Status check(const typename Traits::Api &api, const char *call,
             typename Traits::Result result) {
  if (result)
    return Traits::callError(api, call, result);
  return Status::success();
}

/// InvalidArgument if a grid dimension is negative; sets `empty` when one
/// is zero (the launch does nothing).
Status checkGrid(const Grid &grid, bool &empty);

/// Unsupported `noDevice` ("cuda: no CUDA device") when `count` is 0, or
/// "<noDevice> N (this machine has M)" when `ordinal` is not below it.
Status checkOrdinal(const std::string &noDevice, int ordinal, int count);

/// The ordinal of "PREFIX" (0) or "PREFIX:N" (N of at most 6 digits).
std::optional<int> parseOrdinalName(std::string_view name,
                                    std::string_view prefix);

/// "a, b, c".
std::string joinNames(const std::vector<std::string> &names);

template <typename Traits> class GpuBuffer : public DeviceBuffer {
public:
  GpuBuffer(std::shared_ptr<typename Traits::State> state, void *pointer,
            size_t bytes)
      : state(std::move(state)), pointer(pointer), bytes(bytes) {}
  ~GpuBuffer() override {
    if (!pointer)
      return;
    typename Traits::Scope scope(*state);
    Traits::freeMemory(state->api, pointer);
  }
  void *data() const override { return pointer; }
  size_t size() const override { return bytes; }

private:
  std::shared_ptr<typename Traits::State> state;
  void *pointer;
  size_t bytes;
};

template <typename Traits> class GpuStream : public Stream {
public:
  using StreamHandle = typename Traits::StreamHandle;
  GpuStream(std::shared_ptr<typename Traits::State> state, StreamHandle stream)
      : state(std::move(state)), stream(stream) {}
  ~GpuStream() override {
    typename Traits::Scope scope(*state);
    Traits::destroyStream(state->api, stream);
  }
  void *handle() const override { return stream; }

private:
  std::shared_ptr<typename Traits::State> state;
  StreamHandle stream;
};

template <typename Traits> class GpuTimer : public Timer {
public:
  using EventHandle = typename Traits::EventHandle;
  GpuTimer(std::shared_ptr<typename Traits::State> state, EventHandle begin,
           EventHandle end)
      : state(std::move(state)), begin(begin), end(end) {}
  ~GpuTimer() override {
    typename Traits::Scope scope(*state);
    Traits::destroyEvent(state->api, begin);
    Traits::destroyEvent(state->api, end);
  }
  Status start(void *stream) override { return record(begin, stream); }
  Status stop(void *stream) override { return record(end, stream); }
  Expected<double> elapsedMs() override {
    typename Traits::Scope scope(*state);
    if (Status status = Traits::synchronizeEvent(state->api, end); !status.ok())
      return status;
    float ms = 0;
    if (Status status = Traits::elapsedTime(state->api, &ms, begin, end);
        !status.ok())
      return status;
    return static_cast<double>(ms);
  }

private:
  Status record(EventHandle event, void *stream) {
    typename Traits::Scope scope(*state);
    return Traits::recordEvent(
        state->api, event, static_cast<typename Traits::StreamHandle>(stream));
  }

  std::shared_ptr<typename Traits::State> state;
  EventHandle begin, end;
};

template <typename Traits> class GpuGraph : public Graph {
public:
  using GraphHandle = typename Traits::GraphHandle;
  using GraphExecHandle = typename Traits::GraphExecHandle;
  GpuGraph(std::shared_ptr<typename Traits::State> state, GraphHandle graph,
           GraphExecHandle exec)
      : state(std::move(state)), graph(graph), exec(exec) {}
  ~GpuGraph() override {
    typename Traits::Scope scope(*state);
    Traits::destroyGraphExec(state->api, exec);
    Traits::destroyGraph(state->api, graph);
  }
  Status launch(void *stream) override {
    typename Traits::Scope scope(*state);
    return Traits::launchGraph(
        state->api, exec, static_cast<typename Traits::StreamHandle>(stream));
  }

private:
  std::shared_ptr<typename Traits::State> state;
  GraphHandle graph;
  GraphExecHandle exec;
};

/// A Backend on one device of a GPU API; see the file comment.
template <typename Traits> class GpuBackend : public Backend {
public:
  using Api = typename Traits::Api;
  using State = typename Traits::State;
  using Scope = typename Traits::Scope;
  using StreamHandle = typename Traits::StreamHandle;

  std::string_view getName() const override { return name; }
  bool usesHostMemory() const override { return false; }
  bool isAsynchronous() const override { return true; }

  Expected<std::unique_ptr<DeviceBuffer>> allocate(size_t bytes) override {
    void *pointer = nullptr;
    if (bytes) {
      Scope scope(*state);
      if (typename Traits::Result r =
              Traits::allocate(api(), &pointer, bytes)) {
        if (r == Traits::kOutOfMemory)
          return backendError("out of device memory allocating " +
                              std::to_string(bytes) + " bytes");
        return Traits::callError(api(), Traits::kMemAlloc, r);
      }
    }
    return std::unique_ptr<DeviceBuffer>(
        std::make_unique<GpuBuffer<Traits>>(state, pointer, bytes));
  }

  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return Status::success();
    Scope scope(*state);
    return Traits::copyToHost(api(), dst, src, bytes);
  }

  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return Status::success();
    Scope scope(*state);
    return Traits::copyToDevice(api(), dst, src, bytes);
  }

  Status fillBytes(void *dst, uint8_t value, size_t bytes) override {
    if (!bytes)
      return Status::success();
    Scope scope(*state);
    return Traits::fillBytes(api(), dst, value, bytes);
  }

  Status synchronize(void *stream) override {
    Scope scope(*state);
    if (stream)
      return Traits::synchronizeStream(api(),
                                       static_cast<StreamHandle>(stream));
    return Traits::synchronizeDevice(api());
  }

  Expected<std::unique_ptr<Stream>> createStream() override {
    Scope scope(*state);
    StreamHandle stream = nullptr;
    if (Status status = Traits::createStream(api(), &stream); !status.ok())
      return status;
    return std::unique_ptr<Stream>(
        std::make_unique<GpuStream<Traits>>(state, stream));
  }

  Expected<std::unique_ptr<Timer>> createTimer() override {
    Scope scope(*state);
    typename Traits::EventHandle begin = nullptr, end = nullptr;
    if (Status status = Traits::createEvent(api(), &begin); !status.ok())
      return status;
    if (Status status = Traits::createEvent(api(), &end); !status.ok()) {
      Traits::destroyEvent(api(), begin);
      return status;
    }
    return std::unique_ptr<Timer>(
        std::make_unique<GpuTimer<Traits>>(state, begin, end));
  }

  Expected<std::unique_ptr<Graph>>
  captureGraph(void *stream, const std::function<Status()> &work) override {
    if (!api().hasGraphs())
      return Status::error(ErrorCode::Unsupported, Traits::kNoGraphApi);
    if (!stream)
      return Status::error(ErrorCode::InvalidArgument,
                           "graph capture needs a stream (the default stream "
                           "cannot be captured)");
    auto captured = static_cast<StreamHandle>(stream);
    Scope scope(*state);
    if (Status status = Traits::beginCapture(api(), captured); !status.ok())
      return status;
    Status status = work();
    typename Traits::GraphHandle graph = nullptr;
    // Always ended, so that the stream is usable again whatever happened.
    Status ended = Traits::endCapture(api(), captured, &graph);
    if (!status.ok() || !ended.ok()) {
      if (graph)
        Traits::destroyGraph(api(), graph);
      if (!status.ok())
        return status.withContext("during graph capture");
      return ended;
    }
    typename Traits::GraphExecHandle exec = nullptr;
    if (Status status = Traits::instantiateGraph(api(), &exec, graph);
        !status.ok()) {
      Traits::destroyGraph(api(), graph);
      return status;
    }
    return std::unique_ptr<Graph>(
        std::make_unique<GpuGraph<Traits>>(state, graph, exec));
  }

  Expected<MemoryInfo> getMemoryInfo() override {
    Scope scope(*state);
    MemoryInfo info;
    if (Status status =
            Traits::memoryInfo(api(), &info.freeBytes, &info.totalBytes);
        !status.ok())
      return status;
    return info;
  }

protected:
  explicit GpuBackend(std::shared_ptr<State> state)
      : state(std::move(state)), name(std::string(Traits::kPrefix) + ":" +
                                      std::to_string(this->state->ordinal)) {}

  const Api &api() const { return state->api; }

  static Status backendError(const std::string &message) {
    return Status::error(ErrorCode::BackendError,
                         std::string(Traits::kPrefix) + ": " + message);
  }

  /// `target`, or its error in the context of this device.
  Expected<std::string> onThisDevice(Expected<std::string> target) const {
    if (!target.ok())
      return target.status().withContext("device '" + name + "' (" +
                                         state->deviceName + ")");
    return target;
  }

  /// The module prepareLaunch may prepare entry `entryIndex` of, or null.
  template <typename M> M *preparedModule(Module &module, size_t entryIndex) {
    auto &own = static_cast<M &>(module);
    if (&module.getBackend() != this || entryIndex >= own.entryCount())
      return nullptr;
    return &own;
  }

  /// The module of a launch of entry `entryIndex`, checked to be this
  /// backend's and to have that entry.
  template <typename M>
  Expected<const M *> launchedModule(const Module &module,
                                     size_t entryIndex) const {
    if (&module.getBackend() != this)
      return backendError("module was loaded by another backend");
    const auto &own = static_cast<const M &>(module);
    if (entryIndex >= own.entryCount())
      return backendError("entry index " + std::to_string(entryIndex) +
                          " is out of range");
    return &own;
  }

  std::shared_ptr<State> state;
  std::string name;
};

} // namespace mla::rt::gpu

#endif // MLA_RUNTIME_LIB_GPUBACKEND_H
