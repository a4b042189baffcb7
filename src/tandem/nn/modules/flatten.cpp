// Flatten: forwards to the differentiable flatten (a view when the input is contiguous).
#include "tandem/nn/modules/flatten.h"

#include "tandem/autograd/functions.h"

namespace tandem::nn {

Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim, end_dim); }

}  // namespace tandem::nn
