//===- ThreadPool.cpp -----------------------------------------------------===//

#include "ThreadPool.h"

#include "mla/runtime/GridLimits.h"

#include <algorithm>
#include <atomic>

using namespace mla::rt;

struct ThreadPool::Job {
  Job(int64_t count, const std::function<void(int64_t)> &fn)
      : count(count), fn(fn) {}

  const int64_t count;
  const std::function<void(int64_t)> &fn;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;
};

ThreadPool::ThreadPool(unsigned threads) {
  pthread_attr_t attr;
  const bool haveAttr = pthread_attr_init(&attr) == 0;
  size_t stack = 0;
  if (haveAttr && pthread_attr_getstacksize(&attr, &stack) == 0 &&
      stack < size_t(kHostThreadStackBytes))
    pthread_attr_setstacksize(&attr, size_t(kHostThreadStackBytes));
  const unsigned wanted = std::max(1u, threads) - 1;
  for (unsigned i = 0; i < std::max(1u, wanted); ++i) {
    pthread_t worker;
    if (pthread_create(&worker, haveAttr ? &attr : nullptr, &workerEntry,
                       this) != 0)
      break; // Out of threads: run with the workers we have.
    workers.push_back(worker);
  }
  if (haveAttr)
    pthread_attr_destroy(&attr);
  parallelWorkers = std::min<unsigned>(wanted, workers.size());
}

void *ThreadPool::workerEntry(void *pool) {
  static_cast<ThreadPool *>(pool)->workerLoop();
  return nullptr;
}

bool ThreadPool::callerHasStack() {
  thread_local int known = -1;
  if (known >= 0)
    return known;
  pthread_attr_t attr;
  void *low = nullptr;
  size_t size = 0;
  bool ok = pthread_getattr_np(pthread_self(), &attr) == 0;
  if (ok) {
    ok = pthread_attr_getstack(&attr, &low, &size) == 0;
    pthread_attr_destroy(&attr);
  }
  char here = 0;
  // The stack grows down from low + size; what is left lies below `here`.
  const intptr_t free = intptr_t(&here) - intptr_t(low);
  known = ok && free >= intptr_t(kHostCallerStackBytes) ? 1 : 0;
  return known;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wakeWorkers.notify_all();
  for (pthread_t worker : workers)
    pthread_join(worker, nullptr);
}

void ThreadPool::work(Job &job) {
  int64_t finishedHere = 0;
  for (int64_t i = job.next++; i < job.count; i = job.next++) {
    job.fn(i);
    ++finishedHere;
  }
  if (finishedHere &&
      job.done.fetch_add(finishedHere) + finishedHere == job.count) {
    std::lock_guard<std::mutex> lock(job.mutex);
    job.finished.notify_all();
  }
}

void ThreadPool::workerLoop() {
  while (true) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex);
      wakeWorkers.wait(lock, [this] { return stopping || !jobs.empty(); });
      if (stopping)
        return;
      job = jobs.front();
      // Every index is claimed once `next` passes the end: retire the job.
      if (job->next.load() >= job->count) {
        jobs.pop_front();
        continue;
      }
    }
    work(*job);
  }
}

void ThreadPool::parallelFor(int64_t count,
                             const std::function<void(int64_t)> &fn) {
  if (count <= 0)
    return;
  auto job = std::make_shared<Job>(count, fn);
  const bool callerWorks = callerHasStack() || workers.empty();
  if ((count > 1 && parallelWorkers > 0) || !callerWorks) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      jobs.push_back(job);
    }
    wakeWorkers.notify_all();
  }
  if (callerWorks)
    work(*job);
  std::unique_lock<std::mutex> lock(job->mutex);
  job->finished.wait(lock, [&] { return job->done.load() == count; });
}
