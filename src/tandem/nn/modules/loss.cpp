// Loss modules: argument checks naming the module, then the differentiable loss functions.
#include "tandem/nn/modules/loss.h"

namespace tandem::nn {

CrossEntropyLoss::CrossEntropyLoss(const CrossEntropyLossOptions& o) : options(o) {
  TANDEM_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0,
               "CrossEntropyLoss: label_smoothing must be in [0, 1], got ", o.label_smoothing);
}

Tensor CrossEntropyLoss::operator()(const Tensor& logits, const Tensor& target) const {
  TANDEM_CHECK(logits.dim() == 2 && target.dim() == 1 && target.size(0) == logits.size(0),
               "CrossEntropyLoss: expected logits (N, L) and target (N), got ",
               show(logits.shape()), " and ", show(target.shape()));
  TANDEM_CHECK(target.dtype() == DType::Int64,
               "CrossEntropyLoss: target must hold int64 class indices, got ", target.dtype());
  return tandem::cross_entropy(logits, target, options.label_smoothing, options.reduction);
}

Tensor MSELoss::operator()(const Tensor& input, const Tensor& target) const {
  TANDEM_CHECK(input.shape() == target.shape(), "MSELoss: input ", show(input.shape()),
               " and target ", show(target.shape()), " differ in shape");
  return tandem::mse_loss(input, target, reduction);
}

}  // namespace tandem::nn
