//===- ThreadPool.h - Worker threads for host launches ----------*- C++ -*-===//

#ifndef MLA_RUNTIME_LIB_THREADPOOL_H
#define MLA_RUNTIME_LIB_THREADPOOL_H

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <vector>

namespace mla::rt {

/// Runs index ranges in parallel. Several threads may call parallelFor at
/// once: their jobs queue up and the workers serve them in order, while each
/// caller also works on its own job, so a job never waits behind others.
/// Host workgroups keep their tiles on the stack: the workers have
/// kHostThreadStackBytes of it (mla/runtime/GridLimits.h), and a caller with
/// less than kHostCallerStackBytes free only waits for them (e.g. a thread
/// an application started with a small stack).
class ThreadPool {
public:
  /// `threads` is the total parallelism of one job (callers included):
  /// threads - 1 workers are started, or as many as the system allows, and
  /// at least one (which serves only callers short of stack when threads
  /// is 1).
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// Calls fn(i) for every i in [0, count) and returns when all are done.
  void parallelFor(int64_t count, const std::function<void(int64_t)> &fn);

  /// Whether the calling thread has the free stack to run workgroups.
  static bool callerHasStack();

private:
  struct Job;
  static void *workerEntry(void *pool);
  void workerLoop();
  /// Runs indices of `job` until none are left unclaimed.
  static void work(Job &job);

  std::mutex mutex;
  std::condition_variable wakeWorkers;
  std::deque<std::shared_ptr<Job>> jobs;
  bool stopping = false;
  std::vector<pthread_t> workers;
  /// Workers beyond the callers' own thread that share every job.
  unsigned parallelWorkers = 0;
};

} // namespace mla::rt

#endif // MLA_RUNTIME_LIB_THREADPOOL_H
