// ReplicaGroup: a generation-counted gather under one mutex. The last replica to arrive publishes
// the result and advances the generation; the result is only replaced when every participant has
// arrived at the next collective, so each one has copied it by then.
#include "tandem/parallel/replica_group.h"

#include <algorithm>
#include <chrono>

namespace tandem::parallel {

ReplicaGroup::ReplicaGroup(std::size_t size)
    : size_(size), active_(size, true), active_count_(size), slots_(size), wait_s_(size, 0.0) {
  TANDEM_CHECK(size > 0, "ReplicaGroup: a group needs at least one replica");
}

void ReplicaGroup::begin_step(const std::vector<bool>& active) {
  TANDEM_CHECK(active.size() == size_, "ReplicaGroup: ", active.size(), " flags for ", size_,
               " replicas");
  std::lock_guard lock(mutex_);
  active_ = active;
  active_count_ = 0;
  for (bool a : active_) active_count_ += a ? 1 : 0;
  arrived_ = 0;
  aborted_.store(false, std::memory_order_release);
  for (auto& s : slots_) s.clear();
  result_.clear();
  std::fill(wait_s_.begin(), wait_s_.end(), 0.0);
}

std::vector<std::vector<double>> ReplicaGroup::all_gather(std::size_t replica,
                                                          std::vector<double> values) {
  TANDEM_CHECK(replica < size_, "ReplicaGroup: replica ", replica, " of ", size_);
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  TANDEM_CHECK(active_[replica], "ReplicaGroup: replica ", replica,
               " is not active in this step but called a collective");
  if (aborted_) throw ReplicaAborted("DataParallel: step aborted (another replica failed)");
  slots_[replica] = std::move(values);
  const std::uint64_t generation = generation_;
  if (++arrived_ == active_count_) {
    result_.clear();
    for (std::size_t r = 0; r < size_; ++r) {
      if (active_[r]) result_.push_back(std::move(slots_[r]));
    }
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
    if (generation_ == generation) {
      throw ReplicaAborted("DataParallel: step aborted (another replica failed)");
    }
  }
  wait_s_[replica] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result_;
}

void ReplicaGroup::abort() {
  std::lock_guard lock(mutex_);
  aborted_.store(true, std::memory_order_release);
  cv_.notify_all();
}

bool ReplicaGroup::aborted() const { return aborted_.load(std::memory_order_acquire); }

void ReplicaGroup::check_not_aborted() const {
  if (aborted()) throw ReplicaAborted("DataParallel: step aborted (another replica failed)");
}

double ReplicaGroup::wait_seconds(std::size_t replica) const {
  std::lock_guard lock(mutex_);
  return wait_s_.at(replica);
}

}  // namespace tandem::parallel
