// Gradient buckets and the reducer DataParallel drives from the gradient-ready hooks. Parameters
// are grouped in buckets of about bucket_bytes in reverse order of use; a bucket is handed on as
// soon as its gradients are final on a replica, while that replica's backward goes on.
// GradientReducer keeps this bookkeeping; what happens to a ready bucket is device-specific:
// HostReducer (CPU replicas, and GPU replicas through the host) sums it on the replica threads
// (see below); CollectiveReducer (collective_reducer.h: NCCL for replicas each on a GPU of
// their own) has a collective engine sum it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tandem/tensor/tensor.h"

namespace tandem::parallel {

// One gradient to sum: replica `replica`'s live .grad (stored < 0) or the gradient set it stored
// aside as number `stored`, times `coeff`.
struct Contribution {
  std::size_t replica = 0;
  std::int64_t stored = -1;
  double coeff = 0.0;
};

// What one reduction computes, for every parameter i, into the master's (replica 0's) .grad:
//   grad[i] = base[i] + sum over the contributions k, in their order, of coeff_k * g_k[i]
// summed per element in double (float64 accumulation, one rounding), base[i] undefined meaning
// nothing. The order is fixed, so the result does not depend on which thread sums or when.
struct ReductionPlan {
  std::vector<Contribution> contributions;
  std::vector<Tensor> base;  // one per parameter
};

// Parameters taken in `order`, cut into buckets that close once they hold at least bucket_bytes.
std::vector<std::vector<std::size_t>> make_buckets(const std::vector<std::size_t>& order,
                                                   const std::vector<std::size_t>& nbytes,
                                                   std::size_t bucket_bytes);

// out (n) = base (n, or null) + sum_k coeffs[k] * srcs[k] (n), per element in double, in k order.
// out may be one of the sources.
template <typename T>
void weighted_sum(T* out, const T* base, const std::vector<const T*>& srcs,
                  const std::vector<double>& coeffs, std::int64_t n);

class GradientReducer {
 public:
  // params[r][i]: parameter i of replica r (replica 0, the master, receives the result);
  // stored[r][s][i]: the gradient sets replica r put aside during the accumulation cycle.
  // Both are owned by the caller and outlive the reducer.
  GradientReducer(const std::vector<std::vector<Tensor>>& params,
                  const std::vector<std::vector<std::vector<Tensor>>>& stored,
                  std::size_t bucket_bytes);
  virtual ~GradientReducer() = default;
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before a communicating micro-step (main thread, replicas idle): what to sum.
  void begin(ReductionPlan plan);
  // Replica r's coming backward produces its final gradients: its hooks count from now on.
  void arm(std::size_t replica);
  // Stops counting replica r's hooks (after a failed step, whose backward may have been cut off).
  void disarm(std::size_t replica);
  bool armed(std::size_t replica) const {
    return state_[replica]->armed.load(std::memory_order_relaxed);
  }
  // The gradient-ready hook of replica r's parameter i (on r's thread); ignored unless armed.
  void grad_ready(std::size_t replica, std::size_t param);
  // Replica r is done (its backward ended, or it had no samples): buckets it has not completed
  // (parameters that received no gradient) are completed now, and r is disarmed.
  void finish(std::size_t replica);
  // After the first communicating step: regroups the buckets in the order replica 0's gradients
  // became ready (parameters never seen go last). Later calls change nothing.
  void rebuild_buckets();

  // After finish(r), on r's thread: orders r's later work on its device after its part of the
  // reduction (the optimizer reads the master's .grad, the next backward reuses the buffers).
  virtual void join(std::size_t /*replica*/) {}
  // After a failed step (main thread, replicas idle): ends whatever reduction is still waiting
  // for a replica that will not come; the next begin() starts afresh.
  virtual void abandon() {}
  // Deferred mode: sums wait for the replicas to help() once their backward has ended.
  virtual bool deferred() const { return false; }
  // Runs one waiting piece of a ready bucket's sum on replica r's thread; false if none was.
  virtual bool help(std::size_t /*replica*/) { return false; }
  // Every bucket's sum is set up: a help() that then returns false leaves nothing unclaimed.
  virtual bool all_set_up() const { return true; }
  // Every bucket of the current reduction is summed, or queued where it is summed (acquire).
  virtual bool all_reduced() const = 0;
  // "host" or "nccl": where the sums run, for reports.
  virtual const char* kind() const = 0;

  const std::vector<std::vector<std::size_t>>& buckets() const { return buckets_; }
  double reduce_seconds(std::size_t replica) const { return reduce_s_.at(replica); }

 protected:
  // Every gradient of bucket b is final on replica r (called on r's thread).
  virtual void bucket_ready(std::size_t replica, std::size_t bucket) = 0;
  // Called at the end of begin(), once the buckets for this reduction are settled.
  virtual void prepare() {}

  std::size_t replicas() const { return params_.size(); }
  const ReductionPlan& plan() const { return plan_; }
  // The gradient contribution c refers to for parameter i (undefined when it has none).
  Tensor contribution_grad(const Contribution& c, std::size_t param) const;
  const std::vector<std::vector<Tensor>>& params_;
  const std::vector<std::vector<std::vector<Tensor>>>& stored_;
  std::vector<double> reduce_s_;  // [replica], written by that replica's thread

 private:
  struct PerReplica {
    std::atomic<bool> armed{false};
    std::vector<std::size_t> pending;  // [bucket] gradients still to come
    std::vector<bool> param_done;      // [param]
    std::vector<bool> bucket_done;     // [bucket]
  };
  void complete(std::size_t replica, std::size_t bucket);

  std::size_t bucket_bytes_;
  std::vector<std::vector<std::size_t>> buckets_;
  std::vector<std::size_t> bucket_of_;  // [param]
  std::vector<std::unique_ptr<PerReplica>> state_;
  ReductionPlan plan_;
  bool rebuilt_ = false;
  std::vector<std::size_t> observed_;  // replica 0's ready order in the first communicating step
};

// Called with a bucket's master parameters once their gradients are summed (on the thread that
// summed them): how a reducer across processes takes each bucket on while the backward goes on.
using BucketReduced = std::function<void(const std::vector<Tensor>& params)>;

// CPU replicas: all gradients are in host memory. Each bucket counts the replicas that completed
// it; the one that completes it last prepares its sum (in the plan's fixed order, into the
// master's .grad) as chunks of elements, which the replicas then run:
//   - Eager (with `on_reduced`, which starts the cross-process reduction of each bucket while the
//     backward goes on, or with one replica): the last one runs every chunk at once.
//   - Deferred (otherwise): replicas run the chunks once their own backward has ended (help()),
//     so the sums land on whichever replica is idle rather than delaying the slowest one. Measured
//     on cpu:2 (seed CNN, batch 64): the last-arriving replica was the same one step after step,
//     and summing every bucket on it (0.28 ms per step) made it 0.7 ms slower than the other.
// The result does not depend on who runs which chunk: each element's sum is the same expression.
// Replicas whose gradients are not in host memory (GPU replicas; `staged[r]`) are reduced through
// the host: each copies its bucket's gradients to host memory on its own thread as it completes
// the bucket (the copy follows the backward's kernels on the device's stream), the sum runs on
// the host as above, and when the master is staged its .grad receives the result by a copy once
// the bucket's last chunk has run. The arithmetic is the CPU replicas', bit for bit; this is the
// path of two replicas on one GPU and of a GPU with CPU replicas, which NCCL cannot reduce.
class HostReducer final : public GradientReducer {
 public:
  HostReducer(const std::vector<std::vector<Tensor>>& params,
              const std::vector<std::vector<std::vector<Tensor>>>& stored,
              std::size_t bucket_bytes, BucketReduced on_reduced = nullptr,
              std::vector<bool> staged = {});
  ~HostReducer() override;

  // Deferred mode: chunks wait for help() (else bucket_ready() runs them all).
  bool deferred() const override { return !eager(); }
  // Runs one chunk of a ready bucket's sum on replica r's thread; false if none was waiting.
  bool help(std::size_t replica) override;
  // Every bucket's sum is set up (every replica completed every bucket).
  bool all_set_up() const override;
  // Every bucket of the current reduction is summed (acquire: the sums are visible).
  bool all_reduced() const override;
  const char* kind() const override { return "host"; }

 protected:
  void bucket_ready(std::size_t replica, std::size_t bucket) override;
  void prepare() override;  // resets the arrival counts and chunk states

 private:
  struct Job;
  void set_up(std::size_t bucket);
  void run_chunk(std::size_t replica, std::size_t bucket, int chunk);
  void stage(std::size_t replica, std::size_t bucket);  // its gradients to host memory
  bool eager() const { return on_reduced_ != nullptr || replicas() == 1; }
  bool staged(std::size_t replica) const { return staged_[replica]; }

  std::vector<bool> staged_;                     // [replica]
  std::vector<std::vector<Tensor>> host_grads_;  // [contribution][param] staged copies
  std::vector<Tensor> host_base_;                // [param] the staged plan base
  std::vector<std::unique_ptr<Job>> jobs_;  // [bucket]
  std::atomic<std::size_t> set_up_{0};      // buckets whose sum is set up
  std::atomic<std::size_t> reduced_{0};     // buckets whose every chunk has run
  BucketReduced on_reduced_;
};

}  // namespace tandem::parallel
