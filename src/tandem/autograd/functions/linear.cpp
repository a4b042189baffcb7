// Differentiable matrix products: matmul (2-D and batched 3-D) and the linear layer.
// Under bfloat16 autocast (autocast.h) both run on bfloat16 casts of their operands, widen the
// result, and linear adds its bias in float32.
// x (N, D_in), w (D_out, D_in), b (D_out) -> y (N, D_out).
#include "tandem/autograd/autocast.h"
#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (autocast_to_bf16(a, b)) {
    return to_dtype(matmul(to_dtype(a, DType::BFloat16), to_dtype(b, DType::BFloat16)),
                    DType::Float32);
  }
  Tensor y = ops::matmul(a, b);
  record("matmul", {a, b}, {y}, [a = data_only(a), b = data_only(b)](Grads& g, const Node& n) {
    // dA = G B^T, dB = A^T G
    return Grads{n.needs_input_grad(0) ? ops::matmul(g[0], b, false, true) : Tensor(),
                 n.needs_input_grad(1) ? ops::matmul(a, g[0], true, false) : Tensor()};
  });
  return y;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (autocast_to_bf16(x, weight)) {
    const Tensor y = to_dtype(
        linear(to_dtype(x, DType::BFloat16), to_dtype(weight, DType::BFloat16), Tensor()),
        DType::Float32);
    return bias.defined() ? add(y, bias) : y;
  }
  Tensor y = ops::linear(x, weight, bias);
  record("linear", {x, weight, bias}, {y},
         [x = data_only(x), w = data_only(weight), has_bias = bias.defined()](Grads& g,
                                                                              const Node& n) {
           Grads out(3);
           if (n.needs_input_grad(0)) out[0] = ops::linear_backward_input(g[0], w);
           if (n.needs_input_grad(1) || n.needs_input_grad(2)) {
             Tensor gw, gb;
             ops::linear_backward_weights(g[0], x, &gw, has_bias ? &gb : nullptr);
             if (n.needs_input_grad(1)) out[1] = gw;
             if (n.needs_input_grad(2)) out[2] = gb;
           }
           return out;
         });
  return y;
}

}  // namespace tandem
