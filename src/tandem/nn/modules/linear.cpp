// Linear: parameters, PyTorch's default initialisation, and forward for any number of leading
// dimensions (flattened to (N, D_in) around the 2-D linear kernel).
#include "tandem/nn/modules/linear.h"

#include <cmath>

#include "tandem/autograd/functions.h"
#include "tandem/nn/init.h"
#include "tandem/tensor/factories.h"

namespace tandem::nn {

Linear::Linear(std::int64_t in, std::int64_t out, bool has_bias)
    : in_features(in), out_features(out) {
  TANDEM_CHECK(in > 0 && out > 0, "Linear: features must be positive, got in_features=", in,
               " out_features=", out);
  weight = register_parameter("weight", empty({out, in}));
  bias = register_parameter("bias", has_bias ? empty({out}) : Tensor());
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, {.a = std::sqrt(5.0)});
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) {
  TANDEM_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "Linear(", in_features, ", ",
               out_features, "): expected input (*, ", in_features, "), got ", show(x.shape()));
  if (x.dim() == 2) return tandem::linear(x, weight, bias);
  // (*, D_in) -> (M, D_in) -> (M, D_out) -> (*, D_out)
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor y = tandem::linear(reshape(x, {-1, in_features}), weight, bias);
  return reshape(y, out_shape);
}

}  // namespace tandem::nn
