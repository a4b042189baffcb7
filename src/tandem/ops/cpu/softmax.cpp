// Softmax and log-softmax along any dim on the CPU, with their backwards from the output y.
// float32: oneDNN softmax_v2 (softmax_accurate / softmax_log) on the tensor seen as a plain
// (A, L, B) array with the axis in the middle; oneDNN's log_softmax is accurate to about 5e-6
// absolute (its vector log), its softmax to about 2e-7. float64: max-subtracted reference loops.
// Shapes: x (A, L, B) with L the softmax dim, A the product of the dims before it, B after.
#include <algorithm>
#include <cmath>

#include "tandem/ops/cpu/common.h"
#include "tandem/ops/cpu/dnnl_context.h"
#include "tandem/ops/geometry.h"
#include "tandem/ops/ops.h"

namespace tandem::ops {
namespace {

using dnnl::memory;

using Geometry = AlongDim;  // (a, l, b) around the softmax dim (geometry.h)

bool is_log(dnnl::algorithm algo) { return algo == dnnl::algorithm::softmax_log; }

// Reference forward: y = x - max - log(sum exp(x - max)) (log) or exp(x - max) / sum.
template <typename T>
void ref_forward(const T* x, T* y, const Geometry& g, bool log) {
  for (std::int64_t i = 0; i < g.a; ++i) {
    for (std::int64_t j = 0; j < g.b; ++j) {
      const T* px = x + i * g.l * g.b + j;
      T* py = y + i * g.l * g.b + j;
      double mx = -INFINITY;
      for (std::int64_t k = 0; k < g.l; ++k) mx = std::max(mx, static_cast<double>(px[k * g.b]));
      double sum = 0;
      for (std::int64_t k = 0; k < g.l; ++k) sum += std::exp(static_cast<double>(px[k * g.b]) - mx);
      const double log_sum = std::log(sum);
      for (std::int64_t k = 0; k < g.l; ++k) {
        const double z = static_cast<double>(px[k * g.b]) - mx;
        py[k * g.b] = static_cast<T>(log ? z - log_sum : std::exp(z) / sum);
      }
    }
  }
}

// Reference backward from the output y:
//   softmax:     dx = y (g - sum(g y))
//   log_softmax: dx = g - exp(y) sum(g)
template <typename T>
void ref_backward(const T* go, const T* y, T* gx, const Geometry& g, bool log) {
  for (std::int64_t i = 0; i < g.a; ++i) {
    for (std::int64_t j = 0; j < g.b; ++j) {
      const std::int64_t base = i * g.l * g.b + j;
      double dot = 0;
      for (std::int64_t k = 0; k < g.l; ++k) {
        const std::int64_t o = base + k * g.b;
        dot += static_cast<double>(go[o]) * (log ? 1.0 : static_cast<double>(y[o]));
      }
      for (std::int64_t k = 0; k < g.l; ++k) {
        const std::int64_t o = base + k * g.b;
        const double yo = static_cast<double>(y[o]), gi = static_cast<double>(go[o]);
        gx[o] = static_cast<T>(log ? gi - std::exp(yo) * dot : yo * (gi - dot));
      }
    }
  }
}

dnnl::softmax_v2_forward::primitive_desc forward_pd(dnnl::algorithm algo, const memory::desc& md) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::softmax_v2_forward::desc d(dnnl::prop_kind::forward_training, algo, md, md, 1);
  return {d, attr, cpu::dnnl_engine()};
}

Tensor forward(const char* op, dnnl::algorithm algo, const Tensor& x_in, std::int64_t dim) {
  cpu::check_operands(op, {&x_in});
  const Geometry g = along_dim(op, x_in, dim);
  Tensor x = cpu::contig(x_in);
  Tensor y = cpu::new_like(x.shape(), x);
  if (y.numel() == 0) return y;
  visit_floating(x.dtype(), op, [&]<typename T>() {
    if constexpr (std::is_same_v<T, double>) {
      ref_forward(x.data<double>(), y.data<double>(), g, is_log(algo));
    } else {
      const memory::desc md = cpu::plain_md(g.shape());
      const std::string key = std::string(op) + ":" + cpu::key_of(g.shape());
      auto& entry = cpu::cached_primitive(key, [&] {
        auto pd = forward_pd(algo, md);
        return cpu::CachedPrimitive{dnnl::softmax_v2_forward(pd), pd};
      });
      entry.primitive.execute(cpu::dnnl_stream(),
                              {{DNNL_ARG_SRC, cpu::as_memory(x, md)},
                               {DNNL_ARG_DST, cpu::as_memory(y, md)},
                               {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}});
    }
  });
  return y;
}

Tensor backward(const char* op, dnnl::algorithm algo, const Tensor& grad_out_in, const Tensor& y_in,
                std::int64_t dim) {
  cpu::check_operands(op, {&grad_out_in, &y_in});
  TANDEM_CHECK(grad_out_in.shape() == y_in.shape(), op, ": gradient ", show(grad_out_in.shape()),
               " does not match output ", show(y_in.shape()));
  const Geometry g = along_dim(op, y_in, dim);
  Tensor go = cpu::contig(grad_out_in), y = cpu::contig(y_in);
  Tensor gx = cpu::new_like(y.shape(), y);
  if (gx.numel() == 0) return gx;
  visit_floating(y.dtype(), op, [&]<typename T>() {
    if constexpr (std::is_same_v<T, double>) {
      ref_backward(go.data<double>(), y.data<double>(), gx.data<double>(), g, is_log(algo));
    } else {
      const memory::desc md = cpu::plain_md(g.shape());
      const std::string key = std::string(op) + ":" + cpu::key_of(g.shape());
      auto& entry = cpu::cached_primitive(key, [&] {
        auto hint = forward_pd(algo, md);
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::softmax_v2_backward::desc d(algo, md, md, md, 1);
        dnnl::softmax_v2_backward::primitive_desc pd(d, attr, cpu::dnnl_engine(), hint);
        return cpu::CachedPrimitive{dnnl::softmax_v2_backward(pd), pd};
      });
      entry.primitive.execute(cpu::dnnl_stream(),
                              {{DNNL_ARG_DST, cpu::as_memory(y, md)},
                               {DNNL_ARG_DIFF_DST, cpu::as_memory(go, md)},
                               {DNNL_ARG_DIFF_SRC, cpu::as_memory(gx, md)},
                               {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}});
    }
  });
  return gx;
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t dim) {
  if (cpu::on_gpu({&x})) return cuda::softmax(x, dim);
  return forward("softmax", dnnl::algorithm::softmax_accurate, x, dim);
}

Tensor log_softmax(const Tensor& x, std::int64_t dim) {
  if (cpu::on_gpu({&x})) return cuda::log_softmax(x, dim);
  return forward("log_softmax", dnnl::algorithm::softmax_log, x, dim);
}

Tensor softmax_backward(const Tensor& grad_out, const Tensor& y, std::int64_t dim) {
  if (cpu::on_gpu({&grad_out, &y})) return cuda::softmax_backward(grad_out, y, dim);
  return backward("softmax_backward", dnnl::algorithm::softmax_accurate, grad_out, y, dim);
}

Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& y, std::int64_t dim) {
  if (cpu::on_gpu({&grad_out, &y})) return cuda::log_softmax_backward(grad_out, y, dim);
  return backward("log_softmax_backward", dnnl::algorithm::softmax_log, grad_out, y, dim);
}

}  // namespace tandem::ops
