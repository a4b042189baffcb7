// Matrix products on the CPU. float32: oneDNN matmul (general products, transposes expressed as
// strides, and the linear layer's forward) and inner_product (the linear layer's backwards, the
// bias gradient included). A linear layer over a conv's output reads the conv's blocked layout
// directly (see below).
// float64: plain reference loops.
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "tandem/ops/cpu/bfloat16_products.h"
#include "tandem/ops/cpu/common.h"
#include "tandem/ops/cpu/dnnl_context.h"
#include "tandem/ops/cpu/layout_twin.h"
#include "tandem/ops/geometry.h"
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

// ---- linear forward as a matmul ---------------------------------------------------------------
// y (N, D_out) = x (N, D) w^T + b, with x's rows and w's rows contiguous runs of D floats at the
// given addresses (plain, or both in the same blocked order, see below). oneDNN's matmul (brgemm)
// against its inner_product (gemm) on this machine (AVX-512, one thread, median of 200 calls):
// seed CNN fc 64x25088->10 over nChw16c 0.31 against 0.44 ms, 32 rows 0.15 against 0.25 ms (and
// 0.21 against 0.28 ms on two threads, where the inner product barely splits); CNN fc1
// 64x3136->128 0.25 against 0.33 ms; MLP fc1 64x784->50 0.032 against 0.042 ms. The backwards
// stay inner products: matmul was no faster there, and the bias gradient comes with them.
void linear_forward_matmul(void* x, void* w, const Tensor& b, const Tensor& y, std::int64_t d) {
  const std::int64_t n = y.size(0), d_out = y.size(1);
  const memory::desc x_md({n, d}, memory::data_type::f32, memory::dims{d, 1});
  const memory::desc w_md({d, d_out}, memory::data_type::f32, memory::dims{1, d});  // w^T
  const memory::desc b_md({1, d_out}, memory::data_type::f32, memory::dims{d_out, 1});
  const memory::desc y_md = cpu::plain_md(y);
  const std::string key = "linear_fwd_mm:" + std::to_string(n) + "x" + std::to_string(d) + ">" +
                          std::to_string(d_out) + (b.defined() ? "b" : "");
  auto& entry = cpu::cached_primitive(key, [&] {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::desc desc = b.defined() ? dnnl::matmul::desc(x_md, w_md, b_md, y_md)
                                                : dnnl::matmul::desc(x_md, w_md, y_md);
    dnnl::matmul::primitive_desc pd(desc, attr, cpu::dnnl_engine());
    return cpu::CachedPrimitive{dnnl::matmul(pd), pd};
  });
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(x_md, cpu::dnnl_engine(), x)},
                                       {DNNL_ARG_WEIGHTS, memory(w_md, cpu::dnnl_engine(), w)},
                                       {DNNL_ARG_DST, cpu::as_memory(y, y_md)},
                                       {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}};
  if (b.defined()) args.emplace(DNNL_ARG_BIAS, cpu::as_memory(b, b_md));
  entry.primitive.execute(cpu::dnnl_stream(), args);
}

// ---- linear over a conv's blocked output ------------------------------------------------------
// x (N, D) flattened from a conv output (N, C, H, W), D = C*H*W, whose values are in a blocked
// layout twin (nChw16c): the forward (a matmul over both buffers, or an inner product where the
// layout pads channels) reads that twin as its source, with the weight seen as (D_out, C, H, W)
// in the matching layout (kept as the weight's twin, which the backward finds
// until the optimizer writes the weight). The backward-data output is written in x's layout too,
// for the conv below; that layout is remembered per thread (see forward_layout). So the
// activation is never converted to plain, nor its gradient back to blocked;
// only the weight (D_out x D, small against the activations) is.

using tag = memory::format_tag;

// The twin of x when it is a blocked (N, C, H, W) with N = x's rows.
std::optional<cpu::TwinLayouts> blocked_4d(const Tensor& x, std::int64_t rows) {
  auto tw = cpu::twin_layouts(x);
  if (tw && tw->plain.dims().size() == 4 && tw->plain.dims()[0] == rows) return tw;
  return std::nullopt;
}

memory::desc desc4(const memory::dims& like, std::int64_t first, tag t) {
  return memory::desc({first, like[1], like[2], like[3]}, memory::data_type::f32, t);
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// The weight layout for a blocked source: the same channel blocking (nChw16c source, oIhw16i
// weight), so the product is one gemm over the blocked flattening and the weight's reorder a
// simple one; oneDNN's pick (`any`) for other sources. On the seed CNN's fc (25088 -> 10, batch
// 64, one thread) the three inner products and the weight reorders took 3.4-4.7 ms a step against
// 4.2-5.7 ms with oneDNN's pick (BcdA16b10a), in 4 of 5 alternated runs.
tag weight_tag(const memory::desc& src) {
  for (tag t : {tag::aBcd16b, tag::aBcd8b}) {
    if (src == memory::desc(src.dims(), memory::data_type::f32, t)) return t;
  }
  return tag::any;
}

// The forward description, also the hint of both backwards. src: 4-D; weights: 4-D.
dnnl::inner_product_forward::desc blocked_forward_desc(const memory::desc& src,
                                                       const memory::desc& weights,
                                                       const memory::desc& bias,
                                                       const memory::desc& dst) {
  return {dnnl::prop_kind::forward_training, src, weights, bias, dst};
}

// The source layout (N, C, H, W) of the last blocked forward this thread ran with weight w (by
// address and shape) on N rows. Kept per thread rather than on the weight, which replicas on other
// threads may share: which path a backward takes, and so its rounding, must never depend on
// another thread's timing (runs are bit-identical).
std::optional<memory::desc>& forward_layout(const Tensor& w, std::int64_t n) {
  thread_local std::unordered_map<std::string, std::optional<memory::desc>> layouts;
  if (layouts.size() > 4096) layouts.clear();  // weights of models long gone
  const auto address = reinterpret_cast<std::uintptr_t>(w.storage()->data_keeping_twin()) +
                       static_cast<std::uintptr_t>(w.offset()) * sizeof(float);
  return layouts[std::to_string(address) + ":" + cpu::key_of(w.shape()) + std::to_string(n)];
}

// y (N, D_out) = x w^T + b, x read from its blocked twin `tw`.
Tensor linear_blocked(const Tensor& x, const Tensor& w, const Tensor& b,
                      const cpu::TwinLayouts& tw) {
  const std::int64_t n = x.size(0), d_out = w.size(0), d = x.size(1);
  Tensor y = cpu::new_like({n, d_out}, x);
  const memory::dims xd = tw.plain.dims();
  const memory::desc w_plain = desc4(xd, d_out, tag::abcd);
  const std::string key = "linear_fwd_blk:" + cpu::key_of(x.shape()) + cpu::key_of(w.shape()) +
                          cpu::layout_key(tw.blocked) + (b.defined() ? "b" : "");
  // The weight in x's channel blocking; without padding (C a multiple of the block), row i of x's
  // twin and row o of w's twin are the same permutation of the D features, so y is the plain
  // product of the two buffers, which the matmul computes.
  const tag w_tag = weight_tag(tw.blocked);
  const memory::desc w_blocked = desc4(xd, d_out, w_tag);
  const std::size_t row_bytes = static_cast<std::size_t>(d) * sizeof(float);
  if (w_tag != tag::any && tw.blocked.get_size() == static_cast<std::size_t>(n) * row_bytes &&
      w_blocked.get_size() == static_cast<std::size_t>(d_out) * row_bytes) {
    const cpu::Operand xm = cpu::read_as(x, tw.plain, tw.blocked, key + ":x");
    const cpu::Operand wm = cpu::read_as(w, w_plain, w_blocked, key + ":w");
    forward_layout(w, n) = tw.blocked;
    linear_forward_matmul(xm.memory.get_data_handle(), wm.memory.get_data_handle(), b, y, d);
    return y;
  }
  auto& entry = cpu::cached_primitive(key, [&] {
    const memory::desc bias_md = b.defined() ? cpu::plain_md(b) : memory::desc();
    dnnl::inner_product_forward::primitive_desc pd(
        blocked_forward_desc(tw.blocked, desc4(xd, d_out, weight_tag(tw.blocked)), bias_md,
                             cpu::plain_md(y)),
        user_scratchpad(), cpu::dnnl_engine());
    return cpu::CachedPrimitive{dnnl::inner_product_forward(pd), pd};
  });
  const cpu::Operand xm = cpu::read_as(x, tw.plain, entry.pd.src_desc(0), key + ":x");
  const cpu::Operand wm = cpu::read_as(w, w_plain, entry.pd.weights_desc(0), key + ":w");
  forward_layout(w, n) = entry.pd.src_desc(0);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xm.memory},
                                       {DNNL_ARG_WEIGHTS, wm.memory},
                                       {DNNL_ARG_DST, cpu::as_memory(y)},
                                       {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}};
  if (b.defined()) args.emplace(DNNL_ARG_BIAS, cpu::as_memory(b));
  entry.primitive.execute(cpu::dnnl_stream(), args);
  return y;
}

// gx (N, D) = g w, written blocked in `x_layout` (N, C, H, W), the forward's source layout; w is
// read in the matching blocked layout (its twin from the forward, unless written since).
Tensor linear_backward_input_blocked(const Tensor& g, const Tensor& w,
                                     const memory::desc& x_layout) {
  const std::int64_t n = g.size(0), d_out = w.size(0);
  const memory::dims xd = x_layout.dims();
  Tensor gx = cpu::new_like({n, w.size(1)}, g);
  const std::string key = "linear_bwd_data_blk:" + cpu::key_of(gx.shape()) +
                          cpu::key_of(w.shape()) + cpu::layout_key(x_layout);
  auto& entry = cpu::cached_primitive(key, [&] {
    const memory::desc w_ask = desc4(xd, d_out, weight_tag(x_layout));
    dnnl::inner_product_forward::primitive_desc hint(
        blocked_forward_desc(x_layout, w_ask, memory::desc(), cpu::plain_md(g)),
        cpu::dnnl_engine());
    dnnl::inner_product_backward_data::desc d(x_layout, hint.weights_desc(), cpu::plain_md(g));
    dnnl::inner_product_backward_data::primitive_desc pd(d, user_scratchpad(), cpu::dnnl_engine(),
                                                         hint);
    return cpu::CachedPrimitive{dnnl::inner_product_backward_data(pd), pd};
  });
  const cpu::Operand wm = cpu::read_as(w, desc4(xd, d_out, tag::abcd), entry.pd.weights_desc(0),
                                       key + ":w");
  const cpu::Operand gxm =
      cpu::write_as(gx, desc4(xd, n, tag::abcd), entry.pd.diff_src_desc(0), key + ":gx");
  entry.primitive.execute(cpu::dnnl_stream(), {{DNNL_ARG_DIFF_DST, cpu::as_memory(g)},
                                               {DNNL_ARG_WEIGHTS, wm.memory},
                                               {DNNL_ARG_DIFF_SRC, gxm.memory},
                                               {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}});
  cpu::finish_write(gx, gxm);
  return gx;
}

// gw (D_out, D) = g^T x and gb = sum_N g, with x read from its blocked twin `tw`.
void linear_backward_weights_blocked(const Tensor& g, const Tensor& x, const cpu::TwinLayouts& tw,
                                     Tensor* grad_w, Tensor* grad_b) {
  const std::int64_t d_out = g.size(1);
  const memory::dims xd = tw.plain.dims();
  Tensor gw = cpu::new_like({d_out, x.size(1)}, g);
  Tensor gb = grad_b ? cpu::new_like({d_out}, g) : Tensor();
  const std::string key = "linear_bwd_w_blk:" + cpu::key_of(x.shape()) + cpu::key_of(gw.shape()) +
                          cpu::layout_key(tw.blocked) + (grad_b ? "b" : "");
  auto& entry = cpu::cached_primitive(key, [&] {
    const memory::desc bias_md = grad_b ? cpu::plain_md(gb) : memory::desc();
    const memory::desc w_ask = desc4(xd, d_out, weight_tag(tw.blocked));
    dnnl::inner_product_forward::primitive_desc hint(
        blocked_forward_desc(tw.blocked, w_ask, bias_md, cpu::plain_md(g)), cpu::dnnl_engine());
    dnnl::inner_product_backward_weights::desc d(tw.blocked, w_ask, bias_md, cpu::plain_md(g));
    dnnl::inner_product_backward_weights::primitive_desc pd(d, user_scratchpad(),
                                                            cpu::dnnl_engine(), hint);
    return cpu::CachedPrimitive{dnnl::inner_product_backward_weights(pd), pd};
  });
  const cpu::Operand xm = cpu::read_as(x, tw.plain, entry.pd.src_desc(0), key + ":x");
  const cpu::Operand gwm =
      cpu::write_as(gw, desc4(xd, d_out, tag::abcd), entry.pd.diff_weights_desc(0), key + ":gw");
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xm.memory},
                                       {DNNL_ARG_DIFF_DST, cpu::as_memory(g)},
                                       {DNNL_ARG_DIFF_WEIGHTS, gwm.memory},
                                       {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}};
  if (grad_b) args.emplace(DNNL_ARG_DIFF_BIAS, cpu::as_memory(gb));
  entry.primitive.execute(cpu::dnnl_stream(), args);
  cpu::finish_write(gw, gwm);
  if (grad_w) *grad_w = gw;
  if (grad_b) *grad_b = gb;
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in, bool trans_a, bool trans_b) {
  if (cpu::on_gpu({&a_in, &b_in})) return cuda::matmul(a_in, b_in, trans_a, trans_b);
  if (cpu::bf16::applies(a_in)) return cpu::bf16::matmul(a_in, b_in, trans_a, trans_b);
  cpu::check_operands("matmul", {&a_in, &b_in});
  const MatmulSizes z = matmul_sizes(a_in, b_in, trans_a, trans_b);
  const bool batched = z.batched;
  const std::int64_t batch = z.batch, m = z.m, k = z.k, n = z.n;
  Tensor a = cpu::contig(a_in), b = cpu::contig(b_in);
  const Shape& out_shape = z.out;
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
  if (cpu::on_gpu({&x_in, &w_in, &b_in})) return cuda::linear(x_in, w_in, b_in);
  if (cpu::bf16::applies(x_in)) return cpu::bf16::linear(x_in, w_in, b_in);
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
  if (auto tw = blocked_4d(x, n)) return linear_blocked(x, w, b, *tw);
  forward_layout(w, n).reset();  // a plain forward: its backward is plain too
  Tensor y = cpu::new_like({n, d_out}, x);
  linear_forward_matmul(x.raw_data(), w.raw_data(), b, y, x.size(1));
  return y;
}

Tensor linear_backward_input(const Tensor& grad_out_in, const Tensor& w_in) {
  if (cpu::on_gpu({&grad_out_in, &w_in})) return cuda::linear_backward_input(grad_out_in, w_in);
  if (cpu::bf16::applies(grad_out_in)) return cpu::bf16::linear_backward_input(grad_out_in, w_in);
  cpu::check_operands("linear_backward", {&grad_out_in, &w_in});
  Tensor g = cpu::contig(grad_out_in), w = cpu::contig(w_in);
  if (g.dtype() == DType::Float64 || g.numel() == 0) return matmul(g, w);
  if (const auto& layout = forward_layout(w, g.size(0))) {
    return linear_backward_input_blocked(g, w, *layout);
  }
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
  if (cpu::on_gpu({&grad_out_in, &x_in})) {
    return cuda::linear_backward_weights(grad_out_in, x_in, grad_w, grad_b);
  }
  if (cpu::bf16::applies(grad_out_in)) {
    return cpu::bf16::linear_backward_weights(grad_out_in, x_in, grad_w, grad_b);
  }
  cpu::check_operands("linear_backward", {&grad_out_in, &x_in});
  Tensor g = cpu::contig(grad_out_in), x = cpu::contig(x_in);
  const std::int64_t d_out = g.size(1), d_in = x.size(1);
  if (g.dtype() == DType::Float64 || g.size(0) == 0) {
    if (grad_w) *grad_w = matmul(g, x, /*trans_a=*/true, false);
    if (grad_b) *grad_b = sum(g, {0}, false);
    return;
  }
  if (auto tw = blocked_4d(x, x.size(0))) {
    linear_backward_weights_blocked(g, x, *tw, grad_w, grad_b);
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
