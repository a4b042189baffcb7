// Activation modules: each forwards to its differentiable function.
#include "tandem/nn/modules/activation.h"

#include "tandem/autograd/functions.h"

namespace tandem::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor GELU::forward(const Tensor& x) { return gelu(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }

}  // namespace tandem::nn
