// Dropout: checks p and forwards to the differentiable dropout with the module's training flag.
#include "tandem/nn/modules/dropout.h"

#include "tandem/autograd/functions.h"

namespace tandem::nn {

Dropout::Dropout(double probability, Generator* gen) : p(probability), generator(gen) {
  TANDEM_CHECK(p >= 0.0 && p <= 1.0, "Dropout: probability has to be between 0 and 1, but got ", p);
}

Tensor Dropout::forward(const Tensor& x) { return tandem::dropout(x, p, is_training(), generator); }

}  // namespace tandem::nn
