// Differentiable 2-D convolution: forward with ops::conv2d, backward with the two conv2d backward
// kernels (the input gradient only when the input needs one, e.g. not for a network's first layer).
// Under bfloat16 autocast (autocast.h) the product runs on bfloat16 casts of x and w and the bias
// is added in float32 after widening y.
// x (N, C, H, W), w (K, C/groups, R, S), b (K) -> y (N, K, P, Q).
#include "tandem/autograd/autocast.h"
#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv2dParams& params) {
  if (autocast_to_bf16(x, weight)) {
    const Tensor y = to_dtype(
        conv2d(to_dtype(x, DType::BFloat16), to_dtype(weight, DType::BFloat16), Tensor(), params),
        DType::Float32);
    return bias.defined() ? add(y, view(bias, {1, bias.numel(), 1, 1})) : y;
  }
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
