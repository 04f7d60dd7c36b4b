//===- ThreadPool.cpp -----------------------------------------------------===//

#include "ThreadPool.h"

#include <atomic>
#include <system_error>

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
  for (unsigned i = 1; i < threads; ++i) {
    try {
      workers.emplace_back([this] { workerLoop(); });
    } catch (const std::system_error &) {
      // Out of threads: run with the workers we have.
      break;
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wakeWorkers.notify_all();
  for (std::thread &worker : workers)
    worker.join();
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
  if (count > 1 && !workers.empty()) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      jobs.push_back(job);
    }
    wakeWorkers.notify_all();
  }
  work(*job);
  std::unique_lock<std::mutex> lock(job->mutex);
  job->finished.wait(lock, [&] { return job->done.load() == count; });
}
