// Differentiable dropout: y = x * mask with the mask from ops::dropout_mask (0 or 1 / (1 - p)),
// and grad_x = grad_y * mask. The identity when not training or when p == 0.
#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  TANDEM_CHECK(p >= 0.0 && p < 1.0, "dropout: probability must be in [0, 1), got ", p);
  if (!training || p == 0.0) return x;
  Tensor mask = ops::dropout_mask(x.shape(), p, x.dtype(), x.device(),
                                  generator ? *generator : default_generator());
  Tensor y = ops::binary(ops::BinaryOp::Mul, x, mask);
  record("dropout", {x}, {y}, [mask](Grads& g, const Node&) {
    return Grads{ops::binary(ops::BinaryOp::Mul, g[0], mask)};
  });
  return y;
}

}  // namespace tandem
