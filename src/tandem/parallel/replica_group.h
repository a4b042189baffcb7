// ReplicaGroup: the replica threads of one DataParallel seen as a communication group. It gathers
// small host vectors from every active replica in a fixed replica order (SyncBatchNorm's
// statistics) and can be aborted, which wakes every waiting replica with ReplicaAborted, so that an
// error on one replica never leaves the others hanging. Host memory only; not a process group.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "tandem/base/check.h"

namespace tandem::parallel {

// Thrown on replicas stopped because another replica of the same step failed.
class ReplicaAborted : public Error {
 public:
  using Error::Error;
};

class ReplicaGroup {
 public:
  explicit ReplicaGroup(std::size_t size);
  ReplicaGroup(const ReplicaGroup&) = delete;
  ReplicaGroup& operator=(const ReplicaGroup&) = delete;

  std::size_t size() const { return size_; }

  // Starts a step (main thread, no replica running): active[r] says whether replica r takes part
  // in this step's collectives. Clears the abort flag and the wait times.
  void begin_step(const std::vector<bool>& active);

  // Every active replica calls this with its values, in the same sequence of calls; each gets every
  // active replica's values in replica order. Blocks until all have called, or throws
  // ReplicaAborted when the step is aborted meanwhile.
  std::vector<std::vector<double>> all_gather(std::size_t replica, std::vector<double> values);

  // Stops the step: current and later collectives throw ReplicaAborted on every replica.
  void abort();
  bool aborted() const;
  // Throws ReplicaAborted if the step was aborted (a cheap check between a replica's phases).
  void check_not_aborted() const;

  // Seconds replica r spent blocked in collectives since begin_step().
  double wait_seconds(std::size_t replica) const;

 private:
  std::size_t size_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<bool> active_;
  std::size_t active_count_ = 0;
  std::size_t arrived_ = 0;
  std::uint64_t generation_ = 0;
  std::atomic<bool> aborted_{false};
  std::vector<std::vector<double>> slots_;   // [replica] values of the collective in progress
  std::vector<std::vector<double>> result_;  // the last completed collective, active replicas only
  std::vector<double> wait_s_;               // [replica]
};

}  // namespace tandem::parallel
