// Differentiable batch normalisation. Training: batch statistics (ops::batch_norm_train, which
// also updates the running stats) and ops::batch_norm_backward. Evaluation: the running stats
// are constants, so the backward is a per-channel affine map written with elementwise kernels.
// Shapes: x (N, C, *), weight / bias / running stats (C).
#include "tandem/autograd/channel_broadcast.h"
#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

namespace autograd {

Tensor channel_view(const Tensor& t, std::int64_t rank) {
  Shape shape(static_cast<std::size_t>(rank), 1);
  shape[1] = t.size(0);
  Tensor c = contiguous_copy(t);
  return make_view(c, shape, contiguous_strides(shape), 0);
}

std::vector<std::int64_t> non_channel_dims(std::int64_t rank) {
  std::vector<std::int64_t> dims{0};
  for (std::int64_t i = 2; i < rank; ++i) dims.push_back(i);
  return dims;
}

}  // namespace autograd

namespace {

using autograd::channel_view;
using autograd::non_channel_dims;

Tensor eval_mode(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                 const Tensor& weight, const Tensor& bias, double eps) {
  Tensor y = ops::batch_norm_eval(x, weight, bias, running_mean, running_var, eps);
  record("batch_norm_eval", {x, weight, bias}, {y},
         [x = data_only(x), w = weight.defined() ? data_only(weight) : Tensor(),
          rm = data_only(running_mean), rv = data_only(running_var), eps](Grads& g, const Node& n) {
           using ops::BinaryOp;
           const std::int64_t rank = x.dim();
           // invstd (C) = 1 / sqrt(running_var + eps)
           Tensor invstd = ops::reciprocal_scaled(
               ops::unary(ops::UnaryOp::Sqrt, ops::affine(rv, 1.0, eps)), 1.0);
           Grads out(3);
           if (n.needs_input_grad(0)) {
             Tensor scale = w.defined() ? ops::binary(BinaryOp::Mul, invstd, w) : invstd;
             out[0] = ops::binary(BinaryOp::Mul, g[0], channel_view(scale, rank));
           }
           const auto dims = non_channel_dims(rank);
           if (n.needs_input_grad(1)) {
             // sum over (N, *) of g * (x - running_mean) * invstd
             Tensor xhat =
                 ops::binary(BinaryOp::Mul, ops::binary(BinaryOp::Sub, x, channel_view(rm, rank)),
                             channel_view(invstd, rank));
             out[1] = ops::sum(ops::binary(BinaryOp::Mul, g[0], xhat), dims, false);
           }
           if (n.needs_input_grad(2)) out[2] = ops::sum(g[0], dims, false);
           return out;
         });
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  if (!training) return eval_mode(x, running_mean, running_var, weight, bias, eps);
  Tensor save_mean, save_invstd;
  Tensor y = ops::batch_norm_train(x, weight, bias, running_mean, running_var, momentum, eps,
                                   &save_mean, &save_invstd);
  record("batch_norm", {x, weight, bias}, {y},
         [x = data_only(x), w = weight.defined() ? data_only(weight) : Tensor(), save_mean,
          save_invstd](Grads& g, const Node& n) {
           Tensor gw, gb;
           Tensor gx = ops::batch_norm_backward(g[0], x, w, save_mean, save_invstd,
                                                n.needs_input_grad(1) ? &gw : nullptr,
                                                n.needs_input_grad(2) ? &gb : nullptr);
           return Grads{n.needs_input_grad(0) ? gx : Tensor(), gw, gb};
         });
  return y;
}

}  // namespace tandem
