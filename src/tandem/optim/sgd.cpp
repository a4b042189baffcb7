// SGD: option checks and the fused per-parameter update (one pass over p, g and the buffer, no
// temporaries), in the parameter's own precision with torch's order of operations.
#include "tandem/optim/sgd.h"

#include "tandem/ops/cuda/cuda_ops.h"

namespace tandem::optim {
namespace {

void check_options(const SGDOptions& o) {
  TANDEM_CHECK(o.lr >= 0.0, "SGD: invalid learning rate ", o.lr);
  TANDEM_CHECK(o.momentum >= 0.0, "SGD: invalid momentum value ", o.momentum);
  TANDEM_CHECK(o.weight_decay >= 0.0, "SGD: invalid weight_decay value ", o.weight_decay);
  TANDEM_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0),
               "SGD: Nesterov momentum requires a momentum and zero dampening (momentum=",
               o.momentum, ", dampening=", o.dampening, ")");
}

// The update's scalars, in the parameter's precision.
template <typename T>
struct Coefficients {
  T sign, wd, momentum, keep, neg_lr;  // sign: -1 to maximize
};

// One pass over p, g and buf with the options' choices fixed at compile time, so that the loop
// has no branch and vectorizes. With the choices read in the loop it stayed scalar: the seed
// CNN's 255,690 parameters took 0.16 ms on one thread (now 0.09 ms), and each replica's half of
// them 0.38 ms a step on cpu:2 (now 0.13-0.15 ms). The same operations in the same order as
// torch's rule, so the results are bit-identical to the scalar loop's.
template <typename T, bool kDecay, bool kMomentum, bool kNesterov, bool kFirst>
void sgd_kernel(T* __restrict p, const T* __restrict g, T* __restrict buf, std::int64_t n,
                Coefficients<T> c) {
#pragma omp parallel for simd schedule(static) if (n >= (1 << 16))
  for (std::int64_t i = 0; i < n; ++i) {
    T d = c.sign * g[i];
    if constexpr (kDecay) d = d + c.wd * p[i];
    if constexpr (kMomentum) {
      T b;
      if constexpr (kFirst) {
        b = d;
      } else {
        b = buf[i] * c.momentum + c.keep * d;
      }
      buf[i] = b;
      if constexpr (kNesterov) {
        d = d + c.momentum * b;
      } else {
        d = b;
      }
    }
    p[i] = p[i] + c.neg_lr * d;
  }
}

// p (n), g (n), buf (n) or null when momentum == 0; first: buf holds nothing yet.
template <typename T>
void sgd_update(T* p, const T* g, T* buf, bool first, std::int64_t n, const SGDOptions& o) {
  const Coefficients<T> c{static_cast<T>(o.maximize ? -1.0 : 1.0), static_cast<T>(o.weight_decay),
                          static_cast<T>(o.momentum), static_cast<T>(1.0 - o.dampening),
                          static_cast<T>(-o.lr)};
  const bool decay = o.weight_decay != 0.0;
  // The kernel for (decay, momentum, nesterov, first); nesterov and first only with a buffer.
  using Kernel = void (*)(T*, const T*, T*, std::int64_t, Coefficients<T>);
  static constexpr Kernel kKernels[2][5] = {
      {&sgd_kernel<T, false, false, false, false>, &sgd_kernel<T, false, true, false, false>,
       &sgd_kernel<T, false, true, false, true>, &sgd_kernel<T, false, true, true, false>,
       &sgd_kernel<T, false, true, true, true>},
      {&sgd_kernel<T, true, false, false, false>, &sgd_kernel<T, true, true, false, false>,
       &sgd_kernel<T, true, true, false, true>, &sgd_kernel<T, true, true, true, false>,
       &sgd_kernel<T, true, true, true, true>}};
  const int kind = !buf ? 0 : 1 + (o.nesterov ? 2 : 0) + (first ? 1 : 0);
  kKernels[decay ? 1 : 0][kind](p, g, buf, n, c);
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options) {
  add_param_group({std::move(params), options});
}

SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups) {
  for (auto& g : groups) add_param_group(std::move(g));
}

void SGD::add_param_group(ParamGroup<SGDOptions> group) {
  check_options(group.options);
  add_params(std::move(group.params));
  options_.push_back(group.options);
}

SGDOptions& SGD::options(std::size_t group) {
  params(group);  // checks the index
  return options_[group];
}

const SGDOptions& SGD::options(std::size_t group) const {
  params(group);
  return options_[group];
}

std::vector<std::string> SGD::option_names() const {
  return {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize"};
}

double SGD::option(std::size_t group, std::string_view name) const {
  const SGDOptions& o = options(group);
  if (name == "lr") return o.lr;
  if (name == "momentum") return o.momentum;
  if (name == "dampening") return o.dampening;
  if (name == "weight_decay") return o.weight_decay;
  if (name == "nesterov") return o.nesterov ? 1.0 : 0.0;
  if (name == "maximize") return o.maximize ? 1.0 : 0.0;
  unknown_option(name);
}

void SGD::set_option(std::size_t group, std::string_view name, double value) {
  SGDOptions& o = options(group);
  if (name == "lr") {
    o.lr = value;
  } else if (name == "momentum") {
    o.momentum = value;
  } else if (name == "dampening") {
    o.dampening = value;
  } else if (name == "weight_decay") {
    o.weight_decay = value;
  } else if (name == "nesterov") {
    o.nesterov = value != 0.0;
  } else if (name == "maximize") {
    o.maximize = value != 0.0;
  } else {
    unknown_option(name);
  }
}

Optimizer::ElementRange SGD::prepare(std::size_t group, const Tensor& param, const Tensor& grad,
                                     ParamState& state) {
  const SGDOptions o = options_[group];  // a copy: the ranges run with this step's options
  Tensor* buffer = nullptr;
  bool first = false;
  if (o.momentum != 0.0) buffer = &Optimizer::buffer(state, "momentum_buffer", param, &first);
  if (param.device().is_cuda()) {
    const ops::cuda::SgdStep step{.lr = o.lr, .momentum = o.momentum, .dampening = o.dampening,
                                  .weight_decay = o.weight_decay, .nesterov = o.nesterov,
                                  .maximize = o.maximize, .first = first};
    const Tensor buf = buffer ? *buffer : Tensor();
    return [=](std::int64_t b, std::int64_t e) {
      if (auto* batch = ops::cuda::MultiTensorStep::open(); batch && b == 0 && e == param.numel()) {
        batch->add_sgd(param, grad, buf, step);  // launched with the others (run_whole)
        return;
      }
      ops::cuda::sgd_step(flat_range(param, b, e), flat_range(grad, b, e),
                          buf.defined() ? flat_range(buf, b, e) : Tensor(), step);
    };
  }
  void* p = param.raw_data();
  const void* g = grad.raw_data();
  void* buf = buffer ? buffer->raw_data() : nullptr;
  if (param.dtype() == DType::Float32) {
    return [=](std::int64_t b, std::int64_t e) {
      sgd_update(static_cast<float*>(p) + b, static_cast<const float*>(g) + b,
                 buf ? static_cast<float*>(buf) + b : nullptr, first, e - b, o);
    };
  }
  return [=](std::int64_t b, std::int64_t e) {
    sgd_update(static_cast<double*>(p) + b, static_cast<const double*>(g) + b,
               buf ? static_cast<double*>(buf) + b : nullptr, first, e - b, o);
  };
}

}  // namespace tandem::optim
