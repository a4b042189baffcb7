// One SGD or Adam/AdamW step of one parameter on a GPU, in place on the parameter and its buffers,
// with the CPU loops' formulas (optim/sgd.cpp sgd_kernel, optim/adam.cpp adam_kernel) operation
// for operation, in the parameter's precision (float32 or float64). Every multiply, add, divide
// and square root is an explicitly rounded intrinsic, so nvcc fuses nothing into an FMA and the
// results are those of the CPU's separate IEEE operations. Not a multi-tensor (foreach) kernel.
// Shapes: param, grad and every buffer hold the same n elements; param and buffers contiguous.
#include <cmath>
#include <cstdint>

#include "tandem/base/dispatch.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/launch.cuh"

namespace tandem::ops::cuda {
namespace {

// Rounded-to-nearest operations that are never contracted into fused multiply-adds.
__device__ inline float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float add(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float divide(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double divide(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ inline double sqrt_rn(double a) { return __dsqrt_rn(a); }

// ---- SGD --------------------------------------------------------------------------------------

// The update's scalars in the parameter's precision, as sgd.cpp's Coefficients.
template <typename T>
struct SgdCoefficients {
  T sign, wd, momentum, keep, neg_lr;  // sign: -1 to maximize; keep: 1 - dampening
  bool decay, has_momentum, nesterov, first;
};

// Per element (sgd.cpp's sgd_kernel):
//   d = sign g; d = d + wd p (decay); b = first ? d : b momentum + keep d; d = nesterov ?
//   d + momentum b : b (momentum); p = p + (-lr) d
template <typename T>
__global__ void sgd_kernel(T* p, const T* g, T* buf, std::int64_t n, SgdCoefficients<T> c) {
  TANDEM_GRID_LOOP(i, n) {
    T d = mul(c.sign, g[i]);
    if (c.decay) d = add(d, mul(c.wd, p[i]));
    if (c.has_momentum) {
      const T b = c.first ? d : add(mul(buf[i], c.momentum), mul(c.keep, d));
      buf[i] = b;
      d = c.nesterov ? add(d, mul(c.momentum, b)) : b;
    }
    p[i] = add(p[i], mul(c.neg_lr, d));
  }
}

// ---- Adam / AdamW -----------------------------------------------------------------------------

// As adam.cpp's Coefficients (the bias corrections computed in double on the host, then rounded).
template <typename T>
struct AdamCoefficients {
  T sign;  // -1 to maximize
  T beta1, beta2, one_minus_beta1, one_minus_beta2, wd, decay_factor, bc2_sqrt, eps, neg_step_size;
  bool decoupled, l2, amsgrad;
};

// Per element (adam.cpp's adam_kernel):
//   d = sign g; w = p; w = w decay_factor (AdamW); d = d + wd w (Adam's L2)
//   m = m beta1 + (1 - beta1) d; v = v beta2 + ((1 - beta2) d) d; vmax = max(vmax, v) (amsgrad)
//   p = w + ((-step_size) m) / (sqrt(v or vmax) / bc2_sqrt + eps)
template <typename T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, T* vmax, std::int64_t n,
                            AdamCoefficients<T> c) {
  TANDEM_GRID_LOOP(i, n) {
    T d = mul(c.sign, g[i]);
    T w = p[i];
    if (c.decoupled) w = mul(w, c.decay_factor);
    if (c.l2) d = add(d, mul(c.wd, w));
    const T mi = add(mul(m[i], c.beta1), mul(c.one_minus_beta1, d));
    const T vi = add(mul(v[i], c.beta2), mul(mul(c.one_minus_beta2, d), d));
    m[i] = mi;
    v[i] = vi;
    T second = vi;
    if (c.amsgrad) {
      const T old = vmax[i];
      second = old < vi ? vi : old;  // std::max(old, vi), NaN handling included
      vmax[i] = second;
    }
    const T denom = add(divide(sqrt_rn(second), c.bc2_sqrt), c.eps);
    p[i] = add(w, divide(mul(c.neg_step_size, mi), denom));
  }
}

void check_float(const char* op, const Tensor& param) {
  TANDEM_CHECK(param.dtype() == DType::Float32 || param.dtype() == DType::Float64, op,
               ": expected a float32 or float64 parameter, got ", param.dtype());
}

// `t` is written in place: it must hold param's n elements contiguously.
void check_in_place(const char* op, const char* what, const Tensor& t, const Tensor& param) {
  TANDEM_CHECK(t.defined(), op, ": the ", what, " is undefined");
  TANDEM_CHECK(t.shape() == param.shape(), op, ": ", what, " ", show(t.shape()),
               " does not match the parameter ", show(param.shape()));
  TANDEM_CHECK(t.is_contiguous(), op, ": the ", what, " ", show(t.shape()),
               " must be contiguous (it is updated in place)");
}

}  // namespace

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
              const SgdStep& step) {
  const char* op = "sgd_step";
  check_gpu_operands(op, {&param, &grad, &momentum_buffer});
  check_float(op, param);
  check_in_place(op, "parameter", param, param);
  TANDEM_CHECK(grad.shape() == param.shape(), op, ": gradient ", show(grad.shape()),
               " does not match the parameter ", show(param.shape()));
  const bool has_momentum = step.momentum != 0.0;
  if (has_momentum) check_in_place(op, "momentum buffer", momentum_buffer, param);
  const OnDevice on(param);
  const Tensor g = contig(grad);
  const std::int64_t n = param.numel();
  if (n == 0) return;
  visit_floating(param.dtype(), op, [&]<typename T>() {
    const SgdCoefficients<T> c{.sign = static_cast<T>(step.maximize ? -1.0 : 1.0),
                               .wd = static_cast<T>(step.weight_decay),
                               .momentum = static_cast<T>(step.momentum),
                               .keep = static_cast<T>(1.0 - step.dampening),
                               .neg_lr = static_cast<T>(-step.lr),
                               .decay = step.weight_decay != 0.0,
                               .has_momentum = has_momentum,
                               .nesterov = step.nesterov,
                               .first = step.first};
    T* buf = has_momentum ? ptr<T>(momentum_buffer) : nullptr;
    sgd_kernel<T><<<blocks_for(n), kThreads, 0, on.stream()>>>(ptr<T>(param), ptr<T>(g), buf, n, c);
    TANDEM_CUDA_LAUNCHED("sgd_kernel");
  });
}

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamStep& step) {
  const char* op = "adam_step";
  check_gpu_operands(op, {&param, &grad, &exp_avg, &exp_avg_sq, &max_exp_avg_sq});
  check_float(op, param);
  check_in_place(op, "parameter", param, param);
  TANDEM_CHECK(grad.shape() == param.shape(), op, ": gradient ", show(grad.shape()),
               " does not match the parameter ", show(param.shape()));
  check_in_place(op, "exp_avg", exp_avg, param);
  check_in_place(op, "exp_avg_sq", exp_avg_sq, param);
  if (step.amsgrad) check_in_place(op, "max_exp_avg_sq", max_exp_avg_sq, param);
  TANDEM_CHECK(step.step >= 1, op, ": the step number counts from 1, got ", step.step);
  const OnDevice on(param);
  const Tensor g = contig(grad);
  const std::int64_t n = param.numel();
  if (n == 0) return;
  // adam.cpp's Step, in double.
  const double t = static_cast<double>(step.step);
  const double decay_factor = 1.0 - step.lr * step.weight_decay;
  const double step_size = step.lr / (1.0 - std::pow(step.beta1, t));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(step.beta2, t));
  visit_floating(param.dtype(), op, [&]<typename T>() {
    const AdamCoefficients<T> c{.sign = static_cast<T>(step.maximize ? -1.0 : 1.0),
                                .beta1 = static_cast<T>(step.beta1),
                                .beta2 = static_cast<T>(step.beta2),
                                .one_minus_beta1 = static_cast<T>(1.0 - step.beta1),
                                .one_minus_beta2 = static_cast<T>(1.0 - step.beta2),
                                .wd = static_cast<T>(step.weight_decay),
                                .decay_factor = static_cast<T>(decay_factor),
                                .bc2_sqrt = static_cast<T>(bc2_sqrt),
                                .eps = static_cast<T>(step.eps),
                                .neg_step_size = static_cast<T>(-step_size),
                                .decoupled = step.decoupled,
                                .l2 = !step.decoupled && step.weight_decay != 0.0,
                                .amsgrad = step.amsgrad};
    T* vmax = step.amsgrad ? ptr<T>(max_exp_avg_sq) : nullptr;
    adam_kernel<T><<<blocks_for(n), kThreads, 0, on.stream()>>>(
        ptr<T>(param), ptr<T>(g), ptr<T>(exp_avg), ptr<T>(exp_avg_sq), vmax, n, c);
    TANDEM_CUDA_LAUNCHED("adam_kernel");
  });
}

}  // namespace tandem::ops::cuda
