// Batch normalisation on the CPU, per channel over the batch and spatial positions. float32:
// oneDNN batch_normalization (forward_training, forward_inference with use_global_stats,
// backward), use_scale / use_shift set only for a defined weight / bias. float64: two-pass loops.
// Shapes: x (N, C, *) is seen as (N, C, S), S = product of the trailing dims (1 for (N, C));
// per-channel tensors are (C); M = N * S values per channel.
#include <bit>
#include <cmath>

#include "tandem/ops/cpu/common.h"
#include "tandem/ops/cpu/dnnl_context.h"
#include "tandem/ops/geometry.h"
#include "tandem/ops/ops.h"

namespace tandem::ops {
namespace {

using dnnl::memory;
using dnnl::normalization_flags;

using Geometry = ChannelGeometry;  // n samples x c channels x s values (geometry.h)

Geometry check_input(const char* op, const Tensor& x) { return channel_geometry(op, x); }

// A per-channel value (any stride), or `fallback` for an undefined tensor.
template <typename T>
struct ChannelView {
  T* p = nullptr;
  std::int64_t stride = 0;
  T fallback = T(0);
  ChannelView(const Tensor& t, T fb) : fallback(fb) {
    if (t.defined()) {
      p = t.data<T>();
      stride = t.stride(0);
    }
  }
  T operator[](std::int64_t i) const { return p ? p[i * stride] : fallback; }
  T& at(std::int64_t i) const { return p[i * stride]; }
};

// r = (1 - momentum) r + momentum * stat; the variance enters unbiased.
template <typename T>
void update_running(const Tensor& running_mean, const Tensor& running_var, const double* mean,
                    const double* var, const Geometry& g, double momentum) {
  const double unbias = static_cast<double>(g.m()) / static_cast<double>(g.m() - 1);
  if (running_mean.defined()) {
    ChannelView<T> rm(running_mean, T(0));
    for (std::int64_t c = 0; c < g.c; ++c) {
      rm.at(c) = static_cast<T>((1 - momentum) * static_cast<double>(rm[c]) + momentum * mean[c]);
    }
  }
  if (running_var.defined()) {
    ChannelView<T> rv(running_var, T(0));
    for (std::int64_t c = 0; c < g.c; ++c) {
      rv.at(c) =
          static_cast<T>((1 - momentum) * static_cast<double>(rv[c]) + momentum * var[c] * unbias);
    }
  }
}

// y = (x - mean) * invstd * w + b per channel, all arguments (C) except x, y (N, C, S).
template <typename T>
void ref_normalise(const T* x, T* y, const Geometry& g, const std::vector<double>& mean,
                   const std::vector<double>& invstd, const ChannelView<T>& w,
                   const ChannelView<T>& b) {
  for (std::int64_t n = 0; n < g.n; ++n) {
    for (std::int64_t c = 0; c < g.c; ++c) {
      const double scale = invstd[c] * static_cast<double>(w[c]);
      const double shift = static_cast<double>(b[c]) - mean[c] * scale;
      const std::int64_t base = (n * g.c + c) * g.s;
      for (std::int64_t i = 0; i < g.s; ++i) {
        y[base + i] = static_cast<T>(static_cast<double>(x[base + i]) * scale + shift);
      }
    }
  }
}

// Batch mean and biased variance per channel, two passes in double.
template <typename T>
void ref_stats(const T* x, const Geometry& g, std::vector<double>& mean, std::vector<double>& var) {
  mean.assign(static_cast<std::size_t>(g.c), 0.0);
  var.assign(static_cast<std::size_t>(g.c), 0.0);
  for (std::int64_t n = 0; n < g.n; ++n) {
    for (std::int64_t c = 0; c < g.c; ++c) {
      const T* px = x + (n * g.c + c) * g.s;
      for (std::int64_t i = 0; i < g.s; ++i) mean[c] += static_cast<double>(px[i]);
    }
  }
  for (auto& v : mean) v /= static_cast<double>(g.m());
  for (std::int64_t n = 0; n < g.n; ++n) {
    for (std::int64_t c = 0; c < g.c; ++c) {
      const T* px = x + (n * g.c + c) * g.s;
      for (std::int64_t i = 0; i < g.s; ++i) {
        const double d = static_cast<double>(px[i]) - mean[c];
        var[c] += d * d;
      }
    }
  }
  for (auto& v : var) v /= static_cast<double>(g.m());
}

std::string eps_key(double eps) { return std::to_string(std::bit_cast<std::uint64_t>(eps)); }

normalization_flags affine_flags(bool scale, bool shift) {
  auto f = normalization_flags::none;
  if (scale) f |= normalization_flags::use_scale;
  if (shift) f |= normalization_flags::use_shift;
  return f;
}

std::string flags_key(bool scale, bool shift) {
  return std::string(scale ? "s" : "-") + (shift ? "h" : "-");
}

dnnl::batch_normalization_forward::primitive_desc forward_pd(dnnl::prop_kind prop,
                                                             const memory::desc& md, double eps,
                                                             normalization_flags flags) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::batch_normalization_forward::desc d(prop, md, static_cast<float>(eps), flags);
  return {d, attr, cpu::dnnl_engine()};
}

}  // namespace

Tensor batch_norm_train(const Tensor& x_in, const Tensor& weight, const Tensor& bias,
                        const Tensor& running_mean, const Tensor& running_var, double momentum,
                        double eps, Tensor* save_mean, Tensor* save_invstd) {
  if (cpu::on_gpu({&x_in, &weight, &bias, &running_mean, &running_var})) {
    return cuda::batch_norm_train(x_in, weight, bias, running_mean, running_var, momentum, eps,
                                  save_mean, save_invstd);
  }
  const char* op = "batch_norm";
  cpu::check_operands(op, {&x_in, &weight, &bias, &running_mean, &running_var});
  const Geometry g = check_input(op, x_in);
  check_batch_norm_params(op, x_in, g.c, weight, bias, running_mean, running_var);
  TANDEM_CHECK(g.m() > 1, op, ": expected more than 1 value per channel when training, got input ",
               show(x_in.shape()));
  Tensor x = cpu::contig(x_in);
  Tensor y = cpu::new_like(x.shape(), x);
  std::vector<double> mean, var;  // batch statistics (C), biased variance
  visit_floating(x.dtype(), op, [&]<typename T>() {
    if (std::is_same_v<T, double> || x.numel() == 0) {
      ref_stats(x.data<T>(), g, mean, var);
      std::vector<double> invstd(static_cast<std::size_t>(g.c));
      for (std::int64_t c = 0; c < g.c; ++c) invstd[c] = 1.0 / std::sqrt(var[c] + eps);
      ref_normalise(x.data<T>(), y.data<T>(), g, mean, invstd, ChannelView<T>(weight, T(1)),
                    ChannelView<T>(bias, T(0)));
    } else {
      const bool has_w = weight.defined(), has_b = bias.defined();
      const memory::desc md = cpu::plain_md(g.nchw());
      const std::string key =
          "bn_fwd_train:" + cpu::key_of(g.nchw()) + flags_key(has_w, has_b) + eps_key(eps);
      auto& entry = cpu::cached_primitive(key, [&] {
        auto pd =
            forward_pd(dnnl::prop_kind::forward_training, md, eps, affine_flags(has_w, has_b));
        return cpu::CachedPrimitive{dnnl::batch_normalization_forward(pd), pd};
      });
      Tensor mean_t = cpu::new_like({g.c}, x), var_t = cpu::new_like({g.c}, x);
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, cpu::as_memory(x, md)},
                                           {DNNL_ARG_DST, cpu::as_memory(y, md)},
                                           {DNNL_ARG_MEAN, cpu::as_memory(mean_t)},
                                           {DNNL_ARG_VARIANCE, cpu::as_memory(var_t)},
                                           {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}};
      Tensor w = has_w ? cpu::contig(weight) : Tensor(), b = has_b ? cpu::contig(bias) : Tensor();
      if (has_w) args.emplace(DNNL_ARG_SCALE, cpu::as_memory(w));
      if (has_b) args.emplace(DNNL_ARG_SHIFT, cpu::as_memory(b));
      entry.primitive.execute(cpu::dnnl_stream(), args);
      const float* pm = mean_t.data<float>();
      const float* pv = var_t.data<float>();
      mean.assign(pm, pm + g.c);
      var.assign(pv, pv + g.c);
    }
    update_running<T>(running_mean, running_var, mean.data(), var.data(), g, momentum);
    if (save_mean) {
      *save_mean = cpu::new_like({g.c}, x);
      T* p = save_mean->data<T>();
      for (std::int64_t c = 0; c < g.c; ++c) p[c] = static_cast<T>(mean[c]);
    }
    if (save_invstd) {
      *save_invstd = cpu::new_like({g.c}, x);
      T* p = save_invstd->data<T>();
      for (std::int64_t c = 0; c < g.c; ++c) p[c] = static_cast<T>(1.0 / std::sqrt(var[c] + eps));
    }
  });
  return y;
}

Tensor batch_norm_eval(const Tensor& x_in, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, double eps) {
  if (cpu::on_gpu({&x_in, &weight, &bias, &running_mean, &running_var})) {
    return cuda::batch_norm_eval(x_in, weight, bias, running_mean, running_var, eps);
  }
  const char* op = "batch_norm";
  cpu::check_operands(op, {&x_in, &weight, &bias, &running_mean, &running_var});
  const Geometry g = check_input(op, x_in);
  TANDEM_CHECK(running_mean.defined() && running_var.defined(), op,
               ": evaluation mode needs running_mean and running_var");
  check_batch_norm_params(op, x_in, g.c, weight, bias, running_mean, running_var);
  Tensor x = cpu::contig(x_in);
  Tensor y = cpu::new_like(x.shape(), x);
  if (y.numel() == 0) return y;
  visit_floating(x.dtype(), op, [&]<typename T>() {
    if constexpr (std::is_same_v<T, double>) {
      std::vector<double> mean(static_cast<std::size_t>(g.c)), invstd(mean.size());
      const ChannelView<double> rm(running_mean, 0.0), rv(running_var, 0.0);
      for (std::int64_t c = 0; c < g.c; ++c) {
        mean[c] = rm[c];
        invstd[c] = 1.0 / std::sqrt(rv[c] + eps);
      }
      ref_normalise(x.data<double>(), y.data<double>(), g, mean, invstd,
                    ChannelView<double>(weight, 1.0), ChannelView<double>(bias, 0.0));
    } else {
      const bool has_w = weight.defined(), has_b = bias.defined();
      const memory::desc md = cpu::plain_md(g.nchw());
      const std::string key =
          "bn_fwd_eval:" + cpu::key_of(g.nchw()) + flags_key(has_w, has_b) + eps_key(eps);
      auto& entry = cpu::cached_primitive(key, [&] {
        auto pd = forward_pd(dnnl::prop_kind::forward_inference, md, eps,
                             affine_flags(has_w, has_b) | normalization_flags::use_global_stats);
        return cpu::CachedPrimitive{dnnl::batch_normalization_forward(pd), pd};
      });
      Tensor rm = cpu::contig(running_mean), rv = cpu::contig(running_var);
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, cpu::as_memory(x, md)},
                                           {DNNL_ARG_DST, cpu::as_memory(y, md)},
                                           {DNNL_ARG_MEAN, cpu::as_memory(rm)},
                                           {DNNL_ARG_VARIANCE, cpu::as_memory(rv)},
                                           {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}};
      Tensor w = has_w ? cpu::contig(weight) : Tensor(), b = has_b ? cpu::contig(bias) : Tensor();
      if (has_w) args.emplace(DNNL_ARG_SCALE, cpu::as_memory(w));
      if (has_b) args.emplace(DNNL_ARG_SHIFT, cpu::as_memory(b));
      entry.primitive.execute(cpu::dnnl_stream(), args);
    }
  });
  return y;
}

// With xhat = (x - mean) invstd and sums over the M values of a channel:
//   grad_bias = sum g, grad_weight = sum g xhat,
//   grad_x = w invstd (g - grad_bias / M - xhat grad_weight / M).
// grad_weight is produced only when weight is defined.
Tensor batch_norm_backward(const Tensor& grad_out_in, const Tensor& x_in, const Tensor& weight,
                           const Tensor& save_mean, const Tensor& save_invstd, Tensor* grad_weight,
                           Tensor* grad_bias) {
  if (cpu::on_gpu({&grad_out_in, &x_in, &weight, &save_mean, &save_invstd})) {
    return cuda::batch_norm_backward(grad_out_in, x_in, weight, save_mean, save_invstd, grad_weight,
                                     grad_bias);
  }
  const char* op = "batch_norm_backward";
  cpu::check_operands(op, {&grad_out_in, &x_in, &weight, &save_mean, &save_invstd});
  const Geometry g = check_input(op, x_in);
  check_batch_norm_backward(op, grad_out_in, x_in, g.c, weight, save_mean, save_invstd);
  if (grad_weight && !weight.defined()) *grad_weight = Tensor();
  const bool want_w = grad_weight && weight.defined();
  Tensor x = cpu::contig(x_in), go = cpu::contig(grad_out_in);
  Tensor gx = cpu::new_like(x.shape(), x);
  Tensor gw = want_w ? cpu::new_like({g.c}, x) : Tensor();
  Tensor gb = grad_bias ? cpu::new_like({g.c}, x) : Tensor();
  visit_floating(x.dtype(), op, [&]<typename T>() {
    if (std::is_same_v<T, double> || x.numel() == 0) {
      const T* px = x.data<T>();
      const T* pg = go.data<T>();
      T* pgx = gx.data<T>();
      const ChannelView<T> wv(weight, T(1)), mv(save_mean, T(0)), sv(save_invstd, T(0));
      std::vector<double> w(static_cast<std::size_t>(g.c)), mean(w.size()), invstd(w.size());
      for (std::int64_t c = 0; c < g.c; ++c) {
        w[c] = static_cast<double>(wv[c]);
        mean[c] = static_cast<double>(mv[c]);
        invstd[c] = static_cast<double>(sv[c]);
      }
      std::vector<double> sum_g(static_cast<std::size_t>(g.c), 0.0), sum_gx(sum_g.size(), 0.0);
      for (std::int64_t n = 0; n < g.n; ++n) {
        for (std::int64_t c = 0; c < g.c; ++c) {
          const std::int64_t base = (n * g.c + c) * g.s;
          for (std::int64_t i = 0; i < g.s; ++i) {
            const double gi = static_cast<double>(pg[base + i]);
            sum_g[c] += gi;
            sum_gx[c] += gi * (static_cast<double>(px[base + i]) - mean[c]) * invstd[c];
          }
        }
      }
      const double inv_m = 1.0 / static_cast<double>(g.m());
      for (std::int64_t n = 0; n < g.n; ++n) {
        for (std::int64_t c = 0; c < g.c; ++c) {
          const std::int64_t base = (n * g.c + c) * g.s;
          const double k = w[c] * invstd[c];
          for (std::int64_t i = 0; i < g.s; ++i) {
            const double xhat = (static_cast<double>(px[base + i]) - mean[c]) * invstd[c];
            pgx[base + i] = static_cast<T>(k * (static_cast<double>(pg[base + i]) -
                                                sum_g[c] * inv_m - xhat * sum_gx[c] * inv_m));
          }
        }
      }
      for (std::int64_t c = 0; c < g.c; ++c) {
        if (want_w) gw.data<T>()[c] = static_cast<T>(sum_gx[c]);
        if (grad_bias) gb.data<T>()[c] = static_cast<T>(sum_g[c]);
      }
    } else {
      // oneDNN takes a variance and an epsilon: pass var = 1 / invstd^2 with epsilon 0, so its
      // 1 / sqrt(var + epsilon) is the saved inverse std.
      Tensor var = cpu::new_like({g.c}, x);
      const ChannelView<float> invstd(save_invstd, 0.0f);
      for (std::int64_t c = 0; c < g.c; ++c) {
        const double s = static_cast<double>(invstd[c]);
        var.data<float>()[c] = static_cast<float>(1.0 / (s * s));
      }
      const bool has_w = weight.defined(), want_b = grad_bias != nullptr;
      const memory::desc md = cpu::plain_md(g.nchw());
      const std::string key = "bn_bwd:" + cpu::key_of(g.nchw()) + flags_key(has_w, want_b);
      auto& entry = cpu::cached_primitive(key, [&] {
        const normalization_flags flags = affine_flags(has_w, want_b);
        auto hint = forward_pd(dnnl::prop_kind::forward_training, md, 0.0, flags);
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::batch_normalization_backward::desc d(dnnl::prop_kind::backward, md, md, 0.0f, flags);
        dnnl::batch_normalization_backward::primitive_desc pd(d, attr, cpu::dnnl_engine(), hint);
        return cpu::CachedPrimitive{dnnl::batch_normalization_backward(pd), pd};
      });
      Tensor mean = cpu::contig(save_mean);
      Tensor w = has_w ? cpu::contig(weight) : Tensor();
      // The weight gradient is always computed with a scale; keep it aside when not wanted.
      Tensor gw_all = has_w ? (want_w ? gw : cpu::new_like({g.c}, x)) : Tensor();
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, cpu::as_memory(x, md)},
                                           {DNNL_ARG_DIFF_DST, cpu::as_memory(go, md)},
                                           {DNNL_ARG_MEAN, cpu::as_memory(mean)},
                                           {DNNL_ARG_VARIANCE, cpu::as_memory(var)},
                                           {DNNL_ARG_DIFF_SRC, cpu::as_memory(gx, md)},
                                           {DNNL_ARG_SCRATCHPAD, cpu::scratchpad_for(entry.pd)}};
      if (has_w) {
        args.emplace(DNNL_ARG_SCALE, cpu::as_memory(w));
        args.emplace(DNNL_ARG_DIFF_SCALE, cpu::as_memory(gw_all));
      }
      Tensor shift;  // oneDNN asks for the shift with use_shift; its value does not matter here
      if (want_b) {
        shift = zeros({g.c});
        args.emplace(DNNL_ARG_SHIFT, cpu::as_memory(shift));
        args.emplace(DNNL_ARG_DIFF_SHIFT, cpu::as_memory(gb));
      }
      entry.primitive.execute(cpu::dnnl_stream(), args);
    }
  });
  if (want_w) *grad_weight = gw;
  if (grad_bias) *grad_bias = gb;
  return gx;
}

}  // namespace tandem::ops
