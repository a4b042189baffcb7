// Differentiable losses. cross_entropy is one fused primitive (log_softmax + NLL with label
// smoothing, backward from the saved log-probabilities); mse_loss is a composite of sub, mul
// and mean / sum and has no backward of its own.
// Shapes: logits (N, L), target (N) int64; mse_loss input and target of one shape.
#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

Tensor cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing,
                     Reduction reduction) {
  const bool mean = reduction == Reduction::Mean;
  Tensor log_probs;
  Tensor loss = ops::cross_entropy(logits, target, label_smoothing, mean, &log_probs);
  record(
      "cross_entropy", {logits}, {loss},
      [log_probs, target = data_only(target), label_smoothing, mean](Grads& g, const Node&) {
        return Grads{ops::cross_entropy_backward(g[0], log_probs, target, label_smoothing, mean)};
      });
  return loss;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  TANDEM_CHECK(input.shape() == target.shape(), "mse_loss: input ", show(input.shape()),
               " and target ", show(target.shape()), " differ in shape");
  Tensor diff = sub(input, target);
  Tensor squared = mul(diff, diff);
  return reduction == Reduction::Mean ? mean(squared) : sum(squared);
}

}  // namespace tandem
