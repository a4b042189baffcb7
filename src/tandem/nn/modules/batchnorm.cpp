// BatchNorm2d: buffers and parameters as PyTorch registers them, and the forward logic of
// torch.nn.modules.batchnorm._BatchNorm (momentum=None averaging, eval without running stats).
#include "tandem/nn/modules/batchnorm.h"

#include <utility>

#include "tandem/autograd/functions.h"
#include "tandem/nn/init.h"
#include "tandem/ops/ops.h"
#include "tandem/tensor/factories.h"

namespace tandem::nn {

BatchNorm2d::BatchNorm2d(std::int64_t num_features)
    : BatchNorm2d(BatchNorm2dOptions{.num_features = num_features}) {}

BatchNorm2d::BatchNorm2d(const BatchNorm2dOptions& o) : options(o) {
  TANDEM_CHECK(o.num_features > 0, "BatchNorm2d: num_features must be positive, got ",
               o.num_features);
  TANDEM_CHECK(o.eps > 0, "BatchNorm2d: eps must be positive, got ", o.eps);
  const std::int64_t c = o.num_features;
  weight = register_parameter("weight", o.affine ? empty({c}) : Tensor());
  bias = register_parameter("bias", o.affine ? empty({c}) : Tensor());
  const bool track = o.track_running_stats;
  running_mean = register_buffer("running_mean", track ? empty({c}) : Tensor());
  running_var = register_buffer("running_var", track ? empty({c}) : Tensor());
  num_batches_tracked =
      register_buffer("num_batches_tracked", track ? zeros({}, {.dtype = DType::Int64}) : Tensor());
  reset_parameters();
}

void BatchNorm2d::reset_running_stats() {
  if (!options.track_running_stats) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  copy_into(num_batches_tracked,
            zeros({}, {.dtype = DType::Int64, .device = num_batches_tracked.device()}));
}

void BatchNorm2d::reset_parameters() {
  reset_running_stats();
  if (options.affine) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

namespace {

thread_local BatchNormTrainFn t_train_override;  // see BatchNormTrainOverride

// t += 1 for an int64 scalar on a GPU, queued there with `one` (an int64 1 on t's device).
void increment_on_device(const Tensor& t, const Tensor& one) {
  copy_into(t, ops::binary(ops::BinaryOp::Add, t, one));
}

}  // namespace

BatchNormTrainOverride::BatchNormTrainOverride(BatchNormTrainFn fn)
    : previous_(std::exchange(t_train_override, std::move(fn))) {}

BatchNormTrainOverride::~BatchNormTrainOverride() { t_train_override = std::move(previous_); }

Tensor BatchNorm2d::forward(const Tensor& x) {
  TANDEM_CHECK(x.dim() == 4, "BatchNorm2d(", options.num_features,
               "): expected 4D input (N, C, H, W), got ", show(x.shape()));
  TANDEM_CHECK(x.size(1) == options.num_features, "BatchNorm2d(", options.num_features, "): input ",
               show(x.shape()), " has ", x.size(1), " channels");
  const bool training = is_training();
  double factor = options.momentum.value_or(0.0);
  if (training && options.track_running_stats) {
    const Tensor& count = num_batches_tracked;
    if (count.device().is_cpu()) {
      const std::int64_t batches = ++count.data<std::int64_t>()[0];
      if (!options.momentum) factor = 1.0 / static_cast<double>(batches);
    } else if (options.momentum) {
      if (!one_.defined() || one_.device() != count.device()) {
        one_ = ones({}, {.dtype = DType::Int64, .device = count.device()});
      }
      increment_on_device(count, one_);
    } else {  // the cumulative average needs the count on the host: one wait for the GPU
      Tensor host = copy_to(count, kCPU);
      const std::int64_t batches = ++host.data<std::int64_t>()[0];
      copy_into(count, copy_to(host, count.device()));
      factor = 1.0 / static_cast<double>(batches);
    }
  }
  if (training && t_train_override) {
    return t_train_override(x, running_mean, running_var, weight, bias, factor, options.eps);
  }
  // Batch statistics while training, and also in eval mode when there are no running stats.
  const bool use_batch_stats = training || !running_mean.defined();
  return tandem::batch_norm(x, running_mean, running_var, weight, bias, use_batch_stats, factor,
                            options.eps);
}

}  // namespace tandem::nn
