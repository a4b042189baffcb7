// Batch normalisation on a GPU with the CPU kernels' semantics (cpu/batch_norm.cpp): training
// (batch statistics, running stats updated in place with the unbiased variance), evaluation
// (running stats) and backward. Own kernels, not cuDNN: one block per channel reduces in double
// (two passes, like the CPU's float64 reference, deterministic), then an elementwise kernel
// applies per-channel coefficients computed in double.
// Shapes: x (N, C, *) is seen as (N, C, S), S = product of the trailing dims (1 for (N, C));
// per-channel tensors are (C), any stride; M = N * S values per channel.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "tandem/base/check.h"
#include "tandem/device/cuda/check.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/launch.cuh"
#include "tandem/ops/geometry.h"

namespace tandem::ops::cuda {
namespace {

// n samples x c channels x s values (geometry.h), float32 or float64.
struct Geometry : ChannelGeometry {
  std::int64_t total() const { return n * c * s; }
};

Geometry check_input(const char* op, const Tensor& x) {
  const ChannelGeometry g = channel_geometry(op, x);
  TANDEM_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64, op,
               ": expected a float32 or float64 tensor, got ", x.dtype());
  return Geometry{g};
}

// A per-channel tensor on the GPU (any stride), or `fallback` for an undefined one.
template <typename T>
struct Channel {
  T* p;
  std::int64_t stride;
  T fallback;
  __device__ T get(std::int64_t c) const { return p ? p[c * stride] : fallback; }
};

template <typename T>
Channel<T> channel_of(const Tensor& t, T fallback) {
  if (!t.defined()) return Channel<T>{nullptr, 0, fallback};
  return Channel<T>{ptr<T>(t), t.stride(0), fallback};
}

// Element j of channel c's M values in x (N, C, S).
__device__ __forceinline__ std::int64_t offset_of(std::int64_t j, std::int64_t c, std::int64_t nc,
                                                  std::int64_t s) {
  const std::int64_t n = j / s;
  return (n * nc + c) * s + (j - n * s);
}

// Threads of the one-block-per-channel reductions (a multiple of 32, at most 1024).
constexpr unsigned kStatThreads = 512;

// The sum of v over the block (blockDim.x a multiple of 32, at most 1024), in thread 0; the same
// order on every run. `scratch` holds 32 doubles of shared memory.
__device__ double block_sum(double v, double* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (blockDim.x >> 5) ? scratch[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  __syncthreads();  // scratch may be reused after this
  return v;
}

// One block per channel: the batch mean and biased variance (two passes in double); writes the
// saved statistics (if asked), updates the running ones (if defined) and leaves the normalising
// coefficients scale, shift in coef (2C doubles): y = x * scale + shift.
template <typename T>
__global__ void train_stats_kernel(const T* __restrict__ x, std::int64_t nc, std::int64_t s,
                                   std::int64_t m, double eps, double momentum, Channel<T> weight,
                                   Channel<T> bias, Channel<T> running_mean, Channel<T> running_var,
                                   T* save_mean, T* save_invstd, double* coef) {
  __shared__ double scratch[32];
  __shared__ double mean_shared;
  const std::int64_t c = blockIdx.x;
  double acc = 0.0;
  for (std::int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    acc += static_cast<double>(x[offset_of(j, c, nc, s)]);
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) mean_shared = acc / static_cast<double>(m);
  __syncthreads();
  const double mean = mean_shared;
  double sq = 0.0;
  for (std::int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const double d = static_cast<double>(x[offset_of(j, c, nc, s)]) - mean;
    sq += d * d;
  }
  sq = block_sum(sq, scratch);
  if (threadIdx.x != 0) return;
  const double var = sq / static_cast<double>(m);
  const double invstd = 1.0 / sqrt(var + eps);
  if (save_mean) save_mean[c] = static_cast<T>(mean);
  if (save_invstd) save_invstd[c] = static_cast<T>(invstd);
  if (running_mean.p) {
    T& r = running_mean.p[c * running_mean.stride];
    r = static_cast<T>((1 - momentum) * static_cast<double>(r) + momentum * mean);
  }
  if (running_var.p) {
    const double unbias = static_cast<double>(m) / static_cast<double>(m - 1);
    T& r = running_var.p[c * running_var.stride];
    r = static_cast<T>((1 - momentum) * static_cast<double>(r) + momentum * var * unbias);
  }
  const double scale = invstd * static_cast<double>(weight.get(c));
  coef[2 * c] = scale;
  coef[2 * c + 1] = static_cast<double>(bias.get(c)) - mean * scale;
}

// One thread per channel: the evaluation coefficients from the running statistics.
template <typename T>
__global__ void eval_coef_kernel(std::int64_t nc, double eps, Channel<T> weight, Channel<T> bias,
                                 Channel<T> running_mean, Channel<T> running_var, double* coef) {
  TANDEM_GRID_LOOP(c, nc) {
    const double invstd = 1.0 / sqrt(static_cast<double>(running_var.get(c)) + eps);
    const double scale = invstd * static_cast<double>(weight.get(c));
    coef[2 * c] = scale;
    coef[2 * c + 1] =
        static_cast<double>(bias.get(c)) - static_cast<double>(running_mean.get(c)) * scale;
  }
}

// y (N, C, S) = x * scale[c] + shift[c], in double.
template <typename T>
__global__ void normalise_kernel(const T* __restrict__ x, T* __restrict__ y,
                                 const double* __restrict__ coef, std::int64_t nc, std::int64_t s,
                                 std::int64_t total) {
  TANDEM_GRID_LOOP(i, total) {
    const std::int64_t c = (i / s) % nc;
    y[i] = static_cast<T>(static_cast<double>(x[i]) * coef[2 * c] + coef[2 * c + 1]);
  }
}

// One block per channel, with xhat = (x - mean) invstd and sums over the channel's M values:
//   grad_bias = sum g, grad_weight = sum g xhat,
//   grad_x = w invstd (g - grad_bias / M - xhat grad_weight / M).
// Writes grad_weight / grad_bias where asked, and leaves (mean, invstd, w invstd, sum g / M,
// sum g xhat / M) in coef (5C doubles) for backward_input_kernel.
template <typename T>
__global__ void backward_stats_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                      std::int64_t nc, std::int64_t s, std::int64_t m,
                                      Channel<T> weight, Channel<T> save_mean,
                                      Channel<T> save_invstd, T* grad_weight, T* grad_bias,
                                      double* coef) {
  __shared__ double scratch[32];
  const std::int64_t c = blockIdx.x;
  const double mean = static_cast<double>(save_mean.get(c));
  const double invstd = static_cast<double>(save_invstd.get(c));
  double sum_g = 0.0, sum_gx = 0.0;
  for (std::int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const std::int64_t at = offset_of(j, c, nc, s);
    const double gi = static_cast<double>(g[at]);
    sum_g += gi;
    sum_gx += gi * (static_cast<double>(x[at]) - mean) * invstd;
  }
  sum_g = block_sum(sum_g, scratch);
  sum_gx = block_sum(sum_gx, scratch);
  if (threadIdx.x != 0) return;
  if (grad_weight) grad_weight[c] = static_cast<T>(sum_gx);
  if (grad_bias) grad_bias[c] = static_cast<T>(sum_g);
  const double inv_m = 1.0 / static_cast<double>(m);
  double* k = coef + 5 * c;
  k[0] = mean;
  k[1] = invstd;
  k[2] = static_cast<double>(weight.get(c)) * invstd;
  k[3] = sum_g * inv_m;
  k[4] = sum_gx * inv_m;
}

template <typename T>
__global__ void backward_input_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                      T* __restrict__ gx, const double* __restrict__ coef,
                                      std::int64_t nc, std::int64_t s, std::int64_t total) {
  TANDEM_GRID_LOOP(i, total) {
    const double* k = coef + 5 * ((i / s) % nc);
    const double xhat = (static_cast<double>(x[i]) - k[0]) * k[1];
    gx[i] = static_cast<T>(k[2] * (static_cast<double>(g[i]) - k[3] - xhat * k[4]));
  }
}

Tensor coef_buffer(std::int64_t count, const Tensor& like) {
  return empty({count}, {.dtype = DType::Float64, .device = like.device()});
}

template <typename T>
void run_train(const Tensor& x, const Tensor& y, const Geometry& g, const Tensor& weight,
               const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
               double momentum, double eps, const Tensor& save_mean, const Tensor& save_invstd,
               cudaStream_t stream) {
  const Tensor coef = coef_buffer(2 * g.c, x);
  train_stats_kernel<T><<<static_cast<unsigned>(g.c), kStatThreads, 0, stream>>>(
      ptr<const T>(x), g.c, g.s, g.m(), eps, momentum, channel_of<T>(weight, T(1)),
      channel_of<T>(bias, T(0)), channel_of<T>(running_mean, T(0)),
      channel_of<T>(running_var, T(0)), save_mean.defined() ? ptr<T>(save_mean) : nullptr,
      save_invstd.defined() ? ptr<T>(save_invstd) : nullptr, ptr<double>(coef));
  TANDEM_CUDA_LAUNCHED("train_stats_kernel");
  normalise_kernel<T><<<blocks_for(g.total()), kThreads, 0, stream>>>(
      ptr<const T>(x), ptr<T>(y), ptr<const double>(coef), g.c, g.s, g.total());
  TANDEM_CUDA_LAUNCHED("normalise_kernel");
}

template <typename T>
void run_eval(const Tensor& x, const Tensor& y, const Geometry& g, const Tensor& weight,
              const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, double eps,
              cudaStream_t stream) {
  const Tensor coef = coef_buffer(2 * g.c, x);
  eval_coef_kernel<T><<<blocks_for(g.c), kThreads, 0, stream>>>(
      g.c, eps, channel_of<T>(weight, T(1)), channel_of<T>(bias, T(0)),
      channel_of<T>(running_mean, T(0)), channel_of<T>(running_var, T(0)), ptr<double>(coef));
  TANDEM_CUDA_LAUNCHED("eval_coef_kernel");
  normalise_kernel<T><<<blocks_for(g.total()), kThreads, 0, stream>>>(
      ptr<const T>(x), ptr<T>(y), ptr<const double>(coef), g.c, g.s, g.total());
  TANDEM_CUDA_LAUNCHED("normalise_kernel");
}

template <typename T>
void run_backward(const Tensor& go, const Tensor& x, const Tensor& gx, const Geometry& g,
                  const Tensor& weight, const Tensor& save_mean, const Tensor& save_invstd,
                  const Tensor& gw, const Tensor& gb, cudaStream_t stream) {
  const Tensor coef = coef_buffer(5 * g.c, x);
  backward_stats_kernel<T><<<static_cast<unsigned>(g.c), kStatThreads, 0, stream>>>(
      ptr<const T>(go), ptr<const T>(x), g.c, g.s, g.m(), channel_of<T>(weight, T(1)),
      channel_of<T>(save_mean, T(0)), channel_of<T>(save_invstd, T(0)),
      gw.defined() ? ptr<T>(gw) : nullptr, gb.defined() ? ptr<T>(gb) : nullptr, ptr<double>(coef));
  TANDEM_CUDA_LAUNCHED("backward_stats_kernel");
  backward_input_kernel<T><<<blocks_for(g.total()), kThreads, 0, stream>>>(
      ptr<const T>(go), ptr<const T>(x), ptr<T>(gx), ptr<const double>(coef), g.c, g.s, g.total());
  TANDEM_CUDA_LAUNCHED("backward_input_kernel");
}

void zero(const Tensor& t, cudaStream_t stream) {
  if (t.defined() && t.numel() > 0) {
    TANDEM_CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0, t.nbytes(), stream));
  }
}

}  // namespace

Tensor batch_norm_train(const Tensor& x_in, const Tensor& weight, const Tensor& bias,
                        const Tensor& running_mean, const Tensor& running_var, double momentum,
                        double eps, Tensor* save_mean, Tensor* save_invstd) {
  const char* op = "batch_norm";
  check_gpu_operands(op, {&x_in, &weight, &bias, &running_mean, &running_var});
  const Geometry g = check_input(op, x_in);
  check_batch_norm_params(op, x_in, g.c, weight, bias, running_mean, running_var);
  TANDEM_CHECK(g.m() > 1, op, ": expected more than 1 value per channel when training, got input ",
               show(x_in.shape()));
  TANDEM_CHECK(g.c <= 0x7fffffff, op, ": ", g.c, " channels are too many for one block each");
  const OnDevice on(x_in);
  Tensor x = contig(x_in);
  Tensor y = new_like(x.shape(), x);
  Tensor sm = save_mean ? new_like({g.c}, x) : Tensor();
  Tensor si = save_invstd ? new_like({g.c}, x) : Tensor();
  if (g.c > 0) {
    if (x.dtype() == DType::Float32) {
      run_train<float>(x, y, g, weight, bias, running_mean, running_var, momentum, eps, sm, si,
                       on.stream());
    } else {
      run_train<double>(x, y, g, weight, bias, running_mean, running_var, momentum, eps, sm, si,
                        on.stream());
    }
  }
  if (save_mean) *save_mean = sm;
  if (save_invstd) *save_invstd = si;
  return y;
}

Tensor batch_norm_eval(const Tensor& x_in, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, double eps) {
  const char* op = "batch_norm";
  check_gpu_operands(op, {&x_in, &weight, &bias, &running_mean, &running_var});
  const Geometry g = check_input(op, x_in);
  TANDEM_CHECK(running_mean.defined() && running_var.defined(), op,
               ": evaluation mode needs running_mean and running_var");
  check_batch_norm_params(op, x_in, g.c, weight, bias, running_mean, running_var);
  const OnDevice on(x_in);
  Tensor x = contig(x_in);
  Tensor y = new_like(x.shape(), x);
  if (y.numel() == 0) return y;
  if (x.dtype() == DType::Float32) {
    run_eval<float>(x, y, g, weight, bias, running_mean, running_var, eps, on.stream());
  } else {
    run_eval<double>(x, y, g, weight, bias, running_mean, running_var, eps, on.stream());
  }
  return y;
}

Tensor batch_norm_backward(const Tensor& grad_out_in, const Tensor& x_in, const Tensor& weight,
                           const Tensor& save_mean, const Tensor& save_invstd, Tensor* grad_weight,
                           Tensor* grad_bias) {
  const char* op = "batch_norm_backward";
  check_gpu_operands(op, {&grad_out_in, &x_in, &weight, &save_mean, &save_invstd});
  const Geometry g = check_input(op, x_in);
  check_batch_norm_backward(op, grad_out_in, x_in, g.c, weight, save_mean, save_invstd);
  TANDEM_CHECK(g.c <= 0x7fffffff, op, ": ", g.c, " channels are too many for one block each");
  if (grad_weight && !weight.defined()) *grad_weight = Tensor();
  const bool want_w = grad_weight && weight.defined();
  const OnDevice on(x_in);
  Tensor x = contig(x_in), go = contig(grad_out_in);
  Tensor gx = new_like(x.shape(), x);
  Tensor gw = want_w ? new_like({g.c}, x) : Tensor();
  Tensor gb = grad_bias ? new_like({g.c}, x) : Tensor();
  if (g.m() == 0) {  // no values: the sums are zero (and grad_x is empty)
    zero(gw, on.stream());
    zero(gb, on.stream());
  } else if (g.c > 0) {
    if (x.dtype() == DType::Float32) {
      run_backward<float>(go, x, gx, g, weight, save_mean, save_invstd, gw, gb, on.stream());
    } else {
      run_backward<double>(go, x, gx, g, weight, save_mean, save_invstd, gw, gb, on.stream());
    }
  }
  if (want_w) *grad_weight = gw;
  if (grad_bias) *grad_bias = gb;
  return gx;
}

}  // namespace tandem::ops::cuda
