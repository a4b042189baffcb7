// ReplicaThreads: per-thread OpenMP thread counts (the nthreads ICV is per thread, so each
// replica's oneDNN calls use its own count) and pthread affinity; a generation counter hands out
// tasks.
#include "tandem/parallel/replica_threads.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <cstring>
#include <string>

#include "tandem/base/check.h"

namespace tandem::parallel {

std::vector<int> available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  if (cpus.empty()) {
    const unsigned n = std::thread::hardware_concurrency();
    for (unsigned c = 0; c < (n ? n : 1); ++c) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}

void set_up_this_thread(const ThreadSetup& setup) {
  TANDEM_CHECK(setup.threads >= 1, "DataParallel: a replica needs at least one thread, got ",
               setup.threads);
  if (!setup.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : setup.cpus) {
      TANDEM_CHECK(c >= 0 && c < CPU_SETSIZE, "DataParallel: no CPU ", c);
      CPU_SET(c, &set);
    }
    const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    TANDEM_CHECK(rc == 0, "DataParallel: pinning a replica thread failed: ", std::strerror(rc));
  }
  omp_set_num_threads(setup.threads);
}

ReplicaThreads::ReplicaThreads(std::vector<ThreadSetup> setups)
    : setups_(std::move(setups)), errors_(setups_.size()) {
  TANDEM_CHECK(!setups_.empty(), "DataParallel: no replica threads to start");
  {
    std::lock_guard lock(mutex_);
    pending_ = setups_.size();
  }
  threads_.reserve(setups_.size());
  std::exception_ptr failed;
  try {
    for (std::size_t i = 0; i < setups_.size(); ++i) threads_.emplace_back([this, i] { loop(i); });
  } catch (...) {
    failed = std::current_exception();  // the threads started so far are stopped below
    std::lock_guard lock(mutex_);
    pending_ -= setups_.size() - threads_.size();
  }
  {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
    for (auto& e : errors_) {
      if (e && !failed) failed = e;
    }
  }
  if (failed) {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_) t.join();
    std::rethrow_exception(failed);
  }
}

ReplicaThreads::~ReplicaThreads() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

std::vector<std::exception_ptr> ReplicaThreads::run(const std::function<void(std::size_t)>& task) {
  std::unique_lock lock(mutex_);
  TANDEM_CHECK(pending_ == 0 && task_ == nullptr, "DataParallel: a step is already running");
  for (auto& e : errors_) e = nullptr;
  task_ = &task;
  pending_ = threads_.size();
  ++generation_;
  work_cv_.notify_all();
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  task_ = nullptr;
  return errors_;
}

void ReplicaThreads::loop(std::size_t index) {
  std::uint64_t seen = 0;
  {
    std::exception_ptr error;
    try {
      set_up_this_thread(setups_[index]);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    errors_[index] = error;
    seen = generation_;
    if (--pending_ == 0) done_cv_.notify_all();
  }
  for (;;) {
    const std::function<void(std::size_t)>* task = nullptr;
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      task = task_;
    }
    std::exception_ptr error;
    try {
      (*task)(index);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    errors_[index] = error;
    if (--pending_ == 0) done_cv_.notify_all();
  }
}

}  // namespace tandem::parallel
