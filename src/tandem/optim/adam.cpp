// Adam and AdamW: option checks and the fused per-parameter update (one pass over p, g and the
// moment buffers, no temporaries), in the parameter's own precision with torch's order of
// operations; the bias corrections are computed in double once per parameter, as torch does.
#include "tandem/optim/adam.h"

#include "tandem/ops/cuda/cuda_ops.h"

#include <algorithm>
#include <cmath>

namespace tandem::optim {
namespace {

void check_options(const char* name, const AdamOptions& o) {
  TANDEM_CHECK(o.lr >= 0.0, name, ": invalid learning rate ", o.lr);
  TANDEM_CHECK(o.eps >= 0.0, name, ": invalid epsilon value ", o.eps);
  TANDEM_CHECK(o.betas[0] >= 0.0 && o.betas[0] < 1.0, name,
               ": invalid beta parameter at index 0: ", o.betas[0]);
  TANDEM_CHECK(o.betas[1] >= 0.0 && o.betas[1] < 1.0, name,
               ": invalid beta parameter at index 1: ", o.betas[1]);
  TANDEM_CHECK(o.weight_decay >= 0.0, name, ": invalid weight_decay value ", o.weight_decay);
}

struct Step {
  double decay_factor;  // AdamW: 1 - lr * weight_decay
  double step_size;     // lr / (1 - beta1^t)
  double bc2_sqrt;      // sqrt(1 - beta2^t)
};

// The update's scalars, in the parameter's precision.
template <typename T>
struct Coefficients {
  T sign;  // -1 to maximize
  T beta1, beta2, one_minus_beta1, one_minus_beta2, wd, decay_factor, bc2_sqrt, eps, neg_step_size;
};

// One pass with the options' choices fixed at compile time, so that the loop has no branch and
// vectorizes (with the choices read in the loop it stayed scalar, as SGD's did: see sgd.cpp).
// The same operations in the same order as the general form: bit-identical results.
template <typename T, bool kDecoupled, bool kL2, bool kAmsgrad>
void adam_kernel(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
                 T* __restrict vmax, std::int64_t n, Coefficients<T> c) {
#pragma omp parallel for simd schedule(static) if (n >= (1 << 16))
  for (std::int64_t i = 0; i < n; ++i) {
    T d = c.sign * g[i];
    T w = p[i];
    if constexpr (kDecoupled) w = w * c.decay_factor;
    if constexpr (kL2) d = d + c.wd * w;
    const T mi = m[i] * c.beta1 + c.one_minus_beta1 * d;
    const T vi = v[i] * c.beta2 + c.one_minus_beta2 * d * d;
    m[i] = mi;
    v[i] = vi;
    T second = vi;
    if constexpr (kAmsgrad) {
      second = std::max(vmax[i], vi);
      vmax[i] = second;
    }
    const T denom = std::sqrt(second) / c.bc2_sqrt + c.eps;
    p[i] = w + c.neg_step_size * mi / denom;  // torch's addcdiv order
  }
}

// p, g, m, v (n); vmax (n) or null without amsgrad.
template <typename T>
void adam_update(T* p, const T* g, T* m, T* v, T* vmax, std::int64_t n, const AdamOptions& o,
                 bool decoupled, const Step& s) {
  const Coefficients<T> c{.sign = static_cast<T>(o.maximize ? -1.0 : 1.0),
                          .beta1 = static_cast<T>(o.betas[0]),
                          .beta2 = static_cast<T>(o.betas[1]),
                          .one_minus_beta1 = static_cast<T>(1.0 - o.betas[0]),
                          .one_minus_beta2 = static_cast<T>(1.0 - o.betas[1]),
                          .wd = static_cast<T>(o.weight_decay),
                          .decay_factor = static_cast<T>(s.decay_factor),
                          .bc2_sqrt = static_cast<T>(s.bc2_sqrt),
                          .eps = static_cast<T>(o.eps),
                          .neg_step_size = static_cast<T>(-s.step_size)};
  const bool l2 = !decoupled && o.weight_decay != 0.0;
  using Kernel = void (*)(T*, const T*, T*, T*, T*, std::int64_t, Coefficients<T>);
  // [decoupled][l2][amsgrad]; decoupled and l2 exclude each other.
  static constexpr Kernel kKernels[2][2][2] = {
      {{&adam_kernel<T, false, false, false>, &adam_kernel<T, false, false, true>},
       {&adam_kernel<T, false, true, false>, &adam_kernel<T, false, true, true>}},
      {{&adam_kernel<T, true, false, false>, &adam_kernel<T, true, false, true>},
       {nullptr, nullptr}}};
  kKernels[decoupled ? 1 : 0][l2 ? 1 : 0][vmax ? 1 : 0](p, g, m, v, vmax, n, c);
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options) {
  add_param_group({std::move(params), options});
}

Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups) {
  for (auto& g : groups) add_param_group(std::move(g));
}

void Adam::add_param_group(ParamGroup<AdamOptions> group) {
  check_options(decoupled_ ? "AdamW" : "Adam", group.options);
  add_params(std::move(group.params));
  options_.push_back(group.options);
}

AdamOptions& Adam::options(std::size_t group) {
  params(group);  // checks the index
  return options_[group];
}

const AdamOptions& Adam::options(std::size_t group) const {
  params(group);
  return options_[group];
}

std::vector<std::string> Adam::option_names() const {
  return {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad", "maximize"};
}

double Adam::option(std::size_t group, std::string_view name) const {
  const AdamOptions& o = options(group);
  if (name == "lr") return o.lr;
  if (name == "beta1") return o.betas[0];
  if (name == "beta2") return o.betas[1];
  if (name == "eps") return o.eps;
  if (name == "weight_decay") return o.weight_decay;
  if (name == "amsgrad") return o.amsgrad ? 1.0 : 0.0;
  if (name == "maximize") return o.maximize ? 1.0 : 0.0;
  unknown_option(name);
}

void Adam::set_option(std::size_t group, std::string_view name, double value) {
  AdamOptions& o = options(group);
  if (name == "lr") {
    o.lr = value;
  } else if (name == "beta1") {
    o.betas[0] = value;
  } else if (name == "beta2") {
    o.betas[1] = value;
  } else if (name == "eps") {
    o.eps = value;
  } else if (name == "weight_decay") {
    o.weight_decay = value;
  } else if (name == "amsgrad") {
    o.amsgrad = value != 0.0;
  } else if (name == "maximize") {
    o.maximize = value != 0.0;
  } else {
    unknown_option(name);
  }
}

Optimizer::ElementRange Adam::prepare(std::size_t group, const Tensor& param, const Tensor& grad,
                                      ParamState& state) {
  const AdamOptions o = options_[group];  // a copy: the ranges run with this step's options
  // Buffers are created (zeros) before their data pointers are taken; those stay valid.
  const Tensor m_t = buffer(state, "exp_avg", param), v_t = buffer(state, "exp_avg_sq", param);
  const Tensor vmax_t = o.amsgrad ? buffer(state, "max_exp_avg_sq", param) : Tensor();
  state.step += 1;
  const double t = static_cast<double>(state.step);
  const Step s{.decay_factor = 1.0 - o.lr * o.weight_decay,
               .step_size = o.lr / (1.0 - std::pow(o.betas[0], t)),
               .bc2_sqrt = std::sqrt(1.0 - std::pow(o.betas[1], t))};
  const bool decoupled = decoupled_;
  if (param.device().is_cuda()) {
    const ops::cuda::AdamStep step{.lr = o.lr, .beta1 = o.betas[0], .beta2 = o.betas[1],
                                   .eps = o.eps, .weight_decay = o.weight_decay,
                                   .decoupled = decoupled, .amsgrad = o.amsgrad,
                                   .maximize = o.maximize, .step = state.step};
    return [=](std::int64_t b, std::int64_t e) {
      if (auto* batch = ops::cuda::MultiTensorStep::open(); batch && b == 0 && e == param.numel()) {
        batch->add_adam(param, grad, m_t, v_t, vmax_t, step);  // launched with the others
        return;
      }
      ops::cuda::adam_step(flat_range(param, b, e), flat_range(grad, b, e), flat_range(m_t, b, e),
                           flat_range(v_t, b, e),
                           vmax_t.defined() ? flat_range(vmax_t, b, e) : Tensor(), step);
    };
  }
  void* p = param.raw_data();
  const void* g = grad.raw_data();
  void* m = m_t.raw_data();
  void* v = v_t.raw_data();
  void* vmax = vmax_t.defined() ? vmax_t.raw_data() : nullptr;
  if (param.dtype() == DType::Float32) {
    return [=](std::int64_t b, std::int64_t e) {
      adam_update(static_cast<float*>(p) + b, static_cast<const float*>(g) + b,
                  static_cast<float*>(m) + b, static_cast<float*>(v) + b,
                  vmax ? static_cast<float*>(vmax) + b : nullptr, e - b, o, decoupled, s);
    };
  }
  return [=](std::int64_t b, std::int64_t e) {
    adam_update(static_cast<double*>(p) + b, static_cast<const double*>(g) + b,
                static_cast<double*>(m) + b, static_cast<double*>(v) + b,
                vmax ? static_cast<double*>(vmax) + b : nullptr, e - b, o, decoupled, s);
  };
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& options) : Adam(true) {
  add_param_group({std::move(params), options});
}

AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups) : Adam(true) {
  for (auto& g : groups) add_param_group(std::move(g));
}

void AdamW::add_param_group(ParamGroup<AdamWOptions> group) {
  Adam::add_param_group({std::move(group.params), group.options.as_adam()});
}

}  // namespace tandem::optim
