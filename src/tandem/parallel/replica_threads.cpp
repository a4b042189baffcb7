// ReplicaThreads: per-thread OpenMP thread counts (the nthreads ICV is per thread, so each
// replica's oneDNN calls use its own count) and pthread affinity; a generation counter hands out
// tasks.
#include "tandem/parallel/replica_threads.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>
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

namespace {

using Clock = std::chrono::steady_clock;

// Waits for done() without sleeping, for up to kSpin: busy for the first kBusy, then yielding the
// CPU between checks (to a data-loader thread, say); true if done() became true.
template <typename Done>
bool spin_until(Done&& done) {
  const auto start = Clock::now();
  const auto busy_until = start + ReplicaThreads::kBusy;
  const auto until = start + ReplicaThreads::kSpin;
  for (;;) {
    if (done()) return true;
    spin_pause();
    const auto now = Clock::now();
    if (now >= until) return done();
    if (now >= busy_until) sched_yield();
  }
}

}  // namespace

ReplicaThreads::ReplicaThreads(std::vector<ThreadSetup> setups, CallerRole role)
    : setups_(std::move(setups)), errors_(setups_.size()) {
  TANDEM_CHECK(!setups_.empty(), "DataParallel: no replica threads to start");
  if (role == CallerRole::RunsFirst) {
    TANDEM_CHECK(setups_[0].cpus.empty(),
                 "DataParallel: task 0 runs on the calling thread, which is not pinned");
    TANDEM_CHECK(setups_[0].threads >= 1, "DataParallel: a replica needs at least one thread, got ",
                 setups_[0].threads);
    first_worker_ = 1;
  }
  const std::size_t workers = setups_.size() - first_worker_;
  pending_.store(workers);
  threads_.reserve(workers);
  std::exception_ptr failed;
  try {
    for (std::size_t i = first_worker_; i < setups_.size(); ++i) {
      threads_.emplace_back([this, i] { loop(i); });
    }
  } catch (...) {
    failed = std::current_exception();  // the threads started so far are stopped below
    std::lock_guard lock(mutex_);
    pending_ -= workers - threads_.size();
  }
  {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return pending_.load() == 0; });
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
  {
    std::lock_guard lock(mutex_);
    TANDEM_CHECK(pending_.load() == 0 && task_ == nullptr, "DataParallel: a step is already running");
    for (auto& e : errors_) e = nullptr;
    task_ = &task;
    pending_.store(threads_.size());
    generation_.fetch_add(1, std::memory_order_release);
  }
  // Cheap when every worker is still spinning: no futex call without a sleeper.
  work_cv_.notify_all();
  if (first_worker_ == 1) run_on_caller(task);
  wait_for_workers();
  std::lock_guard lock(mutex_);
  task_ = nullptr;
  return errors_;
}

void ReplicaThreads::run_on_caller(const std::function<void(std::size_t)>& task) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(setups_[0].threads);
  try {
    task(0);
  } catch (...) {
    errors_[0] = std::current_exception();  // only this thread writes errors_[0] during a run
  }
  omp_set_num_threads(saved);
}

void ReplicaThreads::wait_for_workers() {
  // acquire: the workers' writes (their results, errors_) are visible once pending_ reads 0.
  if (spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) return;
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
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
    seen = generation_.load();
    if (pending_.fetch_sub(1) == 1) done_cv_.notify_all();
  }
  for (;;) {
    spin_until([&] {
      return stop_.load(std::memory_order_relaxed) ||
             generation_.load(std::memory_order_acquire) != seen;
    });
    const std::function<void(std::size_t)>* task = nullptr;
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      if (stop_.load()) return;
      seen = generation_.load();
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
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_cv_.notify_all();
  }
}

}  // namespace tandem::parallel
