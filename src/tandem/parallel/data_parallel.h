// DataParallel: one process, several devices. Replicas of the model are made once and kept; each
// step splits the global batch across them, one persistent thread per device runs forward, loss
// and backward on its slice, and gradient buckets are reduced while backward is still running,
// as a weighted mean (weights = slice sizes) so the update equals one device on the whole batch.
// Not a Module: outputs are never gathered. The step is forward_backward() then step(optimizer).
//
// Optimizer placement on CPU (measured with bench/data_parallel_bench.cpp, seed CNN, 256k
// parameters, 2 cores): replicas alias the model's parameter storage (ParameterSync::Shared) and
// the optimizer updates it once, its element loops shared by the replica threads in equal slices
// (step()): one SGD-momentum update took 0.17 ms on one thread (0.09 ms since its loop is
// vectorized), and a serial update left the other replica idle for that long every step (cpu:2
// at batch 64, before the layout twins of ops/cpu: 77-85% scaling over several sessions with the
// serial update, 84-89% with the shared one). Update-then-broadcast (ParameterSync::Broadcast,
// kept: CUDA replicas will need it) and every-replica updates (N optimizer states) only add
// copies; Shared moves no bytes and keeps replicas identical by
// construction. The update runs with the replicas' OpenMP thread counts, not the caller's: the
// caller's OpenMP team (all cores by default) left spinning threads that cost 2.3-2.6 ms per step
// on cpu:2. Unpinned, replica 0 is the calling thread itself (with its replica's thread count for
// the duration), so each of a step's two hand-offs wakes one thread fewer (ReplicaThreads).
// Pinning (Pinning::Cores) is off by default: on 2 shared cores pinned and free replica threads
// were within noise of each other (+-15% from round to round).
// GPU replicas (cuda:I, the same GPU more than once, GPUs with CPU replicas) take the same path:
// each replica's thread queues its work on its GPU, and a master on a GPU is updated by replica
// 0's thread and copied to the other replicas when the next cycle begins. Replicas each on a GPU
// of their own are reduced by NCCL on the GPUs, overlapped with the backward (CollectiveReducer
// over NCCL, where it is built); the others (a GPU twice, GPUs with CPU replicas, or GpuReduction::Host) through
// the host (HostReducer's staging, bit for bit the CPU arithmetic).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "tandem/base/rng.h"
#include "tandem/device/device.h"
#include "tandem/nn/module.h"
#include "tandem/optim/optimizer.h"
#include "tandem/parallel/rank_collective.h"
#include "tandem/parallel/reducer.h"
#include "tandem/parallel/split.h"
#include "tandem/parallel/stats.h"
#include "tandem/tensor/tensor.h"

namespace tandem::nn {

namespace detail {
struct DataParallelState;
}

enum class SplitPolicy : std::uint8_t {
  Even,      // equal shares
  Weighted,  // DataParallelOptions::proportions, e.g. {3, 2, 2, 3}
  Auto,      // by measured throughput, kept up to date (AutoSplitOptions; timing-dependent:
             // exact weighting, but not bit-reproducible from run to run)
};
// PerReplica: each replica normalises with its own slice's statistics (as PyTorch's DataParallel).
// Global: statistics over the global batch (--sync-batchnorm); running stats match one device.
enum class BatchNormStats : std::uint8_t { PerReplica, Global };
// Shared: CPU replicas alias the master's parameters, the optimizer updates them once.
// Broadcast: replicas hold copies, refreshed from the master when an accumulation cycle begins.
// A replica on a GPU, or any replica of a master on a GPU, always holds copies (as Broadcast).
enum class ParameterSync : std::uint8_t { Shared, Broadcast };
// Cores: replica r's thread (and its OpenMP team) is pinned to its own block of CPUs.
enum class Pinning : std::uint8_t { None, Cores };
// How replicas each on a GPU of their own are reduced. Nccl: by NCCL on the GPUs where tandem is
// built with it (the host otherwise, and for any other mix of devices); Host: always through the
// host, bit for bit the CPU reducer's arithmetic.
enum class GpuReduction : std::uint8_t { Nccl, Host };
using parallel::AutoSplitOptions;

struct DataParallelOptions {
  SplitPolicy split = SplitPolicy::Even;
  std::vector<double> proportions;  // Weighted only: one non-negative number per device
  AutoSplitOptions auto_split;      // Auto only
  BatchNormStats batchnorm = BatchNormStats::PerReplica;
  std::int64_t accumulate = 1;         // forward_backward() calls per optimizer step
  std::size_t bucket_bytes = 1 << 20;  // gradient bucket size
  int threads_per_replica = 0;         // 0: max(1, cores / replicas)
  Pinning pinning = Pinning::None;
  ParameterSync parameter_sync = ParameterSync::Shared;
  GpuReduction gpu_reduction = GpuReduction::Nccl;
  // A collective engine of your own, one rank per replica, to sum the buckets with instead (on
  // any devices; not with on_bucket_reduced). Empty: NCCL for replicas each on a GPU of their
  // own (gpu_reduction), the host otherwise.
  parallel::RankCollectiveFactory collective;
  // > 0: the global batch is cut into fixed shards of this many samples, each a separate
  // forward/backward, whose gradients are summed in shard order: with the same threads_per_replica
  // the weights are then bit-identical whatever the number of replicas. Costs: smaller batches
  // per kernel call (shards of 16: 6-10% fewer images/s on the seed CNN), one stored gradient
  // copy per extra shard; batch norm normalises per shard; not with BatchNormStats::Global.
  std::int64_t micro_shard = 0;
  // Called with each bucket's master parameters once the replicas' gradients are summed, on a
  // replica thread (a multi-process run's cross-process reducer takes them on from there).
  parallel::BucketReduced on_bucket_reduced;
};

// The loss of one slice: output (n, ...) of the replica's forward and target rows (n, ...) -> a
// scalar, the mean over the slice. Called on the replica threads concurrently: it must be safe
// to call from several threads (a stateless criterion such as CrossEntropyLoss is).
using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;

struct StepResult {
  double loss = 0.0;          // sum_r (n_r / N) loss_r: the mean loss over the global batch
  std::int64_t samples = 0;   // N
  bool synchronized = false;  // last micro-step of a cycle: the model's .grad holds the result
  std::vector<DeviceStats> devices;
};

template <typename M>
concept ModelType = std::is_base_of_v<Module, M>;
template <typename M>
concept DefaultConstructibleModel = ModelType<M> && std::is_default_constructible_v<M>;

class DataParallel {
 public:
  // Replicas are made with std::make_shared<M>() ...
  template <DefaultConstructibleModel M>
  DataParallel(std::shared_ptr<M> model, std::vector<Device> devices,
               DataParallelOptions options = {})
      : DataParallel(std::move(model), std::move(devices),
                     std::function<std::shared_ptr<M>()>([] { return std::make_shared<M>(); }),
                     std::move(options)) {}

  // ... or by `factory`, for models without a default constructor. Either way the master's state
  // dict is copied into each (the broadcast, which also checks names and shapes); the default
  // generator is left as it was, so making replicas does not change later random draws.
  template <ModelType M>
  DataParallel(std::shared_ptr<M> model, std::vector<Device> devices,
               std::function<std::shared_ptr<M>()> factory, DataParallelOptions options = {}) {
    TANDEM_CHECK(model != nullptr, "DataParallel: no model");
    TANDEM_CHECK(factory != nullptr, "DataParallel: no replica factory");
    std::vector<ReplicaModel> replicas;
    replicas.push_back(bind(model));
    {
      GeneratorRestore restore;
      for (std::size_t i = 1; i < devices.size(); ++i) {
        std::shared_ptr<M> replica = factory();
        TANDEM_CHECK(replica != nullptr && replica.get() != model.get(),
                     "DataParallel: the replica factory must return a new model");
        replicas.push_back(bind(std::move(replica)));
      }
    }
    init(std::move(replicas), std::move(devices), std::move(options));
  }

  ~DataParallel();  // joins the replica threads
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // One micro-step on the global batch: data (N, ...) and target (N, ...) are split by rows. On
  // the last micro-step of a cycle the reduced gradient is added to the model's .grad (which then
  // reads as if one device had run the whole cycle). An exception on any replica stops the step
  // on all, discards the cycle's gradients (the model's .grad is as before the cycle) and is
  // rethrown here: the one from the lowest-numbered replica that failed, unchanged.
  // `weight` is this micro-step's share of the cycle's mean (its rows over the cycle's rows, for
  // micro-batches of unequal size); 0 means 1 / accumulate. `end_cycle` makes this micro-step the
  // cycle's last even before `accumulate` of them (a short last batch of an epoch).
  // The caller's autocast precision (autograd/autocast.h) holds on every replica thread.
  StepResult forward_backward(const Tensor& data, const Tensor& target, const LossFn& loss,
                              double weight = 0.0, bool end_cycle = false);

  // The optimizer step of a finished cycle (an optimizer over the model's parameters), shared by
  // the replica threads in equal element slices (the same result as optimizer.step(), bit for
  // bit) and timed into the accounting; returns its wall seconds. Calling optimizer.step()
  // directly also works (on the calling thread and its OpenMP team).
  double step(optim::Optimizer& optimizer);

  std::size_t size() const;
  const std::vector<Device>& devices() const;
  Module& replica(std::size_t index) const;  // 0 is the model itself
  std::vector<double> proportions() const;   // the current split, summing to 1
  int threads_per_replica() const;
  const DataParallelStats& stats() const;  // totals since construction
  // Parameter indices (in named_parameters() order, trainable ones) per gradient bucket.
  const std::vector<std::vector<std::size_t>>& buckets() const;
  // Where the gradients are summed: "nccl" (on the GPUs) or "host".
  const char* reduction() const;

 private:
  struct ReplicaModel {
    std::shared_ptr<Module> module;
    std::function<Tensor(const Tensor&)> forward;
  };
  // Restores the default generator's state on scope exit.
  struct GeneratorRestore {
    GeneratorState saved = default_generator().state();
    ~GeneratorRestore() { default_generator().set_state(saved); }
  };
  template <typename M>
  static ReplicaModel bind(std::shared_ptr<M> model) {
    M* raw = model.get();
    return {std::move(model), [raw](const Tensor& x) -> Tensor { return raw->forward(x); }};
  }
  void init(std::vector<ReplicaModel> replicas, std::vector<Device> devices,
            DataParallelOptions options);

  std::shared_ptr<detail::DataParallelState> state_;
};

// cpu:0 ... cpu:n-1: n CPU replicas (what --devices cpu:N means).
std::vector<Device> cpu_replicas(int n);

}  // namespace tandem::nn
