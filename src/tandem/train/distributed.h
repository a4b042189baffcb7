// Multi-process training for the trainer: joining the job a launcher started, the rank's shard
// of every epoch, and the step runner that averages gradients over the ranks (bucket by bucket,
// overlapped with the backward on one device per process), checks before the first step that
// every rank trains the same model, and gathers every rank's figures into the step's.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "tandem/data/sampler.h"
#include "tandem/dist/process_group.h"
#include "tandem/nn/module.h"
#include "tandem/parallel/process_reducer.h"
#include "tandem/train/config.h"
#include "tandem/train/devices.h"
#include "tandem/train/trainer.h"

namespace tandem::train {

// This process's place in a job; a single process has no group.
struct Job {
  std::shared_ptr<dist::ProcessGroup> group;
  int local_rank = 0;  // this process among those of its machine (LOCAL_RANK)
  int rank() const { return group ? group->rank() : 0; }
  int size() const { return group ? group->size() : 1; }
  bool distributed() const { return group != nullptr; }
  bool writes_files() const { return rank() == 0; }  // run directory, checkpoints, model, report
};

// Joins the job the environment describes (RANK/WORLD_SIZE, mpirun's or Slurm's variables;
// the store from TANDEM_STORE), when it has more than one process; else a single-process Job.
Job join_job(std::chrono::milliseconds comm_timeout);

// The rank's batch: the global batch divided by the ranks (an error naming both when it does not
// divide), and its shard of every epoch (a DistributedSampler: disjoint, the same count on every
// rank, so local batch k of every rank together is the single-process global batch k).
std::int64_t local_batch_size(const Job& job, std::int64_t global_batch);
std::shared_ptr<const data::Sampler> shard_sampler(const Job& job, std::int64_t dataset_size);

// Under a launcher, `--devices cuda` (every GPU; auto when it picks GPUs) means this process's
// own GPU, torchrun's convention: cuda:(local rank modulo the GPUs visible). Other layouts are
// left as they are. Returns the reason to show; empty when none applied.
std::string one_gpu_per_process(int local_rank, const std::string& spec, DeviceLayout& layout,
                                int gpus);

// How GPU gradients cross the processes: through NCCL, in a group beside the job's (each rank on
// a GPU of its own), or through the host (the job's Gloo group). Every rank of a job calls
// gpu_gradient_path at the same point: the ranks exchange which GPU each trains on (machine and
// PCI bus id) and all decide alike.
struct GpuGradientPath {
  std::unique_ptr<dist::ProcessGroup> nccl;  // null: through the host
  std::string reason;  // for the run log; empty when this rank does not train on one GPU
};
GpuGradientPath gpu_gradient_path(const Job& job, const DeviceLayout& layout, GpuReductionKind kind,
                                  bool deterministic);
// The decision itself: empty when NCCL applies, else why not. gpus: [rank] the GPU the rank
// trains on as a non-negative number (its machine and PCI bus id), or -1 when it does not train
// on one GPU.
std::string nccl_refusal(std::span<const std::int64_t> gpus, GpuReductionKind kind,
                         bool deterministic, bool nccl_built);

// The cross-process reduction of `model`'s trainable gradients (null for a single process), made
// before this process's runner. With `overlap`, buckets go across while the backward runs: with
// several devices each bucket DataParallel has summed (through options.on_bucket_reduced), with
// one device the gradient-ready hooks (when a step is a single backward); else after it. Without,
// all gradients form one bucket, reduced after the backward (see overlaps_backward).
// GPU buckets go through `gpu_group` when given (gpu_gradient_path's NCCL group, which must
// outlive the reducer).
std::shared_ptr<parallel::ProcessReducer> prepare_reduction(
    const Job& job, const nn::Module& model, std::size_t devices, bool overlap,
    RunnerOptions& options, dist::ProcessGroup* gpu_group = nullptr);

// Whether the cross-process reduction should overlap the backward: only when this process leaves
// a CPU free of compute threads (`compute_threads` against `cpus`), or computes on a GPU. With
// every core computing, the communication (its TCP copies) takes its CPU from the backward anyway,
// and each early bucket adds a hand-off to the communication thread and a meeting of the ranks:
// seed CNN, 2 processes x 1 thread on 2 cores, one bucket after the backward was 2-9% faster than
// 256 KiB buckets in each of 6 alternated runs (batch 64 and 256).
bool overlaps_backward(bool on_gpu, int compute_threads, int cpus);

// Whether --split shares the global batch among the ranks: under a launcher, with one device per
// process, `auto` (by the ranks' measured speed, re-checked during training, as DataParallel does
// for devices) or proportions, one per rank (3:2). Every rank then loads the whole global batch
// (the same batches as one process) and trains on its rows, its gradients weighted by its share;
// `even` keeps the sharded loading (each rank reads only its part). Errors name the mismatch.
bool splits_ranks(const Job& job, const SplitSetting& split, std::size_t devices);

// Wraps the runner of this process's devices: the fingerprint check and rank 0's weights before
// the first step, the cross-process reduction after each backward, the gathered figures and the
// agreed stop signal (StepResult::stop_signal; `stop_requested` gives this rank's). With a split
// among the ranks (splits_ranks), it takes global batches and trains on this rank's rows.
std::unique_ptr<StepRunner> make_distributed_runner(
    std::unique_ptr<StepRunner> local, const Job& job, const nn::Module& model,
    std::shared_ptr<parallel::ProcessReducer> reducer, std::function<int()> stop_requested,
    const SplitSetting& rank_split = {});

// Rank 0's text on every rank (the run directory a fresh run picks, for example).
std::string agree_on(const Job& job, const std::string& text);

// Whether --test-kill-at-step applies to this process: on the ranks TANDEM_TEST_KILL_RANK names
// (all when unset), and only in a launcher's first attempt (TANDEM_RESTART_COUNT 0 or unset).
bool test_kill_applies(const Job& job);

}  // namespace tandem::train
