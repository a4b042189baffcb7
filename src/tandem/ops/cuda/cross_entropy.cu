// Cross-entropy on a GPU: log_softmax over classes (softmax.cu), the negative log-likelihood with
// PyTorch 1.13's label smoothing, and its backward, as cpu/cross_entropy.cpp (float32, float64).
// The loss is reduced in a fixed order (per-row values, then one block's tree), so it is the same
// on every run. The class indices are checked on the GPU without waiting for it: an index out of
// range is reported at the calling thread's next wait for the GPU (loss.item(), a copy to the
// host), with the CPU's words; until then the kernels read nothing out of bounds (such a row's
// loss is NaN).
// Shapes: logits and log_probs (N, L), target (N) int64 class indices in [0, L), on the same GPU.
#include <math_constants.h>

#include <cstdint>
#include <string>

#include "tandem/base/dispatch.h"
#include "tandem/device/cuda/deferred_checks.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/launch.cuh"

namespace tandem::ops::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kReduceThreads = 256;

// flag = the smallest index i with target[i] outside [0, classes) (flag starts at all ones).
__global__ void find_bad_target(const std::int64_t* target, std::int64_t n, std::int64_t classes,
                                unsigned long long* flag) {
  TANDEM_GRID_LOOP(i, n) {
    const std::int64_t t = target[i];
    if (t < 0 || t >= classes) atomicMin(flag, static_cast<unsigned long long>(i));
  }
}

// Checks the logits / target pair and queues the check of the class indices, whose verdict the
// calling thread gets at its next wait for the GPU (device/cuda/deferred_checks.h): the step goes
// on meanwhile, its kernels safe on any index. Returns the target contiguous. `logits` is the
// logits or the log-probabilities, (N, L).
Tensor checked_target(const char* op, const Tensor& logits, const Tensor& target) {
  TANDEM_CHECK(logits.dim() == 2, op, ": expected logits (N, L), got ", show(logits.shape()));
  TANDEM_CHECK(target.defined(), op, ": the target is undefined");
  TANDEM_CHECK(target.dtype() == DType::Int64, op,
               ": expected an int64 target of class indices, got ", target.dtype());
  check_gpu_operands(op, {&logits, &target}, /*mixed_dtypes=*/true);
  TANDEM_CHECK(target.dim() == 1 && target.size(0) == logits.size(0), op, ": target ",
               show(target.shape()), " does not match logits ", show(logits.shape()),
               " (expected (", logits.size(0), "))");
  const OnDevice on(target);
  Tensor t = contig(target);
  const std::int64_t n = t.numel(), classes = logits.size(1);
  if (n == 0) return t;
  Tensor flag = new_like({1}, t);  // int64, read as unsigned
  auto* pflag = ptr<unsigned long long>(flag);
  TANDEM_CUDA_CHECK(cudaMemsetAsync(pflag, 0xff, sizeof(unsigned long long), on.stream()));
  find_bad_target<<<blocks_for(n), kThreads, 0, on.stream()>>>(ptr<std::int64_t>(t), n, classes,
                                                               pflag);
  TANDEM_CUDA_LAUNCHED("find_bad_target");
  const std::string name = op, logits_shape = to_string(logits.shape());
  ::tandem::cuda::defer_check(
      {.device = on.device(),
       .flag = pflag,
       .keep = flag.storage(),
       .message = [name, logits_shape, classes, t](std::uint64_t first) {
         const auto i = static_cast<std::int64_t>(first);
         std::int64_t value = 0;
         const int device = t.device().index;
         const ::tandem::cuda::DeviceGuard guard(device);
         const cudaStream_t stream = ::tandem::cuda::current_stream(device);
         TANDEM_CUDA_CHECK(cudaMemcpyAsync(&value, ptr<std::int64_t>(t) + i, sizeof(value),
                                           cudaMemcpyDeviceToHost, stream));
         TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
         return name + ": target " + std::to_string(value) + " at index " + std::to_string(i) +
                " is out of range for " + std::to_string(classes) + " classes (logits " +
                logits_shape + ")";
       }});
  return t;
}

void check_smoothing(const char* op, double s) {
  TANDEM_CHECK(s >= 0.0 && s <= 1.0, op, ": label_smoothing must be in [0, 1], got ", s);
}

// Per row i, one warp: rows[2i] = -lp[i, target[i]], rows[2i+1] = -(sum_l lp[i, l]) / L (only
// when `smooth`; else 0), in double.
template <typename T>
__global__ void row_losses(const T* lp, const std::int64_t* target, double* rows, std::int64_t n,
                           std::int64_t classes, bool smooth) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const std::int64_t warps_per_block = blockDim.x / kWarp;
  for (std::int64_t i =
           static_cast<std::int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / kWarp;
       i < n; i += static_cast<std::int64_t>(gridDim.x) * warps_per_block) {
    const T* p = lp + i * classes;
    double row = 0;
    if (smooth) {
      for (std::int64_t l = lane; l < classes; l += kWarp) row += static_cast<double>(p[l]);
      for (int o = kWarp / 2; o > 0; o /= 2) row += __shfl_xor_sync(kFullMask, row, o);
    }
    if (lane == 0) {
      const std::int64_t t = target[i];  // out of range: refused by the deferred check
      rows[2 * i] = t >= 0 && t < classes ? -static_cast<double>(p[t]) : CUDART_NAN;
      rows[2 * i + 1] = smooth ? -row / static_cast<double>(classes) : 0.0;
    }
  }
}

// One block of kReduceThreads: thread j sums rows j, j + kReduceThreads, ... in order, then a
// fixed tree; loss = ((1 - s) nll + s smooth) (/ n if mean).
template <typename T>
__global__ void reduce_loss(const double* rows, std::int64_t n, double s, bool mean, T* loss) {
  __shared__ double nll[kReduceThreads];
  __shared__ double smooth[kReduceThreads];
  double a = 0, b = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += kReduceThreads) {
    a += rows[2 * i];
    b += rows[2 * i + 1];
  }
  nll[threadIdx.x] = a;
  smooth[threadIdx.x] = b;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      nll[threadIdx.x] += nll[threadIdx.x + half];
      smooth[threadIdx.x] += smooth[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    double total = (1 - s) * nll[0] + s * smooth[0];
    if (mean) total /= static_cast<double>(n);  // NaN for an empty batch, as on the CPU
    *loss = static_cast<T>(total);
  }
}

// grad[i, l] = scale * (exp(lp[i, l]) - q), q = on at the target and off elsewhere, scale =
// grad_loss (/ n if mean), all in double.
template <typename T>
__global__ void backward_kernel(const T* grad_loss, const T* lp, const std::int64_t* target,
                                T* grad, std::int64_t n, std::int64_t classes, double on_value,
                                double off_value, bool mean) {
  double scale = static_cast<double>(*grad_loss);
  if (mean) scale /= static_cast<double>(n);
  TANDEM_GRID_LOOP(k, n * classes) {
    const std::int64_t i = k / classes, l = k % classes;
    const double q = l == target[i] ? on_value : off_value;
    grad[k] = static_cast<T>(scale * (exp(static_cast<double>(lp[k])) - q));
  }
}

unsigned blocks_for_rows(std::int64_t rows) {
  constexpr std::int64_t kWarpsPerBlock = kThreads / kWarp;
  const std::int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing, bool mean,
                     Tensor* log_probs) {
  const char* op = "cross_entropy";
  check_gpu_operands(op, {&logits});
  check_smoothing(op, label_smoothing);
  const Tensor t = checked_target(op, logits, target);
  const OnDevice on(logits);
  Tensor lp = cuda::log_softmax(logits, 1);
  const std::int64_t n = lp.size(0), classes = lp.size(1);
  Tensor loss = new_like({}, lp);
  // Per row: its -log p[target] and its smoothing term.
  Tensor rows = empty({2 * n}, {.dtype = DType::Float64, .device = lp.device()});
  visit_floating(lp.dtype(), op, [&]<typename T>() {
    if (n > 0) {
      row_losses<T><<<blocks_for_rows(n), kThreads, 0, on.stream()>>>(
          ptr<T>(lp), ptr<std::int64_t>(t), ptr<double>(rows), n, classes, label_smoothing > 0);
      TANDEM_CUDA_LAUNCHED("cross_entropy row_losses");
    }
    reduce_loss<T><<<1, kReduceThreads, 0, on.stream()>>>(ptr<double>(rows), n, label_smoothing,
                                                          mean, ptr<T>(loss));
    TANDEM_CUDA_LAUNCHED("cross_entropy reduce_loss");
  });
  if (log_probs) *log_probs = lp;
  return loss;
}

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs,
                              const Tensor& target, double label_smoothing, bool mean) {
  const char* op = "cross_entropy_backward";
  check_gpu_operands(op, {&grad_loss, &log_probs});
  check_smoothing(op, label_smoothing);
  TANDEM_CHECK(grad_loss.numel() == 1, op, ": expected a one-element loss gradient, got ",
               show(grad_loss.shape()));
  const Tensor t = checked_target(op, log_probs, target);
  const OnDevice on(log_probs);
  const Tensor lp = contig(log_probs);
  const Tensor gl = contig(grad_loss);
  const std::int64_t n = lp.size(0), classes = lp.size(1);
  const double off = label_smoothing / static_cast<double>(classes);  // smoothed target, off-class
  const double on_value = 1 - label_smoothing + off;                  // and at the target
  Tensor gx = new_like(lp.shape(), lp);
  if (gx.numel() == 0) return gx;
  visit_floating(lp.dtype(), op, [&]<typename T>() {
    backward_kernel<T><<<blocks_for(n * classes), kThreads, 0, on.stream()>>>(
        ptr<T>(gl), ptr<T>(lp), ptr<std::int64_t>(t), ptr<T>(gx), n, classes, on_value, off, mean);
    TANDEM_CUDA_LAUNCHED("cross_entropy_backward");
  });
  return gx;
}

}  // namespace tandem::ops::cuda
