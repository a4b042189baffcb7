// Differentiable 2-D convolution: forward with ops::conv2d, backward with the two conv2d backward
// kernels (the input gradient only when the input needs one, e.g. not for a network's first layer).
// x (N, C, H, W), w (K, C/groups, R, S), b (K) -> y (N, K, P, Q).
#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv2dParams& params) {
  Tensor y = ops::conv2d(x, weight, bias, params);
  record("conv2d", {x, weight, bias}, {y},
         [x = data_only(x), w = data_only(weight), has_bias = bias.defined(), params](
             Grads& g, const Node& n) {
           Grads out(3);
           if (n.needs_input_grad(0)) {
             out[0] = ops::conv2d_backward_input(g[0], w, x.shape(), params);
           }
           const bool need_w = n.needs_input_grad(1), need_b = has_bias && n.needs_input_grad(2);
           if (need_w || need_b) {
             ops::conv2d_backward_weights(g[0], x, w.shape(), params, need_w ? &out[1] : nullptr,
                                          need_b ? &out[2] : nullptr);
           }
           return out;
         });
  return y;
}

}  // namespace tandem
