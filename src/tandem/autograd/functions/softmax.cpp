// Differentiable softmax and log-softmax along any dim; both backwards use the saved output y.
#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

Tensor softmax(const Tensor& x, std::int64_t dim) {
  Tensor y = ops::softmax(x, dim);
  record("softmax", {x}, {y}, [y = data_only(y), dim](Grads& g, const Node&) {
    return Grads{ops::softmax_backward(g[0], y, dim)};
  });
  return y;
}

Tensor log_softmax(const Tensor& x, std::int64_t dim) {
  Tensor y = ops::log_softmax(x, dim);
  record("log_softmax", {x}, {y}, [y = data_only(y), dim](Grads& g, const Node&) {
    return Grads{ops::log_softmax_backward(g[0], y, dim)};
  });
  return y;
}

}  // namespace tandem
