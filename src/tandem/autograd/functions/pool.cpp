// Differentiable 2-D pooling: max (the backward routes each gradient to the input its forward
// chose), average and adaptive average. x (N, C, H, W) -> y (N, C, P, Q).
#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

Tensor max_pool2d(const Tensor& x, const Pool2dParams& params) {
  // The indices are only needed, and only kept, when a backward will run.
  const bool recording = grad_enabled() && autograd::any_requires_grad({&x});
  Tensor indices;
  Tensor y = ops::max_pool2d(x, params, recording ? &indices : nullptr);
  record("max_pool2d", {x}, {y}, [indices, x_shape = x.shape()](Grads& g, const Node&) {
    return Grads{ops::max_pool2d_backward(g[0], indices, x_shape)};
  });
  return y;
}

Tensor avg_pool2d(const Tensor& x, const Pool2dParams& params) {
  Tensor y = ops::avg_pool2d(x, params);
  record("avg_pool2d", {x}, {y}, [x_shape = x.shape(), params](Grads& g, const Node&) {
    return Grads{ops::avg_pool2d_backward(g[0], x_shape, params)};
  });
  return y;
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::array<std::int64_t, 2> output_size) {
  Tensor y = ops::adaptive_avg_pool2d(x, output_size);
  record("adaptive_avg_pool2d", {x}, {y}, [x_shape = x.shape()](Grads& g, const Node&) {
    return Grads{ops::adaptive_avg_pool2d_backward(g[0], x_shape)};
  });
  return y;
}

}  // namespace tandem
