// `tandem train` as a library call: config resolution (defaults, a resumed checkpoint's config,
// --config FILE, flags), the stages devices -> model -> data -> train -> evaluate -> save, crash-safe
// checkpoints and resumption, and SIGINT/SIGTERM handling. Argument parsing stays in apps/.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tandem/data/dataset.h"
#include "tandem/device/cpu_allocator.h"
#include "tandem/io/checkpoint.h"
#include "tandem/nn/modules/loss.h"
#include "tandem/optim/optimizer.h"
#include "tandem/train/config.h"
#include "tandem/train/devices.h"
#include "tandem/train/evaluate.h"
#include "tandem/train/metrics.h"
#include "tandem/train/progress.h"

namespace tandem::train {

// ---- the data-parallel seam ----

// One global batch's forward + loss + backward, whatever the device layout.
struct StepResult {
  double loss = 0;  // mean loss over the global batch
  std::int64_t samples = 0;
  std::int64_t correct = 0;  // samples whose largest logit is their target's
  std::vector<DeviceFigures> devices;  // one entry per device (replica)
  // Multi-process: the largest stop signal (SIGINT, SIGTERM) any rank had received when the step's
  // gradients were reduced, the same on every rank, so all stop after the same step; 0: none.
  int stop_signal = 0;
};

// Runs forward, loss and backward of a global batch and leaves the batch's mean-loss gradients in
// the model's parameters (the optimizer then steps once). The single-device runner does it on one
// device; a data-parallel runner splits the batch over replicas and reduces their gradients.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual StepResult forward_backward(const data::Batch& batch) = 0;
  // The optimizer update after forward_backward: on the calling thread for one device; on a
  // replica thread (whose OpenMP team is already warm) for DataParallel. Its time goes into
  // `step` (forward_backward's result): each device's share of the update, and of waiting for the
  // others to finish theirs; a multi-process run carries this process's in its next step's row.
  virtual void optimizer_step(optim::Optimizer& optimizer, StepResult& step);
  // Several devices: where their gradients are summed ("nccl" or "host"); empty for one device.
  virtual std::string reduction() const { return ""; }
};

// How a runner works through a global batch (the --split, --sync-batchnorm, --accumulate,
// --threads and --micro-shard settings); the split and batch-norm settings need several devices.
struct RunnerOptions {
  std::int64_t accumulate = 1;  // micro-batches per global batch, each weighted by its rows
  SplitSetting split;
  bool sync_batchnorm = false;
  int threads = 0;  // per device; 0: one device gets the caller's default, replicas share cores
  std::int64_t micro_shard = 0;
  Precision precision = Precision::Float32;  // autocast over each forward and loss
  // One GPU: replay each batch shape's forward and backward from a CUDA graph (graph_runner.h).
  bool cuda_graphs = false;
  // Replicas each on a GPU of their own: summed by NCCL or through the host (bit for bit the CPU
  // reducer's arithmetic, which --deterministic asks for).
  GpuReductionKind gpu_reduction = GpuReductionKind::Nccl;
  // Said once when the runner changes course (a failed graph capture); may be null.
  std::function<void(const std::string&)> note;
  // Several devices: each bucket's master parameters once DataParallel has summed them (a
  // multi-process run reduces them across the processes from there).
  std::function<void(const std::vector<Tensor>& params)> on_bucket_reduced;
};
RunnerOptions runner_options(const TrainConfig& config);

class SingleDeviceRunner final : public StepRunner {
 public:
  SingleDeviceRunner(std::shared_ptr<nn::Module> model, Device device,
                     nn::CrossEntropyLoss criterion, std::int64_t accumulate = 1,
                     Precision precision = Precision::Float32);
  StepResult forward_backward(const data::Batch& batch) override;

 private:
  std::shared_ptr<nn::Module> model_;
  Device device_;
  nn::CrossEntropyLoss criterion_;
  std::int64_t accumulate_;
  Precision precision_;
  std::shared_ptr<MemoryAccount> account_;  // what the steps allocate on the host (peaks)
};

// The runner for a layout (the model is moved to the first device): SingleDeviceRunner for one
// device; for several, nn::DataParallel with replicas made by `factory`. options.threads > 0 on
// one device sets the calling thread's OpenMP thread count.
std::unique_ptr<StepRunner> make_step_runner(
    std::shared_ptr<nn::Module> model, const DeviceLayout& layout,
    const nn::CrossEntropyLoss& criterion,
    std::function<std::shared_ptr<nn::Module>()> factory = nullptr,
    const RunnerOptions& options = {});

// ---- configuration ----

struct TrainRequest {
  std::string config_file;  // --config FILE; empty for none
  // Settings given as flags, by config key, in command-line order (they override everything).
  std::vector<std::pair<std::string, std::string>> flags;
  // Test hook: after step N (and any checkpoint it writes), the process kills itself with
  // SIGKILL, as a crash would. 0: never.
  std::int64_t kill_at_step = 0;
};

struct ResolvedConfig {
  TrainConfig config;  // validated; config.out set to the run directory
  std::optional<io::FoundCheckpoint> checkpoint;  // what --resume found
};

// Applies defaults, then (with --resume) the checkpoint's saved config, then the config file,
// then the flags; finds the checkpoint; validates. Damaged checkpoints met while looking are
// reported through console.warning and skipped.
ResolvedConfig resolve_config(const TrainRequest& request, Console& console);

// ---- the run ----

enum class RunStatus : std::uint8_t { Finished, Interrupted };

struct TrainOutcome {
  RunStatus status = RunStatus::Finished;
  int signal = 0;  // SIGINT or SIGTERM when interrupted
  std::string run_dir;
  std::int64_t step = 0;
  std::optional<EvalResult> final_eval;
  // The process exit status: 0, or 128 + signal when interrupted.
  int exit_status() const { return status == RunStatus::Finished ? 0 : 128 + signal; }
};

// Trains as `tandem train` does, printing to `console`. Errors (bad data, a model that does not fit,
// an incompatible checkpoint) throw tandem::Error before anything in the run directory is
// replaced.
TrainOutcome run_training(const TrainRequest& request, Console& console);

}  // namespace tandem::train
