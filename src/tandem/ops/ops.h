// The ONE list of primitive kernels. No autograd here: each function computes values only; the
// autograd layer pairs forwards with backwards. Every kernel dispatches on the device (cpu/ now,
// cuda/ with the CUDA backend) and the dtype: float32 runs on oneDNN where oneDNN has the
// primitive, float64 runs the plain reference loops (used by gradient checks).
// Letters used in shapes: N batch, C channels, H/W height/width, K output channels,
// R/S kernel height/width, M/N/K of a matrix product, D features, L classes.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tandem/base/rng.h"
#include "tandem/tensor/tensor.h"

namespace tandem::ops {

// ---------------------------------------------------------------------------------------------
// Elementwise (elementwise.cpp). Binary ops broadcast (NumPy rules); dtypes must match.
enum class BinaryOp : std::uint8_t { Add, Sub, Mul, Div };
enum class UnaryOp : std::uint8_t { Neg, Exp, Log, Sqrt, Abs, Relu, Gelu, Sigmoid, Tanh };

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
// y = x * scale + shift
Tensor affine(const Tensor& x, double scale, double shift);
// y = numerator / x
Tensor reciprocal_scaled(const Tensor& x, double numerator);
Tensor pow_scalar(const Tensor& x, double exponent);
Tensor unary(UnaryOp op, const Tensor& x);
// Backward of the activations: grad_out * f'(x). relu uses its output y (y > 0 <=> x > 0).
Tensor relu_backward(const Tensor& grad_out, const Tensor& y);
Tensor gelu_backward(const Tensor& grad_out, const Tensor& x);  // exact (erf) GELU
// dst += alpha * src (same shape; dst contiguous). The accumulation primitive of backward.
void add_(const Tensor& dst, const Tensor& src, double alpha = 1.0);
// dst *= value
void scale_(const Tensor& dst, double value);
void fill_(const Tensor& dst, double value);
// Elementwise comparison a == b (same shape) as uint8 0/1.
Tensor equal(const Tensor& a, const Tensor& b);
// A float tensor of 0 / scale with P(scale) = 1 - p, from `generator` (dropout.cpp).
Tensor dropout_mask(const Shape& shape, double p, DType dtype, Device device, Generator& generator);
// dtype conversion on any device.
Tensor cast(const Tensor& x, DType dtype);

// ---------------------------------------------------------------------------------------------
// Reductions (reduce.cpp).
// Sum over `dims` (empty = all); keepdim keeps them as size 1.
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim);
// Sums a broadcast gradient back to `shape` (the backward of broadcasting).
Tensor sum_to_shape(const Tensor& grad, const Shape& shape);
// Index of the largest element along dim (int64); ties give the first.
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim);

// ---------------------------------------------------------------------------------------------
// Matrix products (matmul.cpp). a: (M, K) or (K, M) if trans_a; b: (K, N) or (N, K) if trans_b;
// result (M, N). Also batched: a (B, M, K), b (B, K, N).
// bfloat16: matmul, linear and conv2d (and their backwards) also take bfloat16 operands, accumulate
// in float32 and return bfloat16 (on a GPU with cuBLAS/cuDNN tensor cores; on the CPU through the
// float32 kernels, cpu/bfloat16_products.h). A bfloat16 product takes no bias (nor gives a bias
// gradient): autocast adds the bias in float32.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// Linear layer: x (N, D_in), w (D_out, D_in), b (D_out) or undefined -> y (N, D_out).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
// Backward of linear: grad_x (N, D_in) = g w; grad_w (D_out, D_in) = g^T x; grad_b = sum_N g.
Tensor linear_backward_input(const Tensor& grad_out, const Tensor& w);
void linear_backward_weights(const Tensor& grad_out, const Tensor& x, Tensor* grad_w,
                             Tensor* grad_b);

// ---------------------------------------------------------------------------------------------
// Convolution (conv2d.cpp). x (N, C, H, W), w (K, C/groups, R, S), b (K) or undefined,
// y (N, K, P, Q) with P = (H + 2*pad - dil*(R-1) - 1) / stride + 1.
}  // namespace tandem::ops
namespace tandem {
// The parameter structs live in namespace tandem (and are re-exported into ops) so that
// argument-dependent lookup does not make an unqualified conv2d(x, w, b, params) or
// avg_pool2d(x, params) ambiguous between the differentiable function and this kernel.
struct Conv2dParams {
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> dilation{1, 1};
  std::int64_t groups = 1;
};
}  // namespace tandem
namespace tandem::ops {
using tandem::Conv2dParams;
Shape conv2d_output_shape(const Shape& x, const Shape& w, const Conv2dParams& p);
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p);
Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& w, const Shape& x_shape,
                             const Conv2dParams& p);
// grad_b may be null when the convolution has no bias.
void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Shape& w_shape,
                             const Conv2dParams& p, Tensor* grad_w, Tensor* grad_b);

// ---------------------------------------------------------------------------------------------
// Pooling (pool2d.cpp). x (N, C, H, W) -> y (N, C, P, Q).
}  // namespace tandem::ops
namespace tandem {
struct Pool2dParams {  // in namespace tandem for the same reason as Conv2dParams
  std::array<std::int64_t, 2> kernel{2, 2};
  std::array<std::int64_t, 2> stride{2, 2};
  std::array<std::int64_t, 2> padding{0, 0};
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg pooling only
};
}  // namespace tandem
namespace tandem::ops {
using tandem::Pool2dParams;
Shape pool2d_output_shape(const Shape& x, const Pool2dParams& p, const char* op);
// Max pooling also returns, per output, the flat index (h * W + w) of the chosen input (int64).
Tensor max_pool2d(const Tensor& x, const Pool2dParams& p, Tensor* indices);
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& x_shape);
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape, const Pool2dParams& p);
// Adaptive average pooling to (P, Q): output cell i covers [floor(i*H/P), ceil((i+1)*H/P)).
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<std::int64_t, 2> output_size);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape);

// ---------------------------------------------------------------------------------------------
// Batch normalisation over (N, H, W) per channel C (batch_norm.cpp). x (N, C, H, W) or (N, C);
// weight, bias, running_mean, running_var (C) (weight/bias may be undefined).
// Training: normalises with batch statistics, returns them (mean, inverse std) for backward, and
// updates running stats in place: r = (1 - momentum) r + momentum * stat (unbiased variance).
Tensor batch_norm_train(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const Tensor& running_mean, const Tensor& running_var, double momentum,
                        double eps, Tensor* save_mean, Tensor* save_invstd);
Tensor batch_norm_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, double eps);
// grad_weight / grad_bias may be null.
Tensor batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                           const Tensor& save_mean, const Tensor& save_invstd,
                           Tensor* grad_weight, Tensor* grad_bias);

// ---------------------------------------------------------------------------------------------
// Softmax family (softmax.cpp), along `dim`.
Tensor softmax(const Tensor& x, std::int64_t dim);
Tensor log_softmax(const Tensor& x, std::int64_t dim);
Tensor softmax_backward(const Tensor& grad_out, const Tensor& y, std::int64_t dim);
Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& y, std::int64_t dim);

// ---------------------------------------------------------------------------------------------
// Loss (cross_entropy.cpp). logits (N, L), target (N) int64 class indices in [0, L).
// Loss per sample: -(1 - s) log p[target] - (s / L) sum_l log p[l], s = label_smoothing.
// Returns the mean (mean=true) or the sum over N as a 0-d tensor, and the log-probabilities.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing,
                     bool mean, Tensor* log_probs);
// grad_logits (N, L) = scale * (softmax - smoothed one-hot), scale = grad_loss (/ N if mean).
Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs,
                              const Tensor& target, double label_smoothing, bool mean);

// ---------------------------------------------------------------------------------------------
// Joining (cat.cpp): concatenation along dim; all other dims equal.
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim);

}  // namespace tandem::ops
