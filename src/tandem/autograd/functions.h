// The differentiable operations: each computes its forward with an ops:: kernel and records its
// backward (written beside it in autograd/functions/*.cpp). This is the API models are written
// in; nn::functional re-exports it. Composite operations (mse_loss, ...) are built from these and
// need no backward of their own.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tandem/base/rng.h"
#include "tandem/ops/ops.h"
#include "tandem/tensor/tensor.h"

namespace tandem {

using ops::Conv2dParams;
using ops::Pool2dParams;

// ---- elementwise (functions/elementwise.cpp) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor affine(const Tensor& x, double scale, double shift);  // x * scale + shift
Tensor rdiv(double numerator, const Tensor& x);              // numerator / x
Tensor pow(const Tensor& x, double exponent);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact (erf) form, as torch's default
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);

// ---- shape and views (functions/shape.cpp); views share storage ----
Tensor view(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, std::int64_t start_dim = 0, std::int64_t end_dim = -1);
Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1);
Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims);
Tensor slice(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t end,
             std::int64_t step = 1);
Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length);
Tensor select(const Tensor& x, std::int64_t dim, std::int64_t index);
Tensor unsqueeze(const Tensor& x, std::int64_t dim);
Tensor squeeze(const Tensor& x, std::int64_t dim);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor to_device(const Tensor& x, Device device);
Tensor to_dtype(const Tensor& x, DType dtype);
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim = 0);  // functions/cat.cpp

// ---- reductions (functions/reduce.cpp) ----
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim = false);  // not differentiable

// ---- linear algebra (functions/linear.cpp) ----
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- convolution and pooling (functions/conv.cpp, functions/pool.cpp) ----
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dParams& params = {});
Tensor max_pool2d(const Tensor& x, const Pool2dParams& params);
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& params);
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<std::int64_t, 2> output_size);

// ---- normalisation (functions/batch_norm.cpp) ----
// training: batch statistics, running stats updated in place; else running stats are used.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);

// ---- softmax and losses (functions/softmax.cpp, functions/loss.cpp) ----
Tensor softmax(const Tensor& x, std::int64_t dim);
Tensor log_softmax(const Tensor& x, std::int64_t dim);
enum class Reduction : std::uint8_t { Mean, Sum };
Tensor cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing = 0.0,
                     Reduction reduction = Reduction::Mean);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

// ---- regularisation (functions/dropout.cpp) ----
// Zeroes each element with probability p and scales the rest by 1/(1-p) when training.
Tensor dropout(const Tensor& x, double p, bool training, Generator* generator = nullptr);

}  // namespace tandem
