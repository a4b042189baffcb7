// ReplicaThreads: one persistent worker thread per replica, set up once (its OpenMP thread count,
// which oneDNN uses for that thread's primitives, and optionally its CPU affinity). run() hands the
// same task to every thread and returns when all have finished, with each one's exception. Not a
// general thread pool: exactly one task per thread at a time, started and joined by one caller.
//
// Hand-offs are the cost at small batches (a DataParallel step is two run()s of a few ms each):
// a sleeping thread woken through a futex on this VM takes tens of microseconds to run again, and
// the caller sleeping through the replicas' work needs another wake-up. So, optionally, task 0 runs
// on the calling thread itself (one thread fewer to wake, and the caller is busy instead of
// asleep), and both sides spin for a short while (kSpin) before sleeping: a worker waiting for the
// next task, and the caller waiting for the last worker.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::parallel {

struct ThreadSetup {
  int threads = 1;        // OpenMP (hence oneDNN) threads used by work on this thread
  std::vector<int> cpus;  // CPUs this thread and its OpenMP team may run on; empty: not pinned
};

// One step of a spin-wait: tells the CPU this thread is waiting (x86 PAUSE, 64 times).
inline void spin_pause() {
  for (int i = 0; i < 64; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

// The CPUs this process may run on (its affinity mask), in increasing order.
std::vector<int> available_cpus();

// Applies a setup to the calling thread (its OpenMP thread count and, if given, its CPUs).
void set_up_this_thread(const ThreadSetup& setup);

enum class CallerRole : std::uint8_t {
  Waits,      // every task runs on a worker thread; the caller waits
  RunsFirst,  // task 0 runs on run()'s calling thread (with setups[0].threads OpenMP threads for
              // its duration); setups[0] must not pin CPUs
};

class ReplicaThreads {
 public:
  // How long a waiting side spins before it sleeps (busy for kBusy, then yielding between
  // checks). Measured on this 2-core VM (cpu:2, seed CNN, batch 64): a thread asleep in a futex
  // took about 0.3 ms to run again once woken, against a step of about 5 ms; the replicas finish
  // a few hundred microseconds apart, and the gaps between a step's two run()s and between steps
  // (the trainer's bookkeeping, the next batch) are shorter still.
  static constexpr std::chrono::microseconds kBusy{50};
  static constexpr std::chrono::microseconds kSpin{2000};

  // Starts one thread per setup (but the first, under RunsFirst) and waits until each is set up;
  // throws if a setup failed.
  explicit ReplicaThreads(std::vector<ThreadSetup> setups, CallerRole role = CallerRole::Waits);
  ~ReplicaThreads();  // joins the threads
  ReplicaThreads(const ReplicaThreads&) = delete;
  ReplicaThreads& operator=(const ReplicaThreads&) = delete;

  std::size_t size() const { return setups_.size(); }  // tasks per run()
  const ThreadSetup& setup(std::size_t i) const { return setups_.at(i); }

  // Runs task(i) for every i, on its own thread (task 0 on the caller's under RunsFirst); returns
  // each task's exception (null when it finished).
  std::vector<std::exception_ptr> run(const std::function<void(std::size_t)>& task);

 private:
  void loop(std::size_t index);
  void run_on_caller(const std::function<void(std::size_t)>& task);
  void wait_for_workers();

  std::vector<ThreadSetup> setups_;
  std::size_t first_worker_ = 0;  // the task index of threads_[0]: 1 under RunsFirst
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(std::size_t)>* task_ = nullptr;
  // Written under mutex_, also read without it by the spinning sides.
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::size_t> pending_{0};  // workers still running the current task (or setting up)
  std::atomic<bool> stop_{false};
  std::vector<std::exception_ptr> errors_;  // [task]
};

}  // namespace tandem::parallel
