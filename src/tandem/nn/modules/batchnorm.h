// BatchNorm2d: per-channel normalisation of (N, C, H, W) with batch statistics while training and
// running statistics in eval mode, as torch.nn.BatchNorm2d (same buffers, names and defaults).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "tandem/nn/module.h"

namespace tandem::nn {

struct BatchNorm2dOptions {
  std::int64_t num_features = 0;
  double eps = 1e-5;
  // Running stats: r = (1 - momentum) r + momentum * batch_stat. nullopt: a cumulative average
  // (momentum = 1 / num_batches_tracked), as torch's momentum=None.
  std::optional<double> momentum = 0.1;
  bool affine = true;               // learnable weight (C) and bias (C)
  bool track_running_stats = true;  // running_mean, running_var, num_batches_tracked buffers
};

// An extension point for cross-replica statistics (parallel::DataParallel's sync-batchnorm):
// while a BatchNormTrainOverride lives on a thread, training-mode BatchNorm2d forwards on that
// thread call its function instead of tandem::batch_norm, with the same arguments (momentum
// already resolved).
using BatchNormTrainFn =
    std::function<Tensor(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                         const Tensor& weight, const Tensor& bias, double momentum, double eps)>;
class BatchNormTrainOverride {
 public:
  explicit BatchNormTrainOverride(BatchNormTrainFn fn);
  ~BatchNormTrainOverride();
  BatchNormTrainOverride(const BatchNormTrainOverride&) = delete;
  BatchNormTrainOverride& operator=(const BatchNormTrainOverride&) = delete;

 private:
  BatchNormTrainFn previous_;
};

struct BatchNorm2d : Module {
  BatchNorm2dOptions options;
  Tensor weight;               // (C), ones; undefined unless affine
  Tensor bias;                 // (C), zeros; undefined unless affine
  Tensor running_mean;         // (C), zeros; undefined unless track_running_stats
  Tensor running_var;          // (C), ones; undefined unless track_running_stats
  Tensor num_batches_tracked;  // () int64, counts training forwards; same condition

  explicit BatchNorm2d(std::int64_t num_features);
  explicit BatchNorm2d(const BatchNorm2dOptions& options);

  // x (N, C, H, W) -> (N, C, H, W). Training (or no running stats): batch statistics, and the
  // running stats and num_batches_tracked are updated in place; eval: running statistics.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BatchNorm2d"; }
  void reset_running_stats();
  void reset_parameters();  // also resets the running stats

 private:
  // An int64 1 on num_batches_tracked's device, made on first need: the count then grows on the
  // GPU itself, without a wait for the GPU per forward (and a CUDA graph replays the increment).
  Tensor one_;
};

}  // namespace tandem::nn
