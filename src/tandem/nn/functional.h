// tandem::nn::functional: the differentiable functions under torch.nn.functional's namespace, so
// models can write `namespace F = tandem::nn::functional; F::relu(F::conv2d(x, w))`. Nothing new
// is defined here; these are the functions of autograd/functions.h.
#pragma once

#include "tandem/autograd/functions.h"

namespace tandem::nn::functional {

using tandem::Conv2dParams;
using tandem::Pool2dParams;
using tandem::Reduction;

using tandem::gelu;
using tandem::relu;
using tandem::sigmoid;
using tandem::tanh;

using tandem::linear;
using tandem::matmul;

using tandem::adaptive_avg_pool2d;
using tandem::avg_pool2d;
using tandem::conv2d;
using tandem::max_pool2d;

using tandem::batch_norm;
using tandem::dropout;

using tandem::cross_entropy;
using tandem::log_softmax;
using tandem::mse_loss;
using tandem::softmax;

using tandem::cat;
using tandem::flatten;

}  // namespace tandem::nn::functional
