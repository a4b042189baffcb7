// The checks and problem sizes the CPU and CUDA kernels share, so both backends refuse the same
// inputs with the same messages and see the same geometry: matrix products and linear layers
// (and the bias a bfloat16 product refuses),
// "along one dim" ops (softmax, argmax), batch norm's per-channel operands, concatenation.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/base/shape.h"
#include "tandem/tensor/tensor.h"

namespace tandem::ops {

// matmul: a (M, K) or (K, M) if trans_a, b (K, N) or (N, K) if trans_b; or batches (B, ., .).
struct MatmulSizes {
  bool batched = false;
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  Shape out;  // (M, N) or (B, M, N)
};
MatmulSizes matmul_sizes(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b);

// Linear layers: x (N, D_in) and w (D_out, D_in).
void check_linear_shapes(const char* op, const Tensor& x, const Tensor& w);

// A product in `dtype` given (or asked for) a bias: refused for bfloat16, whose bias autocast adds
// in float32 after widening the result.
void check_no_bf16_bias(const char* op, DType dtype, bool has_bias);

// x seen as (a, l, b) around `dim` (l its length); a 0-d tensor is one element along a dim of
// length 1.
struct AlongDim {
  std::int64_t a = 1, l = 1, b = 1;
  Shape shape() const { return {a, l, b}; }
};
AlongDim along_dim(const char* op, const Tensor& x, std::int64_t dim);
// x's shape without dim d (or with it as 1 when keepdim).
Shape shape_without(const Tensor& x, std::int64_t d, bool keepdim);

// Batch norm: x (N, C) or (N, C, *) as n samples of c channels of s values.
struct ChannelGeometry {
  std::int64_t n = 0, c = 0, s = 1;
  std::int64_t m() const { return n * s; }  // values per channel
  Shape nchw() const { return {n, c, s, 1}; }
};
ChannelGeometry channel_geometry(const char* op, const Tensor& x);
// An undefined t passes; else it must be (c).
void check_per_channel(const char* op, const char* what, const Tensor& t, const Tensor& x,
                       std::int64_t c);

// batch_norm_train / _eval: weight, bias and the running statistics (each may be undefined) (C).
void check_batch_norm_params(const char* op, const Tensor& x, std::int64_t c, const Tensor& weight,
                             const Tensor& bias, const Tensor& running_mean,
                             const Tensor& running_var);
// batch_norm_backward: the gradient has x's shape, the saved statistics exist, all are (C).
void check_batch_norm_backward(const char* op, const Tensor& grad_out, const Tensor& x,
                               std::int64_t c, const Tensor& weight, const Tensor& save_mean,
                               const Tensor& save_invstd);

// cat: the output shape, after checking that every tensor is defined, on the first one's device,
// of its dtype and shape except along dim; *wrapped receives dim in [0, rank).
Shape cat_shape(const std::vector<Tensor>& tensors, std::int64_t dim, std::int64_t* wrapped);

}  // namespace tandem::ops
