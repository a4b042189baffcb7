// 2-D convolution on the CPU, forward and both backwards (stride, padding, dilation, groups, bias).
// float32: oneDNN convolution primitives, cached per shape, in the layouts oneDNN prefers; inputs and
// outputs in those layouts stay attached to the tensors as layout twins (layout_twin.h), so a
// conv's output feeds the next conv, and a grad_output both backwards, without converting to plain
// NCHW and back. Weights are reordered on every call (the optimizer changes them). float64: plain
// reference loops.
// x (N, C, H, W), w (K, C/G, R, S), b (K), y (N, K, P, Q); G groups.
#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tandem/ops/cpu/bfloat16_products.h"
#include "tandem/ops/cpu/common.h"
#include "tandem/ops/cpu/dnnl_context.h"
#include "tandem/ops/cpu/layout_twin.h"
#include "tandem/ops/ops.h"

namespace tandem::ops {
namespace {

using dnnl::memory;

struct ConvDims {
  std::int64_t n, c, h, w;  // input
  std::int64_t k, r, s;     // weight (K, C/G, R, S)
  std::int64_t p, q;        // output height and width
  std::int64_t g;           // groups
};

// Prints a (height, width) pair as "(3, 3)" in error messages.
struct PairPrinter {
  const std::array<std::int64_t, 2>& pair;
};
std::ostream& operator<<(std::ostream& out, PairPrinter p) {
  return out << "(" << p.pair[0] << ", " << p.pair[1] << ")";
}
PairPrinter show_pair(const std::array<std::int64_t, 2>& pair) { return {pair}; }

// Checks the shapes and parameters of a convolution and derives every size from them.
ConvDims conv_dims(const char* op, const Shape& x, const Shape& w, const Conv2dParams& p) {
  TANDEM_CHECK(x.size() == 4 && w.size() == 4, op, ": expected input (N, C, H, W) and weight "
               "(K, C/groups, R, S), got input ", show(x), " and weight ", show(w));
  TANDEM_CHECK(p.stride[0] >= 1 && p.stride[1] >= 1, op, ": stride ", show_pair(p.stride),
               " must be positive");
  TANDEM_CHECK(p.dilation[0] >= 1 && p.dilation[1] >= 1, op, ": dilation ",
               show_pair(p.dilation), " must be positive");
  TANDEM_CHECK(p.padding[0] >= 0 && p.padding[1] >= 0, op, ": padding ", show_pair(p.padding),
               " must not be negative");
  TANDEM_CHECK(p.groups >= 1, op, ": groups must be positive, got ", p.groups);
  TANDEM_CHECK(w[0] > 0 && w[1] > 0 && w[2] > 0 && w[3] > 0, op, ": weight ", show(w),
               " has an empty dimension");
  TANDEM_CHECK(w[0] % p.groups == 0, op, ": weight ", show(w), " has ", w[0],
               " output channels, not divisible by groups ", p.groups);
  const std::string per_group =
      p.groups == 1 ? std::string()
                    : detail::concat(" (", w[1], " per group, ", p.groups, " groups)");
  TANDEM_CHECK(x[1] == w[1] * p.groups, op, ": input ", show(x), " has ", x[1],
               " channels, weight ", show(w), " expects ", w[1] * p.groups, per_group);
  const std::int64_t span_h = p.dilation[0] * (w[2] - 1) + 1;
  const std::int64_t span_w = p.dilation[1] * (w[3] - 1) + 1;
  TANDEM_CHECK(x[2] + 2 * p.padding[0] >= span_h && x[3] + 2 * p.padding[1] >= span_w, op,
               ": input ", show(x), " with padding ", show_pair(p.padding),
               " is smaller than the kernel (", w[2], ", ", w[3], ") with dilation ",
               show_pair(p.dilation));
  return ConvDims{.n = x[0], .c = x[1], .h = x[2], .w = x[3],
                  .k = w[0], .r = w[2], .s = w[3],
                  .p = (x[2] + 2 * p.padding[0] - span_h) / p.stride[0] + 1,
                  .q = (x[3] + 2 * p.padding[1] - span_w) / p.stride[1] + 1,
                  .g = p.groups};
}

void check_float(const char* op, DType dtype) {
  TANDEM_CHECK(dtype == DType::Float32 || dtype == DType::Float64, op,
               ": expected float32 or float64 tensors, got ", dtype);
}

void check_grad_out(const char* op, const Tensor& grad_out, const Shape& x, const Shape& w,
                    const Conv2dParams& p) {
  const Shape y = conv2d_output_shape(x, w, p);
  TANDEM_CHECK(grad_out.shape() == y, op, ": grad_out ", show(grad_out.shape()),
               " does not match the output ", show(y), " of input ", show(x), " and weight ",
               show(w));
}

// ---- float64 reference ----------------------------------------------------------------------

// Calls tap(xi, wi, yi) with the flat indices of every product x[xi] * w[wi] that contributes to
// y[yi]; forward and both backwards are this one loop nest with a different accumulation.
template <typename Tap>
void for_each_tap(const ConvDims& d, const Conv2dParams& p, Tap tap) {
  const std::int64_t cg = d.c / d.g, kg = d.k / d.g;  // channels per group, in and out
  for (std::int64_t n = 0; n < d.n; ++n) {
    for (std::int64_t k = 0; k < d.k; ++k) {
      const std::int64_t c0 = (k / kg) * cg;  // first input channel of k's group
      for (std::int64_t oh = 0; oh < d.p; ++oh) {
        for (std::int64_t ow = 0; ow < d.q; ++ow) {
          const std::int64_t yi = ((n * d.k + k) * d.p + oh) * d.q + ow;
          for (std::int64_t c = 0; c < cg; ++c) {
            for (std::int64_t r = 0; r < d.r; ++r) {
              const std::int64_t ih = oh * p.stride[0] - p.padding[0] + r * p.dilation[0];
              if (ih < 0 || ih >= d.h) continue;
              for (std::int64_t s = 0; s < d.s; ++s) {
                const std::int64_t iw = ow * p.stride[1] - p.padding[1] + s * p.dilation[1];
                if (iw < 0 || iw >= d.w) continue;
                tap(((n * d.c + c0 + c) * d.h + ih) * d.w + iw, ((k * cg + c) * d.r + r) * d.s + s,
                    yi);
              }
            }
          }
        }
      }
    }
  }
}

void ref_forward(const ConvDims& d, const Conv2dParams& p, const double* x, const double* w,
                 const double* b, double* y) {
  const std::int64_t plane = d.p * d.q;
  for (std::int64_t i = 0; i < d.n * d.k; ++i) {
    for (std::int64_t j = 0; j < plane; ++j) y[i * plane + j] = b ? b[i % d.k] : 0.0;
  }
  for_each_tap(d, p, [&](std::int64_t xi, std::int64_t wi, std::int64_t yi) {
    y[yi] += x[xi] * w[wi];
  });
}

// ---- float32 on oneDNN -------------------------------------------------------------------------

// The layouts the primitives are created with: format_tag::any lets oneDNN pick blocked layouts
// (nChw16c and friends) for its direct jit kernels, and the operands are reordered from and to
// plain NCHW around each call; `false` asks for plain nchw (oneDNN then runs gemm-based kernels).
// Measured on one AVX-512 core, batch 64, 3x3 pad 1 on 28x28, reorders included:
//   16->32: forward 2.8 ms vs 5.2 ms, backward data 2.8 vs 6.9, backward weights 2.7 vs 8.9;
//   1->16:  forward 0.19 vs 0.37, backward weights 0.19 vs 1.1 (backward data 1.3 vs 0.4, but a
//   first layer's input needs no gradient). Hence `any`.
constexpr bool kLetOneDnnPickLayouts = true;

// Descriptors of one convolution: the plain ones describing tandem's tensors, and the ones the
// primitive is asked for (`any` or the same plain ones).
struct ConvMds {
  memory::desc x, w, y, b;           // plain; b is empty without a bias
  memory::desc x_ask, w_ask, y_ask;  // what the primitive descriptor is created with
  memory::dims strides, dilates, pad_l, pad_r;
};

ConvMds conv_mds(const ConvDims& d, const Conv2dParams& p, bool with_bias) {
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  const memory::dims xd{d.n, d.c, d.h, d.w}, yd{d.n, d.k, d.p, d.q};
  // Grouped weights are 5-D (G, K/G, C/G, R, S), which is (K, C/G, R, S) in memory.
  const memory::dims wd = d.g == 1 ? memory::dims{d.k, d.c, d.r, d.s}
                                   : memory::dims{d.g, d.k / d.g, d.c / d.g, d.r, d.s};
  const tag w_plain = d.g == 1 ? tag::oihw : tag::goihw;
  ConvMds m;
  m.x = memory::desc(xd, f32, tag::nchw);
  m.w = memory::desc(wd, f32, w_plain);
  m.y = memory::desc(yd, f32, tag::nchw);
  if (with_bias) m.b = memory::desc({d.k}, f32, tag::a);
  m.x_ask = kLetOneDnnPickLayouts ? memory::desc(xd, f32, tag::any) : m.x;
  m.w_ask = kLetOneDnnPickLayouts ? memory::desc(wd, f32, tag::any) : m.w;
  m.y_ask = kLetOneDnnPickLayouts ? memory::desc(yd, f32, tag::any) : m.y;
  m.strides = {p.stride[0], p.stride[1]};
  m.dilates = {p.dilation[0] - 1, p.dilation[1] - 1};  // oneDNN counts the gaps
  m.pad_l = {p.padding[0], p.padding[1]};
  m.pad_r = m.pad_l;
  return m;
}

std::string conv_key(const char* kind, const Shape& x, const Shape& w, const Conv2dParams& p,
                     bool with_bias) {
  return detail::concat(kind, ":", cpu::key_of(x), "/", cpu::key_of(w), "/s", show_pair(p.stride),
                        "p", show_pair(p.padding), "d", show_pair(p.dilation), "g", p.groups,
                        with_bias ? "b" : "");
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// The forward primitive descriptor, also the hint the backward primitives are created from.
dnnl::convolution_forward::primitive_desc forward_pd(const ConvMds& m,
                                                     const dnnl::primitive_attr& attr) {
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training,
                                    dnnl::algorithm::convolution_direct, m.x_ask, m.w_ask, m.b,
                                    m.y_ask, m.strides, m.dilates, m.pad_l, m.pad_r);
  return dnnl::convolution_forward::primitive_desc(d, attr, cpu::dnnl_engine());
}

// Per-thread buffers holding a weight or weight gradient in a primitive's own layout during one
// call (activations and gradients of activations go through layout twins instead). 64-byte
// aligned.
enum class Stage : std::uint8_t { A, B };

void* stage_buffer(Stage stage, std::size_t bytes) {
  thread_local std::array<std::vector<char>, 2> buffers;
  auto& buffer = buffers[static_cast<std::size_t>(stage)];
  if (buffer.size() < bytes + 64) buffer.resize(bytes + 64);
  const auto address = reinterpret_cast<std::uintptr_t>(buffer.data());
  return buffer.data() + (64 - address % 64) % 64;
}

dnnl::primitive& reorder_primitive(const std::string& key, const memory::desc& from,
                                   const memory::desc& to) {
  return cpu::cached_primitive(key, [&] {
    dnnl::reorder::primitive_desc pd(cpu::dnnl_engine(), from, cpu::dnnl_engine(), to);
    return cpu::CachedPrimitive{dnnl::reorder(pd), pd};
  }).primitive;
}

// Tensor `t` (plain layout `plain`) as memory in layout `want`: t's own data when the two agree,
// else a copy reordered into a stage buffer (the reorder cached under `key`).
memory input_as(const Tensor& t, const memory::desc& plain, const memory::desc& want, Stage stage,
                const std::string& key) {
  memory user = cpu::as_memory(t, plain);
  if (want == plain) return user;
  memory staged(want, cpu::dnnl_engine(), stage_buffer(stage, want.get_size()));
  reorder_primitive(key, plain, want)
      .execute(cpu::dnnl_stream(), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, staged}});
  return staged;
}

// Memory for a primitive to write output `t` through: t's own data when the layouts agree, else
// a stage buffer that finish_output() reorders into t.
memory output_as(const Tensor& t, const memory::desc& plain, const memory::desc& want,
                 Stage stage) {
  if (want == plain) return cpu::as_memory(t, plain);
  return memory(want, cpu::dnnl_engine(), stage_buffer(stage, want.get_size()));
}

void finish_output(const memory& written, const Tensor& t, const memory::desc& plain,
                   const std::string& key) {
  if (written.get_data_handle() == t.raw_data()) return;
  memory user = cpu::as_memory(t, plain);
  reorder_primitive(key, written.get_desc(), plain)
      .execute(cpu::dnnl_stream(), {{DNNL_ARG_FROM, written}, {DNNL_ARG_TO, user}});
}

}  // namespace

Shape conv2d_output_shape(const Shape& x, const Shape& w, const Conv2dParams& p) {
  const ConvDims d = conv_dims("conv2d", x, w, p);
  return {d.n, d.k, d.p, d.q};
}

Tensor conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, const Conv2dParams& p) {
  if (cpu::on_gpu({&x_in, &w_in, &b_in})) return cuda::conv2d(x_in, w_in, b_in, p);
  if (cpu::bf16::applies(x_in)) return cpu::bf16::conv2d(x_in, w_in, b_in, p);
  cpu::check_operands("conv2d", {&x_in, &w_in, &b_in});
  const ConvDims d = conv_dims("conv2d", x_in.shape(), w_in.shape(), p);
  check_float("conv2d", x_in.dtype());
  if (b_in.defined()) {
    TANDEM_CHECK(b_in.dim() == 1 && b_in.size(0) == d.k, "conv2d: bias ", show(b_in.shape()),
                 " does not match weight ", show(w_in.shape()), " (", d.k, " output channels)");
  }
  Tensor x = cpu::contig(x_in), w = cpu::contig(w_in);
  Tensor b = b_in.defined() ? cpu::contig(b_in) : Tensor();
  Tensor y = cpu::new_like({d.n, d.k, d.p, d.q}, x);
  if (y.numel() == 0) return y;
  if (x.dtype() == DType::Float64) {
    ref_forward(d, p, x.data<double>(), w.data<double>(), b.defined() ? b.data<double>() : nullptr,
                y.data<double>());
    return y;
  }
  const std::string key = conv_key("conv2d_fwd", x.shape(), w.shape(), p, b.defined());
  const ConvMds m = conv_mds(d, p, b.defined());
  auto& entry = cpu::cached_primitive(key, [&] {
    auto pd = forward_pd(m, user_scratchpad());
    return cpu::CachedPrimitive{dnnl::convolution_forward(pd), pd};
  });
  const cpu::Operand xm = cpu::read_as(x, m.x, entry.pd.src_desc(0), key + ":x");
  memory wm = input_as(w, m.w, entry.pd.weights_desc(0), Stage::A, key + ":w");
  const cpu::Operand ym = cpu::write_as(y, m.y, entry.pd.dst_desc(0), key + ":y");
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xm.memory},
                                       {DNNL_ARG_WEIGHTS, wm},
                                       {DNNL_ARG_DST, ym.memory},
                                       {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}};
  if (b.defined()) args.emplace(DNNL_ARG_BIAS, cpu::as_memory(b, m.b));
  entry.primitive.execute(cpu::dnnl_stream(), args);
  cpu::finish_write(y, ym);
  return y;
}

Tensor conv2d_backward_input(const Tensor& grad_out_in, const Tensor& w_in, const Shape& x_shape,
                             const Conv2dParams& p) {
  if (cpu::on_gpu({&grad_out_in, &w_in})) {
    return cuda::conv2d_backward_input(grad_out_in, w_in, x_shape, p);
  }
  if (cpu::bf16::applies(grad_out_in)) {
    return cpu::bf16::conv2d_backward_input(grad_out_in, w_in, x_shape, p);
  }
  const char* op = "conv2d_backward_input";
  cpu::check_operands(op, {&grad_out_in, &w_in});
  const ConvDims d = conv_dims(op, x_shape, w_in.shape(), p);
  check_float(op, w_in.dtype());
  check_grad_out(op, grad_out_in, x_shape, w_in.shape(), p);
  Tensor g = cpu::contig(grad_out_in), w = cpu::contig(w_in);
  Tensor gx = cpu::new_like(x_shape, g);
  if (gx.numel() == 0) return gx;
  if (g.dtype() == DType::Float64) {
    // gx[x] += gy[y] * w[w] over every tap.
    fill_(gx, 0.0);
    const double* pg = g.data<double>();
    const double* pw = w.data<double>();
    double* pgx = gx.data<double>();
    for_each_tap(d, p, [&](std::int64_t xi, std::int64_t wi, std::int64_t yi) {
      pgx[xi] += pg[yi] * pw[wi];
    });
    return gx;
  }
  const std::string key = conv_key("conv2d_bwd_data", x_shape, w.shape(), p, false);
  const ConvMds m = conv_mds(d, p, false);
  auto& entry = cpu::cached_primitive(key, [&] {
    const auto hint = forward_pd(m, dnnl::primitive_attr());
    dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, m.x_ask,
                                               m.w_ask, m.y_ask, m.strides, m.dilates, m.pad_l,
                                               m.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(desc, user_scratchpad(),
                                                       cpu::dnnl_engine(), hint);
    return cpu::CachedPrimitive{dnnl::convolution_backward_data(pd), pd};
  });
  // grad_out's twin stays for conv2d_backward_weights, which runs next on the same grad_out.
  const cpu::Operand gm = cpu::read_as(g, m.y, entry.pd.diff_dst_desc(0), key + ":gy");
  memory wm = input_as(w, m.w, entry.pd.weights_desc(0), Stage::A, key + ":w");
  const cpu::Operand gxm = cpu::write_as(gx, m.x, entry.pd.diff_src_desc(0), key + ":gx");
  entry.primitive.execute(cpu::dnnl_stream(),
                          {{DNNL_ARG_DIFF_DST, gm.memory},
                           {DNNL_ARG_WEIGHTS, wm},
                           {DNNL_ARG_DIFF_SRC, gxm.memory},
                           {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}});
  cpu::finish_write(gx, gxm);
  return gx;
}

void conv2d_backward_weights(const Tensor& grad_out_in, const Tensor& x_in, const Shape& w_shape,
                             const Conv2dParams& p, Tensor* grad_w, Tensor* grad_b) {
  if (cpu::on_gpu({&grad_out_in, &x_in})) {
    return cuda::conv2d_backward_weights(grad_out_in, x_in, w_shape, p, grad_w, grad_b);
  }
  if (cpu::bf16::applies(grad_out_in)) {
    return cpu::bf16::conv2d_backward_weights(grad_out_in, x_in, w_shape, p, grad_w, grad_b);
  }
  const char* op = "conv2d_backward_weights";
  cpu::check_operands(op, {&grad_out_in, &x_in});
  const ConvDims d = conv_dims(op, x_in.shape(), w_shape, p);
  check_float(op, x_in.dtype());
  check_grad_out(op, grad_out_in, x_in.shape(), w_shape, p);
  if (!grad_w && !grad_b) return;
  Tensor g = cpu::contig(grad_out_in), x = cpu::contig(x_in);
  if (!grad_w) {  // only the bias: gb[k] = sum over N, P, Q of gy
    *grad_b = sum(g, {0, 2, 3}, false);
    return;
  }
  Tensor gw = cpu::new_like(w_shape, g);
  Tensor gb = grad_b ? cpu::new_like({d.k}, g) : Tensor();
  if (g.dtype() == DType::Float64 || g.numel() == 0) {
    // gw[w] += gy[y] * x[x] over every tap.
    fill_(gw, 0.0);
    if (g.numel() > 0) {
      const double* pg = g.data<double>();
      const double* px = x.data<double>();
      double* pgw = gw.data<double>();
      for_each_tap(d, p, [&](std::int64_t xi, std::int64_t wi, std::int64_t yi) {
        pgw[wi] += pg[yi] * px[xi];
      });
    }
    if (grad_b) gb = sum(g, {0, 2, 3}, false);
  } else {
    const std::string key = conv_key("conv2d_bwd_weights", x.shape(), w_shape, p, grad_b != nullptr);
    const ConvMds m = conv_mds(d, p, grad_b != nullptr);
    auto& entry = cpu::cached_primitive(key, [&] {
      const auto hint = forward_pd(m, dnnl::primitive_attr());
      dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, m.x_ask,
                                                    m.w_ask, m.b, m.y_ask, m.strides, m.dilates,
                                                    m.pad_l, m.pad_r);
      dnnl::convolution_backward_weights::primitive_desc pd(desc, user_scratchpad(),
                                                            cpu::dnnl_engine(), hint);
      return cpu::CachedPrimitive{dnnl::convolution_backward_weights(pd), pd};
    });
    const cpu::Operand xm = cpu::read_as(x, m.x, entry.pd.src_desc(0), key + ":x");
    const cpu::Operand gm = cpu::read_as(g, m.y, entry.pd.diff_dst_desc(0), key + ":gy");
    memory gwm = output_as(gw, m.w, entry.pd.diff_weights_desc(0), Stage::B);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xm.memory},
                                         {DNNL_ARG_DIFF_DST, gm.memory},
                                         {DNNL_ARG_DIFF_WEIGHTS, gwm},
                                         {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}};
    if (grad_b) args.emplace(DNNL_ARG_DIFF_BIAS, cpu::as_memory(gb, m.b));
    entry.primitive.execute(cpu::dnnl_stream(), args);
    finish_output(gwm, gw, m.w, key + ":gw");
  }
  *grad_w = gw;
  if (grad_b) *grad_b = gb;
}

}  // namespace tandem::ops
