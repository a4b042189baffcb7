// ProcessReducer: gradient buckets averaged across processes (ranks of a dist::ProcessGroup)
// while backward runs, as DistributedDataParallel does. A complete bucket goes to this process's
// communication thread, which all-reduces the buckets one by one in index order (the same order
// on every rank; Gloo's halving-doubling sums in a fixed order too) in their parameters' dtype,
// and writes the means back (or, when the ranks' shares of the batch differ, the sums of the
// gradients each weighted by its rank's share). Not a replica reducer: within a process,
// HostReducer (reducer.h) sums the replicas first. GPU gradients (one GPU per process) go across
// on the GPU when a group for GPU tensors is given (NCCL, each rank on a GPU of its own): the
// communication thread queues the bucket's copies into a flat GPU buffer behind the backward's
// work, NCCL sums it once those copies are done, and the results are queued back ahead of the
// optimizer's work. Without one they go through the host: copied there, summed by the process
// group (Gloo), and copied back. A few extra numbers per step
// (the ranks' losses and counts) can ride in the last bucket's all-reduce, summed instead of
// averaged, so they cost no collective of their own.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tandem/tensor/tensor.h"

namespace tandem::dist {
class ProcessGroup;
class RepeatedAllReduce;
}  // namespace tandem::dist

namespace tandem::parallel {

struct CommStats {
  double communication_s = 0;  // the communication thread inside all-reduces
  double wait_s = 0;           // the caller blocked in finish() for the last buckets
  std::int64_t buckets = 0;
};

class ProcessReducer {
 public:
  // params: the model's parameters in registration order; buckets of about bucket_bytes are cut
  // in reverse order (the order backward produces them). extras: how many numbers each finish()
  // sums across the ranks along with the last bucket (in the bucket's dtype: float32 keeps 24
  // bits, so counts stay exact below 2^24); that bucket then waits for finish(). gpu_group: a
  // group of the same ranks for GPU tensors (dist::init_nccl_beside), used for the buckets whose
  // gradients are on this process's GPU; null: they go through `group` by way of the host.
  ProcessReducer(dist::ProcessGroup& group, std::vector<Tensor> params, std::size_t bucket_bytes,
                 std::size_t extras = 0, dist::ProcessGroup* gpu_group = nullptr);
  ~ProcessReducer();
  ProcessReducer(const ProcessReducer&) = delete;
  ProcessReducer& operator=(const ProcessReducer&) = delete;

  // Registers gradient-ready hooks on the parameters, so an armed backward hands buckets over as
  // they complete. Without them, finish() reduces every bucket after the backward.
  void attach_hooks();
  // The coming backward produces this step's final gradients.
  void arm();
  // For the coming step: this rank's gradients enter the sum times `weight` (its share of the
  // global batch, when the ranks' shares differ; 0 for a rank without samples), and the sum is
  // the result. Without it the ranks' gradients are averaged. Call before arm().
  void weigh(double weight);
  // Parameter `param`'s gradient is final for this step (from the hooks, or from a replica
  // reducer once it has summed the replicas); ignored unless armed. Any thread.
  void param_ready(std::size_t param);
  // The same for parameter tensors (a replica reducer's bucket); other tensors are ignored.
  void params_ready(const std::vector<Tensor>& params);
  // Hands every bucket not yet handed over to the thread (all of them, without hooks) and waits
  // until all are averaged across the ranks. Rethrows a communication failure. With extras,
  // `extras` (this rank's numbers) are summed over the ranks into `summed`; both hold `extras`.
  void finish(std::span<const double> extras = {}, std::span<double> summed = {});

  const std::vector<std::vector<std::size_t>>& buckets() const { return buckets_; }
  // "conv1.weight ..." style description of the bucket layout, for the ranks' fingerprint check.
  std::string layout() const;
  CommStats take_stats();

 private:
  struct Shared;
  void loop();
  void reduce(std::size_t bucket, double weight);
  // The bucket's GPU, when gpu_group_ is set and its gradients are on one (an error when they
  // are on several devices); nullopt: through the host.
  std::optional<Device> gpu_of(std::size_t bucket) const;
  void reduce_on_gpu(std::size_t bucket, double weight, Device gpu);

  dist::ProcessGroup& group_;
  std::vector<Tensor> params_;
  std::vector<std::vector<std::size_t>> buckets_;
  std::vector<std::size_t> bucket_of_;  // [param]
  std::unordered_map<const TensorImpl*, std::size_t> index_of_;
  std::shared_ptr<Shared> shared_;  // what the hooks reach (weakly)
  std::vector<Tensor> flat_;        // [bucket] its gradients, flattened (the last: + extras)
  // [bucket] its all-reduce, bound to flat_[bucket]; made by the thread on the bucket's first use
  std::vector<std::unique_ptr<dist::RepeatedAllReduce>> all_reduces_;
  dist::ProcessGroup* gpu_group_ = nullptr;
  // [bucket] on the GPU (gpu_group_): its flat buffer there (the last: + extras), and its
  // all-reduce; made by the thread on the bucket's first use. flat_ still carries the extras in.
  std::vector<Tensor> gpu_flat_;
  std::vector<std::unique_ptr<dist::RepeatedAllReduce>> gpu_all_reduces_;
  std::size_t extras_ = 0;
  std::vector<double> summed_extras_;  // the last all-reduce's extras, summed over the ranks

  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false, stopping_ = false;
  double weight_ = -1;                // this step's weight; negative: the mean over the ranks
  std::vector<std::size_t> pending_;  // [bucket] gradients still to come
  std::vector<bool> handed_;          // [bucket] handed to the thread this step
  std::size_t next_ = 0;              // the thread's next bucket
  std::size_t done_ = 0;              // buckets reduced this step
  std::exception_ptr error_;
  CommStats stats_;
  std::thread thread_;
};

}  // namespace tandem::parallel
