// Differentiable dropout: y = x * mask with the mask from ops::dropout_mask (0 or 1 / (1 - p)),
// and grad_x = grad_y * mask. The identity when not training or when p == 0. Without a generator
// the mask comes from the default one, drawn under its mutex (safe across replica threads).
#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  TANDEM_CHECK(p >= 0.0 && p < 1.0, "dropout: probability must be in [0, 1), got ", p);
  if (!training || p == 0.0) return x;
  Tensor mask;
  if (generator) {
    mask = ops::dropout_mask(x.shape(), p, x.dtype(), x.device(), *generator);
  } else {
    // Replicas on several threads may share the default generator.
    std::lock_guard<std::mutex> lock(default_generator_mutex());
    mask = ops::dropout_mask(x.shape(), p, x.dtype(), x.device(), default_generator());
  }
  Tensor y = ops::binary(ops::BinaryOp::Mul, x, mask);
  record("dropout", {x}, {y}, [mask](Grads& g, const Node&) {
    return Grads{ops::binary(ops::BinaryOp::Mul, g[0], mask)};
  });
  return y;
}

}  // namespace tandem
