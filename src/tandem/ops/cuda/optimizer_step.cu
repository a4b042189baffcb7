// One SGD or Adam/AdamW step of one parameter on a GPU, in place on the parameter and its buffers,
// with the CPU loops' formulas (optim/sgd.cpp sgd_kernel, optim/adam.cpp adam_kernel) operation
// for operation, in the parameter's precision (float32 or float64). Every multiply, add, divide
// and square root is an explicitly rounded intrinsic, so nvcc fuses nothing into an FMA and the
// results are those of the CPU's separate IEEE operations. Each update is a per-element function,
// run by a one-tensor kernel (sgd_step, adam_step) or by a multi-tensor one (MultiTensorStep).
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
__device__ inline void sgd_element(T* p, const T* g, T* buf, std::int64_t i,
                                   const SgdCoefficients<T>& c) {
  T d = mul(c.sign, g[i]);
  if (c.decay) d = add(d, mul(c.wd, p[i]));
  if (c.has_momentum) {
    const T b = c.first ? d : add(mul(buf[i], c.momentum), mul(c.keep, d));
    buf[i] = b;
    d = c.nesterov ? add(d, mul(c.momentum, b)) : b;
  }
  p[i] = add(p[i], mul(c.neg_lr, d));
}

template <typename T>
__global__ void sgd_kernel(T* p, const T* g, T* buf, std::int64_t n, SgdCoefficients<T> c) {
  TANDEM_GRID_LOOP(i, n) { sgd_element(p, g, buf, i, c); }
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
__device__ inline void adam_element(T* p, const T* g, T* m, T* v, T* vmax, std::int64_t i,
                                    const AdamCoefficients<T>& c) {
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

template <typename T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, T* vmax, std::int64_t n,
                            AdamCoefficients<T> c) {
  TANDEM_GRID_LOOP(i, n) { adam_element(p, g, m, v, vmax, i, c); }
}

// ---- multi-tensor launches ----------------------------------------------------------------------

// One launch's tensors (kPtrs pointers each: param, grad, buffers; null for an absent buffer) and
// its blocks: block b runs chunk block_chunk[b] of tensor block_tensor[b]. Passed by value as the
// kernel's parameter (under 4 KiB).
template <typename T, int kPtrs>
struct MultiTensorArgs {
  T* ptrs[kPtrs][MultiTensorStep::kMultiTensors];
  std::int64_t n[MultiTensorStep::kMultiTensors];
  unsigned char block_tensor[MultiTensorStep::kMultiBlocks];
  int block_chunk[MultiTensorStep::kMultiBlocks];
};

// The elements [begin, end) block blockIdx.x runs, and its tensor.
template <typename T, int kPtrs>
__device__ inline int block_range(const MultiTensorArgs<T, kPtrs>& a, std::int64_t* begin,
                                  std::int64_t* end) {
  const int t = a.block_tensor[blockIdx.x];
  *begin = static_cast<std::int64_t>(a.block_chunk[blockIdx.x]) * MultiTensorStep::kMultiChunk;
  const std::int64_t stop = *begin + MultiTensorStep::kMultiChunk;
  *end = stop < a.n[t] ? stop : a.n[t];
  return t;
}

template <typename T>
__global__ void sgd_multi_kernel(MultiTensorArgs<T, 3> a, SgdCoefficients<T> c) {
  std::int64_t begin = 0, end = 0;
  const int t = block_range(a, &begin, &end);
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    sgd_element<T>(a.ptrs[0][t], a.ptrs[1][t], a.ptrs[2][t], i, c);
  }
}

template <typename T>
__global__ void adam_multi_kernel(MultiTensorArgs<T, 5> a, AdamCoefficients<T> c) {
  std::int64_t begin = 0, end = 0;
  const int t = block_range(a, &begin, &end);
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    adam_element<T>(a.ptrs[0][t], a.ptrs[1][t], a.ptrs[2][t], a.ptrs[3][t], a.ptrs[4][t], i, c);
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

// sgd_step's checks; returns the gradient contiguous.
Tensor checked_sgd_operands(const char* op, const Tensor& param, const Tensor& grad,
                            const Tensor& momentum_buffer, const SgdStep& step) {
  check_gpu_operands(op, {&param, &grad, &momentum_buffer});
  check_float(op, param);
  check_in_place(op, "parameter", param, param);
  TANDEM_CHECK(grad.shape() == param.shape(), op, ": gradient ", show(grad.shape()),
               " does not match the parameter ", show(param.shape()));
  if (step.momentum != 0.0) check_in_place(op, "momentum buffer", momentum_buffer, param);
  return contig(grad);
}

// adam_step's checks; returns the gradient contiguous.
Tensor checked_adam_operands(const char* op, const Tensor& param, const Tensor& grad,
                             const Tensor& exp_avg, const Tensor& exp_avg_sq,
                             const Tensor& max_exp_avg_sq, const AdamStep& step) {
  check_gpu_operands(op, {&param, &grad, &exp_avg, &exp_avg_sq, &max_exp_avg_sq});
  check_float(op, param);
  check_in_place(op, "parameter", param, param);
  TANDEM_CHECK(grad.shape() == param.shape(), op, ": gradient ", show(grad.shape()),
               " does not match the parameter ", show(param.shape()));
  check_in_place(op, "exp_avg", exp_avg, param);
  check_in_place(op, "exp_avg_sq", exp_avg_sq, param);
  if (step.amsgrad) check_in_place(op, "max_exp_avg_sq", max_exp_avg_sq, param);
  TANDEM_CHECK(step.step >= 1, op, ": the step number counts from 1, got ", step.step);
  return contig(grad);
}

template <typename T>
SgdCoefficients<T> sgd_coefficients(const SgdStep& step) {
  return {.sign = static_cast<T>(step.maximize ? -1.0 : 1.0),
          .wd = static_cast<T>(step.weight_decay),
          .momentum = static_cast<T>(step.momentum),
          .keep = static_cast<T>(1.0 - step.dampening),
          .neg_lr = static_cast<T>(-step.lr),
          .decay = step.weight_decay != 0.0,
          .has_momentum = step.momentum != 0.0,
          .nesterov = step.nesterov,
          .first = step.first};
}

// adam.cpp's Step, in double, then rounded to the parameter's precision.
template <typename T>
AdamCoefficients<T> adam_coefficients(const AdamStep& step) {
  const double t = static_cast<double>(step.step);
  const double decay_factor = 1.0 - step.lr * step.weight_decay;
  const double step_size = step.lr / (1.0 - std::pow(step.beta1, t));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(step.beta2, t));
  return {.sign = static_cast<T>(step.maximize ? -1.0 : 1.0),
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
}

bool same_step(const SgdStep& a, const SgdStep& b) {
  return a.lr == b.lr && a.momentum == b.momentum && a.dampening == b.dampening &&
         a.weight_decay == b.weight_decay && a.nesterov == b.nesterov &&
         a.maximize == b.maximize && a.first == b.first;
}

bool same_step(const AdamStep& a, const AdamStep& b) {
  return a.lr == b.lr && a.beta1 == b.beta1 && a.beta2 == b.beta2 && a.eps == b.eps &&
         a.weight_decay == b.weight_decay && a.decoupled == b.decoupled &&
         a.amsgrad == b.amsgrad && a.maximize == b.maximize && a.step == b.step;
}

thread_local MultiTensorStep* open_batch = nullptr;

}  // namespace

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
              const SgdStep& step) {
  const char* op = "sgd_step";
  const Tensor g = checked_sgd_operands(op, param, grad, momentum_buffer, step);
  const OnDevice on(param);
  const std::int64_t n = param.numel();
  if (n == 0) return;
  visit_floating(param.dtype(), op, [&]<typename T>() {
    T* buf = step.momentum != 0.0 ? ptr<T>(momentum_buffer) : nullptr;
    sgd_kernel<T><<<blocks_for(n), kThreads, 0, on.stream()>>>(ptr<T>(param), ptr<T>(g), buf, n,
                                                                sgd_coefficients<T>(step));
    TANDEM_CUDA_LAUNCHED("sgd_kernel");
  });
}

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamStep& step) {
  const char* op = "adam_step";
  const Tensor g =
      checked_adam_operands(op, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step);
  const OnDevice on(param);
  const std::int64_t n = param.numel();
  if (n == 0) return;
  visit_floating(param.dtype(), op, [&]<typename T>() {
    T* vmax = step.amsgrad ? ptr<T>(max_exp_avg_sq) : nullptr;
    adam_kernel<T><<<blocks_for(n), kThreads, 0, on.stream()>>>(
        ptr<T>(param), ptr<T>(g), ptr<T>(exp_avg), ptr<T>(exp_avg_sq), vmax, n,
        adam_coefficients<T>(step));
    TANDEM_CUDA_LAUNCHED("adam_kernel");
  });
}

// ---- MultiTensorStep ----------------------------------------------------------------------------

struct MultiTensorStep::Entry {
  bool adam = false;
  Tensor tensors[5];  // param, grad (contiguous), then the buffers; undefined where absent
  SgdStep sgd;
  AdamStep adam_step;
};

MultiTensorStep::MultiTensorStep() : previous_(open_batch) { open_batch = this; }

MultiTensorStep::~MultiTensorStep() { open_batch = previous_; }

MultiTensorStep* MultiTensorStep::open() { return open_batch; }

void MultiTensorStep::add_sgd(const Tensor& param, const Tensor& grad,
                              const Tensor& momentum_buffer, const SgdStep& step) {
  const Tensor g = checked_sgd_operands("sgd_step", param, grad, momentum_buffer, step);
  Entry e;
  e.sgd = step;
  e.tensors[0] = param;
  e.tensors[1] = g;
  if (step.momentum != 0.0) e.tensors[2] = momentum_buffer;
  entries_.push_back(std::move(e));
}

void MultiTensorStep::add_adam(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq,
                               const AdamStep& step) {
  const Tensor g =
      checked_adam_operands("adam_step", param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step);
  Entry e;
  e.adam = true;
  e.adam_step = step;
  e.tensors[0] = param;
  e.tensors[1] = g;
  e.tensors[2] = exp_avg;
  e.tensors[3] = exp_avg_sq;
  if (step.amsgrad) e.tensors[4] = max_exp_avg_sq;
  entries_.push_back(std::move(e));
}

namespace {

// Fills MultiTensorArgs with the entries' chunks and calls launch(args, blocks) whenever it is full
// (kMultiTensors tensors or kMultiBlocks blocks) and at the end; a tensor whose chunks do not fit
// goes on in the next launch. Returns the launches.
template <typename T, int kPtrs, typename Entries, typename Launch>
int launch_in_chunks(const Entries& entries, Launch launch) {
  constexpr std::int64_t kChunk = MultiTensorStep::kMultiChunk;
  MultiTensorArgs<T, kPtrs> a{};
  int tensors = 0, blocks = 0, launches = 0;
  const auto go = [&] {
    launch(a, blocks);
    ++launches;
    a = {};
    tensors = blocks = 0;
  };
  for (const auto* e : entries) {
    const std::int64_t n = e->tensors[0].numel();
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    int slot = -1;
    for (std::int64_t ch = 0; ch < chunks; ++ch) {
      if (slot < 0) {
        if (tensors == MultiTensorStep::kMultiTensors) go();
        slot = tensors++;
        for (int k = 0; k < kPtrs; ++k) {
          a.ptrs[k][slot] = e->tensors[k].defined() ? ptr<T>(e->tensors[k]) : nullptr;
        }
        a.n[slot] = n;
      }
      a.block_tensor[blocks] = static_cast<unsigned char>(slot);
      a.block_chunk[blocks] = static_cast<int>(ch);
      if (++blocks == MultiTensorStep::kMultiBlocks) {
        go();
        slot = -1;
      }
    }
  }
  if (blocks > 0) go();
  return launches;
}

}  // namespace

void MultiTensorStep::flush() {
  std::size_t i = 0;
  while (i < entries_.size()) {
    // A run of updates that one kernel can take: same kind, GPU, dtype and step constants.
    const Entry& first = entries_[i];
    std::vector<const Entry*> run{&first};
    std::size_t j = i + 1;
    for (; j < entries_.size(); ++j) {
      const Entry& e = entries_[j];
      const bool same = e.adam == first.adam &&
                        e.tensors[0].device() == first.tensors[0].device() &&
                        e.tensors[0].dtype() == first.tensors[0].dtype() &&
                        (first.adam ? same_step(e.adam_step, first.adam_step)
                                    : same_step(e.sgd, first.sgd));
      if (!same) break;
      run.push_back(&e);
    }
    const OnDevice on(first.tensors[0]);
    visit_floating(first.tensors[0].dtype(), "MultiTensorStep", [&]<typename T>() {
      if (first.adam) {
        const AdamCoefficients<T> c = adam_coefficients<T>(first.adam_step);
        launches_ += launch_in_chunks<T, 5>(run, [&](const MultiTensorArgs<T, 5>& a, int blocks) {
          adam_multi_kernel<T><<<blocks, kThreads, 0, on.stream()>>>(a, c);
          TANDEM_CUDA_LAUNCHED("adam_multi_kernel");
        });
      } else {
        const SgdCoefficients<T> c = sgd_coefficients<T>(first.sgd);
        launches_ += launch_in_chunks<T, 3>(run, [&](const MultiTensorArgs<T, 3>& a, int blocks) {
          sgd_multi_kernel<T><<<blocks, kThreads, 0, on.stream()>>>(a, c);
          TANDEM_CUDA_LAUNCHED("sgd_multi_kernel");
        });
      }
    });
    i = j;
  }
  entries_.clear();
}

}  // namespace tandem::ops::cuda
