// Matrix products on the CPU. float32: oneDNN matmul (general products, transposes expressed as
// strides) and inner_product (the linear layer, forward and both backwards, bias included).
// float64: plain reference loops.
#include "tandem/ops/cpu/common.h"
#include "tandem/ops/cpu/dnnl_context.h"
#include "tandem/ops/ops.h"

namespace tandem::ops {
namespace {

using dnnl::memory;

// Reference C = op(A) op(B) for one matrix; element (i, j) of op(A) is a[i*ars + j*acs].
template <typename T>
void ref_gemm(const T* a, std::int64_t ars, std::int64_t acs, const T* b, std::int64_t brs,
              std::int64_t bcs, T* c, std::int64_t m, std::int64_t n, std::int64_t k) {
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      T acc = 0;
      for (std::int64_t p = 0; p < k; ++p) acc += a[i * ars + p * acs] * b[p * brs + j * bcs];
      c[i * n + j] = acc;
    }
  }
}

// A descriptor of a contiguous (rows, cols) matrix (batched: (B, rows, cols)), seen transposed
// when `trans` is set.
memory::desc matrix_md(std::int64_t batch, std::int64_t rows, std::int64_t cols, bool trans,
                       bool batched) {
  // The stored matrix is (rows, cols) if !trans, else (cols, rows).
  if (batched) {
    const memory::dims dims{batch, rows, cols};
    const memory::dims strides = trans ? memory::dims{rows * cols, 1, rows}
                                       : memory::dims{rows * cols, cols, 1};
    return memory::desc(dims, memory::data_type::f32, strides);
  }
  const memory::dims dims{rows, cols};
  const memory::dims strides = trans ? memory::dims{1, rows} : memory::dims{cols, 1};
  return memory::desc(dims, memory::data_type::f32, strides);
}

void check_linear_shapes(const char* op, const Tensor& x, const Tensor& w) {
  TANDEM_CHECK(x.dim() == 2 && w.dim() == 2, op, ": expected input (N, D_in) and weight "
               "(D_out, D_in), got input ", show(x.shape()), " and weight ", show(w.shape()));
  TANDEM_CHECK(x.size(1) == w.size(1), op, ": input ", show(x.shape()),
               " does not match weight ", show(w.shape()), " (", x.size(1), " input features, ",
               w.size(1), " expected)");
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in, bool trans_a, bool trans_b) {
  cpu::check_operands("matmul", {&a_in, &b_in});
  const bool batched = a_in.dim() == 3;
  TANDEM_CHECK((a_in.dim() == 2 && b_in.dim() == 2) || (batched && b_in.dim() == 3),
               "matmul: expected two matrices or two batches of matrices, got ",
               show(a_in.shape()), " and ", show(b_in.shape()));
  const std::int64_t batch = batched ? a_in.size(0) : 1;
  TANDEM_CHECK(!batched || b_in.size(0) == batch, "matmul: batch sizes differ: ",
               show(a_in.shape()), " and ", show(b_in.shape()));
  const std::int64_t o = batched ? 1 : 0;
  const std::int64_t m = trans_a ? a_in.size(o + 1) : a_in.size(o);
  const std::int64_t k = trans_a ? a_in.size(o) : a_in.size(o + 1);
  const std::int64_t kb = trans_b ? b_in.size(o + 1) : b_in.size(o);
  const std::int64_t n = trans_b ? b_in.size(o) : b_in.size(o + 1);
  TANDEM_CHECK(k == kb, "matmul: ", show(a_in.shape()), (trans_a ? "^T" : ""), " and ",
               show(b_in.shape()), (trans_b ? "^T" : ""), " cannot be multiplied");
  Tensor a = cpu::contig(a_in), b = cpu::contig(b_in);
  Shape out_shape = batched ? Shape{batch, m, n} : Shape{m, n};
  Tensor c = cpu::new_like(out_shape, a);
  if (c.numel() == 0) return c;
  if (k == 0) {
    fill_(c, 0.0);
    return c;
  }
  if (a.dtype() == DType::Float64) {
    const double* pa = a.data<double>();
    const double* pb = b.data<double>();
    double* pc = c.data<double>();
    // Stored a is (m, k) or (k, m); stored b is (k, n) or (n, k).
    const std::int64_t ars = trans_a ? 1 : k, acs = trans_a ? m : 1;
    const std::int64_t brs = trans_b ? 1 : n, bcs = trans_b ? k : 1;
    for (std::int64_t i = 0; i < batch; ++i) {
      ref_gemm(pa + i * m * k, ars, acs, pb + i * k * n, brs, bcs, pc + i * m * n, m, n, k);
    }
    return c;
  }
  TANDEM_CHECK(a.dtype() == DType::Float32, "matmul: unsupported dtype ", a.dtype());
  // op(A) is (m, k): stored as (m, k), or (k, m) read transposed.
  const memory::desc a_md = matrix_md(batch, m, k, trans_a, batched);
  const memory::desc b_md = matrix_md(batch, k, n, trans_b, batched);
  const memory::desc c_md = cpu::plain_md(out_shape);
  const std::string key = "matmul:" + cpu::key_of(out_shape) + std::to_string(k) +
                          (trans_a ? "T" : "N") + (trans_b ? "T" : "N");
  auto& entry = cpu::cached_primitive(key, [&] {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, cpu::dnnl_engine());
    return cpu::CachedPrimitive{dnnl::matmul(pd), pd};
  });
  entry.primitive.execute(cpu::dnnl_stream(),
                          {{DNNL_ARG_SRC, cpu::as_memory(a, a_md)},
                           {DNNL_ARG_WEIGHTS, cpu::as_memory(b, b_md)},
                           {DNNL_ARG_DST, cpu::as_memory(c, c_md)},
                           {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}});
  return c;
}

Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
  cpu::check_operands("linear", {&x_in, &w_in, &b_in});
  check_linear_shapes("linear", x_in, w_in);
  if (b_in.defined()) {
    TANDEM_CHECK(b_in.dim() == 1 && b_in.size(0) == w_in.size(0), "linear: bias ",
                 show(b_in.shape()), " does not match weight ", show(w_in.shape()));
  }
  Tensor x = cpu::contig(x_in), w = cpu::contig(w_in);
  Tensor b = b_in.defined() ? cpu::contig(b_in) : Tensor();
  const std::int64_t n = x.size(0), d_out = w.size(0);
  if (x.dtype() == DType::Float64 || n == 0 || x.size(1) == 0) {
    Tensor y = matmul(x, w, false, true);
    if (b.defined()) y = binary(BinaryOp::Add, y, b);
    return y;
  }
  Tensor y = cpu::new_like({n, d_out}, x);
  const std::string key = "linear_fwd:" + cpu::key_of(x.shape()) + cpu::key_of(w.shape()) +
                          (b.defined() ? "b" : "");
  auto& entry = cpu::cached_primitive(key, [&] {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const memory::desc bias_md = b.defined() ? cpu::plain_md(b) : memory::desc();
    dnnl::inner_product_forward::desc d(dnnl::prop_kind::forward_training, cpu::plain_md(x),
                                        cpu::plain_md(w), bias_md, cpu::plain_md(y));
    dnnl::inner_product_forward::primitive_desc pd(d, attr, cpu::dnnl_engine());
    return cpu::CachedPrimitive{dnnl::inner_product_forward(pd), pd};
  });
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, cpu::as_memory(x)},
                                       {DNNL_ARG_WEIGHTS, cpu::as_memory(w)},
                                       {DNNL_ARG_DST, cpu::as_memory(y)},
                                       {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}};
  if (b.defined()) args.emplace(DNNL_ARG_BIAS, cpu::as_memory(b));
  entry.primitive.execute(cpu::dnnl_stream(), args);
  return y;
}

Tensor linear_backward_input(const Tensor& grad_out_in, const Tensor& w_in) {
  cpu::check_operands("linear_backward", {&grad_out_in, &w_in});
  Tensor g = cpu::contig(grad_out_in), w = cpu::contig(w_in);
  if (g.dtype() == DType::Float64 || g.numel() == 0) return matmul(g, w);
  const std::int64_t n = g.size(0), d_in = w.size(1);
  Tensor gx = cpu::new_like({n, d_in}, g);
  const std::string key = "linear_bwd_data:" + cpu::key_of(gx.shape()) + cpu::key_of(w.shape());
  auto& entry = cpu::cached_primitive(key, [&] {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::inner_product_forward::desc fd(dnnl::prop_kind::forward_training, cpu::plain_md(gx),
                                         cpu::plain_md(w), cpu::plain_md(g));
    dnnl::inner_product_forward::primitive_desc hint(fd, cpu::dnnl_engine());
    dnnl::inner_product_backward_data::desc d(cpu::plain_md(gx), cpu::plain_md(w),
                                              cpu::plain_md(g));
    dnnl::inner_product_backward_data::primitive_desc pd(d, attr, cpu::dnnl_engine(), hint);
    return cpu::CachedPrimitive{dnnl::inner_product_backward_data(pd), pd};
  });
  entry.primitive.execute(cpu::dnnl_stream(), {{DNNL_ARG_DIFF_DST, cpu::as_memory(g)},
                                               {DNNL_ARG_WEIGHTS, cpu::as_memory(w)},
                                               {DNNL_ARG_DIFF_SRC, cpu::as_memory(gx)},
                                               {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}});
  return gx;
}

void linear_backward_weights(const Tensor& grad_out_in, const Tensor& x_in, Tensor* grad_w,
                             Tensor* grad_b) {
  cpu::check_operands("linear_backward", {&grad_out_in, &x_in});
  Tensor g = cpu::contig(grad_out_in), x = cpu::contig(x_in);
  const std::int64_t d_out = g.size(1), d_in = x.size(1);
  if (g.dtype() == DType::Float64 || g.size(0) == 0) {
    if (grad_w) *grad_w = matmul(g, x, /*trans_a=*/true, false);
    if (grad_b) *grad_b = sum(g, {0}, false);
    return;
  }
  Tensor gw = cpu::new_like({d_out, d_in}, g);
  Tensor gb = grad_b ? cpu::new_like({d_out}, g) : Tensor();
  const std::string key = "linear_bwd_w:" + cpu::key_of(x.shape()) + cpu::key_of(gw.shape()) +
                          (grad_b ? "b" : "");
  auto& entry = cpu::cached_primitive(key, [&] {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const memory::desc bias_md = grad_b ? cpu::plain_md(gb) : memory::desc();
    dnnl::inner_product_forward::desc fd(dnnl::prop_kind::forward_training, cpu::plain_md(x),
                                         cpu::plain_md(gw), bias_md, cpu::plain_md(g));
    dnnl::inner_product_forward::primitive_desc hint(fd, cpu::dnnl_engine());
    dnnl::inner_product_backward_weights::desc d(cpu::plain_md(x), cpu::plain_md(gw), bias_md,
                                                 cpu::plain_md(g));
    dnnl::inner_product_backward_weights::primitive_desc pd(d, attr, cpu::dnnl_engine(), hint);
    return cpu::CachedPrimitive{dnnl::inner_product_backward_weights(pd), pd};
  });
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, cpu::as_memory(x)},
                                       {DNNL_ARG_DIFF_DST, cpu::as_memory(g)},
                                       {DNNL_ARG_DIFF_WEIGHTS, cpu::as_memory(gw)},
                                       {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}};
  if (grad_b) args.emplace(DNNL_ARG_DIFF_BIAS, cpu::as_memory(gb));
  entry.primitive.execute(cpu::dnnl_stream(), args);
  if (grad_w) *grad_w = gw;
  if (grad_b) *grad_b = gb;
}

}  // namespace tandem::ops
