// The checks and problem sizes shared by the CPU and CUDA kernels (geometry.h).
#include "tandem/ops/geometry.h"

#include <algorithm>

#include "tandem/base/check.h"

namespace tandem::ops {

MatmulSizes matmul_sizes(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  MatmulSizes s;
  s.batched = a.dim() == 3;
  TANDEM_CHECK((a.dim() == 2 && b.dim() == 2) || (s.batched && b.dim() == 3),
               "matmul: expected two matrices or two batches of matrices, got ", show(a.shape()),
               " and ", show(b.shape()));
  s.batch = s.batched ? a.size(0) : 1;
  TANDEM_CHECK(!s.batched || b.size(0) == s.batch, "matmul: batch sizes differ: ",
               show(a.shape()), " and ", show(b.shape()));
  const std::int64_t o = s.batched ? 1 : 0;
  s.m = trans_a ? a.size(o + 1) : a.size(o);
  s.k = trans_a ? a.size(o) : a.size(o + 1);
  const std::int64_t kb = trans_b ? b.size(o + 1) : b.size(o);
  s.n = trans_b ? b.size(o) : b.size(o + 1);
  TANDEM_CHECK(s.k == kb, "matmul: ", show(a.shape()), (trans_a ? "^T" : ""), " and ",
               show(b.shape()), (trans_b ? "^T" : ""), " cannot be multiplied");
  s.out = s.batched ? Shape{s.batch, s.m, s.n} : Shape{s.m, s.n};
  return s;
}

void check_linear_shapes(const char* op, const Tensor& x, const Tensor& w) {
  TANDEM_CHECK(x.dim() == 2 && w.dim() == 2, op, ": expected input (N, D_in) and weight "
               "(D_out, D_in), got input ", show(x.shape()), " and weight ", show(w.shape()));
  TANDEM_CHECK(x.size(1) == w.size(1), op, ": input ", show(x.shape()),
               " does not match weight ", show(w.shape()), " (", x.size(1), " input features, ",
               w.size(1), " expected)");
}

void check_no_bf16_bias(const char* op, DType dtype, bool has_bias) {
  TANDEM_CHECK(dtype != DType::BFloat16 || !has_bias, op,
               ": a bfloat16 product takes no bias; add it in float32 after widening the result "
               "(as autocast does)");
}

AlongDim along_dim(const char* op, const Tensor& x, std::int64_t dim) {
  const std::int64_t rank = std::max<std::int64_t>(x.dim(), 1);
  const std::int64_t d = wrap_dim(dim, rank, op);
  AlongDim g;
  for (std::int64_t i = 0; i < x.dim(); ++i) {
    if (i < d) g.a *= x.size(i);
    if (i == d) g.l = x.size(i);
    if (i > d) g.b *= x.size(i);
  }
  return g;
}

Shape shape_without(const Tensor& x, std::int64_t d, bool keepdim) {
  Shape out;
  for (std::int64_t i = 0; i < x.dim(); ++i) {
    if (i != d) {
      out.push_back(x.size(i));
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

ChannelGeometry channel_geometry(const char* op, const Tensor& x) {
  TANDEM_CHECK(x.dim() >= 2, op, ": expected input (N, C) or (N, C, H, W), got ", show(x.shape()));
  ChannelGeometry g{x.size(0), x.size(1), 1};
  for (std::int64_t i = 2; i < x.dim(); ++i) g.s *= x.size(i);
  return g;
}

void check_per_channel(const char* op, const char* what, const Tensor& t, const Tensor& x,
                       std::int64_t c) {
  if (!t.defined()) return;
  TANDEM_CHECK(t.dim() == 1 && t.size(0) == c, op, ": ", what, " of shape ", show(t.shape()),
               " does not match input ", show(x.shape()), " with ", c, " channels");
}

void check_batch_norm_params(const char* op, const Tensor& x, std::int64_t c, const Tensor& weight,
                             const Tensor& bias, const Tensor& running_mean,
                             const Tensor& running_var) {
  check_per_channel(op, "weight", weight, x, c);
  check_per_channel(op, "bias", bias, x, c);
  check_per_channel(op, "running_mean", running_mean, x, c);
  check_per_channel(op, "running_var", running_var, x, c);
}

void check_batch_norm_backward(const char* op, const Tensor& grad_out, const Tensor& x,
                               std::int64_t c, const Tensor& weight, const Tensor& save_mean,
                               const Tensor& save_invstd) {
  TANDEM_CHECK(grad_out.shape() == x.shape(), op, ": gradient ", show(grad_out.shape()),
               " does not match input ", show(x.shape()));
  TANDEM_CHECK(save_mean.defined() && save_invstd.defined(), op,
               ": needs the saved batch mean and inverse std");
  check_per_channel(op, "weight", weight, x, c);
  check_per_channel(op, "save_mean", save_mean, x, c);
  check_per_channel(op, "save_invstd", save_invstd, x, c);
}

Shape cat_shape(const std::vector<Tensor>& tensors, std::int64_t dim, std::int64_t* wrapped) {
  TANDEM_CHECK(!tensors.empty(), "cat: expected at least one tensor");
  const Tensor& first = tensors.front();
  TANDEM_CHECK(first.defined(), "cat: tensor 0 is undefined");
  TANDEM_CHECK(first.dim() > 0, "cat: cannot concatenate 0-d tensors");
  const std::int64_t d = wrap_dim(dim, first.dim(), "cat");
  Shape out_shape = first.shape();
  out_shape[static_cast<std::size_t>(d)] = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TANDEM_CHECK(t.defined(), "cat: tensor ", i, " is undefined");
    TANDEM_CHECK(t.device() == first.device(), "cat: tensor ", i, " is on ", t.device(),
                 " but tensor 0 is on ", first.device());
    TANDEM_CHECK(t.dtype() == first.dtype(), "cat: tensor ", i, " is ", t.dtype(),
                 " but tensor 0 is ", first.dtype());
    bool same = t.dim() == first.dim();
    for (std::int64_t k = 0; same && k < t.dim(); ++k) same = k == d || t.size(k) == first.size(k);
    TANDEM_CHECK(same, "cat: tensor ", i, " of shape ", show(t.shape()),
                 " does not match tensor 0 of shape ", show(first.shape()),
                 " in every dimension except ", d);
    out_shape[static_cast<std::size_t>(d)] += t.size(d);
  }
  *wrapped = d;
  return out_shape;
}

}  // namespace tandem::ops
