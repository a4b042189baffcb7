// The distributed step: [first step: fingerprint check, rank 0's weights to all] -> the local
// runner's forward/backward -> the cross-process bucket reduction, whose last all-reduce also
// carries every rank's row of figures (loss, counts, timings: an all-gather by sum, with no
// collective of its own), so rank 0's metrics describe the whole global batch. A step's timings
// are only known once its reduction is over, so each row carries its rank's previous step's.
#include "tandem/train/distributed.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <set>
#include <span>

#include "tandem/base/check.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/dist/consistency.h"
#include "tandem/dist/env.h"
#include "tandem/dist/init.h"
#include "tandem/parallel/process_reducer.h"
#include "tandem/parallel/split.h"
#include "tandem/tensor/factories.h"

namespace tandem::train {
namespace {

// 256 KiB, when the reduction overlaps the backward: the seed CNN's fc gradient (1 MB) goes alone,
// while the convolutions' backward runs.
constexpr std::size_t kBucketBytes = 1 << 18;
// Per rank: loss sum, samples, correct, 8 DeviceFigures figures, the stop signal it received.
constexpr int kFigures = 12;

// The parameters that get gradients, each once (tied weights count once), with their names.
nn::NamedTensors trainable(const nn::Module& model) {
  nn::NamedTensors out;
  std::set<const TensorImpl*> seen;
  for (const auto& [name, p] : model.named_parameters()) {
    if (p.requires_grad() && seen.insert(p.impl()).second) out.emplace_back(name, p);
  }
  return out;
}

class DistributedRunner final : public StepRunner {
 public:
  DistributedRunner(std::unique_ptr<StepRunner> local, const Job& job, const nn::Module& model,
                    std::shared_ptr<parallel::ProcessReducer> reducer,
                    std::function<int()> stop_requested, const SplitSetting& rank_split)
      : local_(std::move(local)),
        group_(job.group),
        named_(trainable(model)),
        reducer_(std::move(reducer)),
        stop_requested_(std::move(stop_requested)),
        rank_split_(rank_split) {
    if (rank_split.kind == SplitKind::Auto) {
      balancer_ = std::make_unique<parallel::AutoBalancer>(static_cast<std::size_t>(group_->size()),
                                                           parallel::AutoSplitOptions{});
    }
  }

  StepResult forward_backward(const data::Batch& batch) override {
    if (first_) {
      first_ = false;
      std::vector<dist::ParamInfo> params;
      for (const auto& [name, p] : named_) params.push_back({name, p.shape(), p.dtype()});
      dist::check_same_model(*group_, params, reducer_->layout());
      for (const auto& [name, p] : named_) {  // rank 0's weights
        if (p.device().is_cpu()) {
          group_->broadcast(p, 0);
          continue;
        }
        const Tensor host = copy_to(p, kCPU);  // a GPU parameter crosses through the host
        group_->broadcast(host, 0);
        copy_into(p, host);
      }
    }
    if (rank_split_.kind == SplitKind::Even) {
      reducer_->arm();
      return reduce(local_->forward_backward(batch));
    }
    // A global batch: this rank's rows, its gradients weighted by their share.
    const auto rank = static_cast<std::size_t>(group_->rank());
    const data::BatchShares shares = parallel::split_at_least_one(
        batch.data.size(0), balancer_ ? balancer_->proportions() : rank_split_.proportions);
    reducer_->weigh(shares.weight(rank));
    reducer_->arm();
    StepResult local;  // a rank without rows (a batch smaller than the ranks) adds zeros
    if (shares.counts[rank] > 0) local = local_->forward_backward(data::split(batch, shares)[rank]);
    StepResult out = reduce(local);
    if (balancer_) {
      // The rows carry each rank's previous step's time: pair it with that step's counts, which
      // every rank knows alike, so every rank moves the split the same way at the same step.
      if (!previous_counts_.empty()) {
        std::vector<double> seconds;
        for (const DeviceFigures& d : out.devices) seconds.push_back(d.forward_s + d.backward_s);
        balancer_->record(previous_counts_, seconds, /*may_change=*/true);
      }
      previous_counts_ = shares.counts;
    }
    return out;
  }

  // This process's update, timed on its devices and carried (as the other timings) in the next
  // step's row: `step` holds the ranks' rows, which only the ranks' own figures fill.
  void optimizer_step(optim::Optimizer& optimizer, StepResult& /*step*/) override {
    StepResult local;
    local.devices.resize(local_devices_);
    local_->optimizer_step(optimizer, local);
    for (const DeviceFigures& d : local.devices) {
      previous_.optimizer_s += d.optimizer_s;
      previous_.wait_s += d.wait_s;
    }
  }

 private:
  // The cross-process reduction of the step `r` is this rank's part of, and the gathered figures.
  StepResult reduce(const StepResult& r) {
    std::vector<double> rows(static_cast<std::size_t>(group_->size() * kFigures), 0.0);
    std::vector<double> all(rows.size());
    write_row(r, rows.data() + group_->rank() * kFigures);
    reducer_->finish(rows, all);
    // This step's figures (this process's devices summed into one row per rank, the
    // communication thread's time as reduction, the caller's wait for it as waiting): the next
    // step's row carries them.
    const parallel::CommStats comm = reducer_->take_stats();
    previous_ = DeviceFigures{};
    for (const DeviceFigures& d : r.devices) previous_ += d;
    local_devices_ = std::max<std::size_t>(r.devices.size(), 1);
    previous_.reduction_s += comm.communication_s;
    previous_.wait_s += comm.wait_s;
    return read_rows(all);
  }

  // This rank's row: the step's loss sum, samples and correct count, the previous step's timings.
  void write_row(const StepResult& local, double* row) const {
    const double values[kFigures] = {local.loss * static_cast<double>(local.samples),
                                     static_cast<double>(local.samples),
                                     static_cast<double>(local.correct),
                                     previous_.seconds,
                                     previous_.forward_s,
                                     previous_.backward_s,
                                     previous_.reduction_s,
                                     previous_.optimizer_s,
                                     previous_.wait_s,
                                     static_cast<double>(local.samples),
                                     static_cast<double>(previous_.peak_bytes),
                                     static_cast<double>(stop_requested_ ? stop_requested_() : 0)};
    std::copy(values, values + kFigures, row);
  }

  StepResult read_rows(const std::vector<double>& all) const {
    StepResult out;
    double loss_sum = 0;
    const double* a = all.data();
    for (int r = 0; r < group_->size(); ++r, a += kFigures) {
      loss_sum += a[0];
      out.samples += std::llround(a[1]);
      out.correct += std::llround(a[2]);
      out.devices.push_back({.device = "rank " + std::to_string(r),
                             .samples = std::llround(a[9]),
                             .seconds = a[3],
                             .forward_s = a[4],
                             .backward_s = a[5],
                             .reduction_s = a[6],
                             .optimizer_s = a[7],
                             .wait_s = a[8],
                             .peak_bytes = std::llround(a[10])});
      out.stop_signal = std::max(out.stop_signal, static_cast<int>(std::lround(a[11])));
    }
    out.loss = out.samples > 0 ? loss_sum / static_cast<double>(out.samples) : 0;
    return out;
  }

  std::unique_ptr<StepRunner> local_;
  std::shared_ptr<dist::ProcessGroup> group_;
  nn::NamedTensors named_;
  std::shared_ptr<parallel::ProcessReducer> reducer_;
  bool first_ = true;
  std::function<int()> stop_requested_;
  DeviceFigures previous_;         // this process's figures of the previous step
  std::size_t local_devices_ = 1;  // this process's devices (its runner's entries in a step)
  SplitSetting rank_split_;        // even: each rank's loader gives its own shard
  std::unique_ptr<parallel::AutoBalancer> balancer_;  // Auto
  std::vector<std::int64_t> previous_counts_;         // Auto: the ranks' rows last step
};

}  // namespace

Job join_job(std::chrono::milliseconds comm_timeout) {
  const std::optional<dist::WorldInfo> world = dist::world_from_env();
  if (!world || world->world_size == 1) return {};
  dist::ProcessGroupOptions options;
  options.timeout = comm_timeout;
  return Job{.group = dist::init_process_group(*world, options), .local_rank = world->local_rank};
}

std::string one_gpu_per_process(int local_rank, const std::string& spec, DeviceLayout& layout,
                                int gpus) {
  const bool every_gpu = spec == "cuda" || (spec == "auto" && !layout.devices.empty() &&
                                             layout.devices.front().is_cuda());
  if (!every_gpu || gpus <= 0) return "";
  const int gpu = local_rank % gpus;
  layout.devices = {Device(DeviceType::CUDA, gpu)};
  return "one GPU per process: cuda:" + std::to_string(gpu) + " for local rank " +
         std::to_string(local_rank) + " (" + std::to_string(gpus) + " GPUs visible)";
}

std::int64_t local_batch_size(const Job& job, std::int64_t global_batch) {
  TANDEM_CHECK(global_batch % job.size() == 0, "--batch-size ", global_batch,
               " (the global batch) does not divide among ", job.size(),
               " processes; choose a multiple of ", job.size());
  return global_batch / job.size();
}

std::shared_ptr<const data::Sampler> shard_sampler(const Job& job, std::int64_t dataset_size) {
  return std::make_shared<data::DistributedSampler>(
      dataset_size,
      data::DistributedSamplerOptions{
          .rank = job.rank(), .world_size = job.size(), .shuffle = true, .tail = data::Tail::Pad});
}

std::string nccl_refusal(std::span<const std::int64_t> gpus, GpuReductionKind kind,
                         bool deterministic, bool nccl_built) {
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    if (gpus[r] < 0) return "rank " + std::to_string(r) + " does not train on one GPU";
    for (std::size_t q = 0; q < r; ++q) {
      if (gpus[q] == gpus[r]) {
        return "ranks " + std::to_string(q) + " and " + std::to_string(r) +
               " train on the same GPU, and NCCL needs a GPU of its own for each rank";
      }
    }
  }
  if (deterministic) return "--deterministic (Gloo sums in a fixed order)";
  if (kind == GpuReductionKind::Host) return "--gpu-reduction host";
  if (!nccl_built) return "this build has no NCCL";
  return "";
}

namespace {

// This process's GPU as a number the other ranks can compare: its machine and PCI bus id.
std::int64_t gpu_identity(const DeviceLayout& layout) {
  if (layout.devices.size() != 1 || !layout.devices.front().is_cuda()) return -1;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string id =
      std::string(host) + "/" + cuda::gpu_info(layout.devices.front().index).pci_bus_id;
  constexpr auto kNonNegative = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  return static_cast<std::int64_t>(std::hash<std::string>{}(id) & kNonNegative);
}

}  // namespace

GpuGradientPath gpu_gradient_path(const Job& job, const DeviceLayout& layout, GpuReductionKind kind,
                                  bool deterministic) {
  if (!job.group) return {};
  const std::int64_t mine = gpu_identity(layout);
  const Tensor own = empty({1}, {.dtype = DType::Int64});
  own.data<std::int64_t>()[0] = mine;
  const Tensor gathered = empty({job.size()}, {.dtype = DType::Int64});
  job.group->all_gather(own, gathered);
  const std::span<const std::int64_t> gpus(gathered.data<std::int64_t>(),
                                           static_cast<std::size_t>(job.size()));
  const std::string refusal = nccl_refusal(gpus, kind, deterministic, dist::nccl_available());
  if (mine < 0) return {};
  const Device gpu = layout.devices.front();
  if (!refusal.empty()) {
    return {.reason = "GPU gradients cross the processes through the host (Gloo): " + refusal};
  }
  try {
    return {.nccl = dist::init_nccl_beside(*job.group, gpu.index),
            .reason = "GPU gradients cross the processes through NCCL (rank " +
                      std::to_string(job.rank()) + " on " + gpu.str() + ")"};
  } catch (const Error& e) {
    throw Error(std::string(e.what()) +
                "; --gpu-reduction host sends the GPU gradients through the host (Gloo) instead");
  }
}

std::shared_ptr<parallel::ProcessReducer> prepare_reduction(const Job& job, const nn::Module& model,
                                                            std::size_t devices, bool overlap,
                                                            RunnerOptions& options,
                                                            dist::ProcessGroup* gpu_group) {
  if (!job.group) return nullptr;
  std::vector<Tensor> params;
  for (const auto& [name, p] : trainable(model)) params.push_back(p);
  auto reducer = std::make_shared<parallel::ProcessReducer>(
      *job.group, params, overlap ? kBucketBytes : std::numeric_limits<std::size_t>::max(),
      static_cast<std::size_t>(job.size() * kFigures), gpu_group);
  if (!overlap) return reducer;  // one bucket, handed over by finish()
  if (devices > 1) {
    const std::weak_ptr<parallel::ProcessReducer> weak = reducer;
    options.on_bucket_reduced = [weak](const std::vector<Tensor>& bucket) {
      if (const auto r = weak.lock()) r->params_ready(bucket);
    };
  } else if (options.accumulate == 1) {
    reducer->attach_hooks();  // with accumulation, only the last backward's hooks would count
  }
  return reducer;
}

bool overlaps_backward(bool on_gpu, int compute_threads, int cpus) {
  return on_gpu || compute_threads < cpus;
}

bool splits_ranks(const Job& job, const SplitSetting& split, std::size_t devices) {
  if (!job.distributed() || split.kind == SplitKind::Even || devices > 1) return false;
  TANDEM_CHECK(split.kind != SplitKind::Weighted ||
                   split.proportions.size() == static_cast<std::size_t>(job.size()),
               "--split: ", split_name(split), " gives ", split.proportions.size(),
               " proportions for ", job.size(), " processes (one device each: the proportions "
               "share the global batch among the processes)");
  return true;
}

std::unique_ptr<StepRunner> make_distributed_runner(
    std::unique_ptr<StepRunner> local, const Job& job, const nn::Module& model,
    std::shared_ptr<parallel::ProcessReducer> reducer, std::function<int()> stop_requested,
    const SplitSetting& rank_split) {
  return std::make_unique<DistributedRunner>(std::move(local), job, model, std::move(reducer),
                                             std::move(stop_requested), rank_split);
}

std::string agree_on(const Job& job, const std::string& text) {
  return job.group ? dist::broadcast_string(*job.group, text) : text;
}

bool test_kill_applies(const Job& job) {
  const char* restart = std::getenv("TANDEM_RESTART_COUNT");
  if (restart && std::string(restart) != "0") return false;
  const char* rank = std::getenv("TANDEM_TEST_KILL_RANK");
  return !rank || std::atoi(rank) == job.rank();
}

}  // namespace tandem::train
