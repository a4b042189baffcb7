// RankCollective: what CollectiveReducer needs of a collective engine between the replicas of one
// process, each replica a rank driven by its own thread: a sum of a flat buffer into one rank that
// is queued and returns at once, work ordered behind it, a join, and an abort. NCCL is the engine
// for replicas each on a GPU of their own (nccl_collective.h); DataParallelOptions::collective
// takes another.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "tandem/device/device.h"
#include "tandem/tensor/tensor.h"

namespace tandem::parallel {

class RankCollective {
 public:
  virtual ~RankCollective() = default;
  virtual const char* name() const = 0;  // "nccl", ...
  // On rank's thread: queues the sum over all ranks of `t` (contiguous, the same numel and dtype
  // on every rank) into rank `root`'s `t`, after the work rank's thread queued so far; returns at
  // once. Every rank queues the same sums in the same order.
  virtual void reduce_sum(std::size_t rank, const Tensor& t, std::size_t root) = 0;
  // On rank's thread: `work` runs after the sums rank queued so far (at once, queuing its ops
  // behind them, or later on another thread); it must be safe to copy and run from any thread.
  virtual void after_sums(std::size_t rank, std::function<void()> work) = 0;
  // On rank's thread: rank's later work follows everything it queued here.
  virtual void join(std::size_t rank) = 0;
  // Ends every sum still waiting for a rank that will not come (main thread, ranks idle); the
  // collective is not used afterwards.
  virtual void abort() = 0;
};

// Makes the collective for the replicas on `devices` (one rank per replica, in order).
using RankCollectiveFactory =
    std::function<std::unique_ptr<RankCollective>(const std::vector<Device>& devices)>;

}  // namespace tandem::parallel
