// ReplicaThreads: one persistent worker thread per replica, set up once (its OpenMP thread count,
// which oneDNN uses for that thread's primitives, and optionally its CPU affinity). run() hands the
// same task to every thread and returns when all have finished, with each one's exception. Not a
// general thread pool: exactly one task per thread at a time, started and joined by one caller.
#pragma once

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

// The CPUs this process may run on (its affinity mask), in increasing order.
std::vector<int> available_cpus();

// Applies a setup to the calling thread (its OpenMP thread count and, if given, its CPUs).
void set_up_this_thread(const ThreadSetup& setup);

class ReplicaThreads {
 public:
  // Starts one thread per setup and waits until each is set up; throws if a setup failed.
  explicit ReplicaThreads(std::vector<ThreadSetup> setups);
  ~ReplicaThreads();  // joins the threads
  ReplicaThreads(const ReplicaThreads&) = delete;
  ReplicaThreads& operator=(const ReplicaThreads&) = delete;

  std::size_t size() const { return threads_.size(); }
  const ThreadSetup& setup(std::size_t i) const { return setups_.at(i); }

  // Runs task(i) on thread i for every i; returns each thread's exception (null when it finished).
  std::vector<std::exception_ptr> run(const std::function<void(std::size_t)>& task);

 private:
  void loop(std::size_t index);

  std::vector<ThreadSetup> setups_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(std::size_t)>* task_ = nullptr;
  std::uint64_t generation_ = 0;
  std::size_t pending_ = 0;  // threads still running the current task (or setting up)
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace tandem::parallel
