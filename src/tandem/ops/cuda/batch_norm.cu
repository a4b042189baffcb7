// Batch normalisation on a GPU with the CPU kernels' semantics (cpu/batch_norm.cpp): training
// (batch statistics, running stats updated in place with the unbiased variance), evaluation
// (running stats) and backward. Own kernels, not cuDNN, reducing in double and deterministic (no
// atomics: every sum is taken in an order fixed by the shapes alone, the same on every run and
// every GPU):
// - each channel's M values are split into P contiguous parts, P a function of (C, M) only
//   (parts_for); one block per (channel, part) (a 1-D grid of P * C blocks) sums its part into a
//   float64 scratch buffer, and the P partials of a channel are then summed in a fixed order;
// - training takes two passes like the CPU's float64 reference: partial sums of x; then every block
//   sums its channel's partials for the mean and takes partial sums of (x - mean)^2; then one
//   thread per channel finishes the statistics and the per-channel coefficients (double);
// - backward takes one pass of partial sums of g and g xhat, then one thread per channel;
// - an elementwise kernel applies the per-channel coefficients, in double.
// All index math is 32-bit when the tensor has fewer than 2^31 elements, 64-bit otherwise; the
// reductions walk (n, r) incrementally rather than dividing per element.
// Shapes: x (N, C, *) is seen as (N, C, S), S = product of the trailing dims (1 for (N, C));
// per-channel tensors are (C), any stride; M = N * S values per channel.
#include <cuda_runtime.h>

#include <algorithm>
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
  // Whether every element index (and so every offset) fits 32-bit unsigned index math.
  bool small() const { return total() <= 0x7fffffff; }
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

// Threads of the per-part reductions (a multiple of 32, at most 1024).
constexpr unsigned kStatThreads = 256;
// About how many blocks the reductions aim for, the most parts a channel is split into, and the
// fewest values a part has (4 per thread).
constexpr std::int64_t kTargetBlocks = 1024;
constexpr std::int64_t kMaxParts = 256;
constexpr std::int64_t kMinPart = kStatThreads * 4;

// P, the parts each channel's m values are split into, from (c, m) alone (never the device, so
// that the summation order, and the result, is the same on every GPU):
//   P = clamp(ceil(kTargetBlocks / c), 1, min(kMaxParts, ceil(m / kMinPart))).
// c > 0. P * c <= max(c, 2 * kTargetBlocks) blocks.
unsigned parts_for(std::int64_t c, std::int64_t m) {
  const std::int64_t by_c = (kTargetBlocks + c - 1) / c;
  const std::int64_t by_m = (m + kMinPart - 1) / kMinPart;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min({by_c, by_m, kMaxParts})));
}

// How the P * C blocks of a reduction split the work: block b is part b % parts of channel
// b / parts, the values j in [part * chunk, min(m, (part + 1) * chunk)) of that channel.
template <typename I>
struct Split {
  I nc, s, m;
  I chunk;         // ceil(m / parts)
  unsigned parts;  // P
};

template <typename I>
Split<I> split_of(const Geometry& g, unsigned parts) {
  const std::int64_t m = g.m();
  return Split<I>{static_cast<I>(g.c), static_cast<I>(g.s), static_cast<I>(m),
                  static_cast<I>((m + parts - 1) / parts), parts};
}

// The walk of one thread over its block's part: element offsets (n * nc + c) * s + r of the
// channel's values j = start + threadIdx.x, + blockDim.x, ... (j = n * s + r), one division per
// thread, none per element.
template <typename I>
struct Walk {
  I c, j, end, n, r, step_n, step_r;

  __device__ explicit Walk(const Split<I>& sp) {
    c = static_cast<I>(blockIdx.x / sp.parts);
    const I part = static_cast<I>(blockIdx.x % sp.parts);
    const I start = part * sp.chunk;
    end = start < sp.m ? (sp.m - start < sp.chunk ? sp.m : start + sp.chunk) : start;
    j = start + static_cast<I>(threadIdx.x);
    n = j < end ? j / sp.s : I(0);
    r = j < end ? j - n * sp.s : I(0);
    step_n = static_cast<I>(blockDim.x) / sp.s;
    step_r = static_cast<I>(blockDim.x) - step_n * sp.s;
  }
  __device__ bool more() const { return j < end; }
  __device__ I offset(const Split<I>& sp) const { return (n * sp.nc + c) * sp.s + r; }
  __device__ void next(const Split<I>& sp) {
    j += static_cast<I>(blockDim.x);
    r += step_r;
    n += step_n;
    if (r >= sp.s) {
      r -= sp.s;
      ++n;
    }
  }
};

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

// The sum of parts[0 .. count) in a fixed order, by one whole warp; the result in lane 0.
__device__ double warp_sum(const double* parts, unsigned count) {
  const unsigned lane = threadIdx.x & 31u;
  double v = 0.0;
  for (unsigned q = lane; q < count; q += 32) v += parts[q];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

// Training, pass 1: block (c, p) leaves the sum of x over its part in sums[c * P + p].
template <typename T, typename I>
__global__ void train_sum_kernel(const T* __restrict__ x, Split<I> sp, double* __restrict__ sums) {
  __shared__ double scratch[32];
  double acc = 0.0;
  for (Walk<I> w(sp); w.more(); w.next(sp)) acc += static_cast<double>(x[w.offset(sp)]);
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) sums[blockIdx.x] = acc;
}

// Training, pass 2: block (c, p) takes its channel's mean from the P partial sums of pass 1 (the
// same fixed order in every block; part 0 stores it in means[c]) and leaves the sum of
// (x - mean)^2 over its part in sq[c * P + p].
template <typename T, typename I>
__global__ void train_sq_kernel(const T* __restrict__ x, Split<I> sp,
                                const double* __restrict__ sums, double* __restrict__ sq,
                                double* __restrict__ means) {
  __shared__ double scratch[32];
  __shared__ double mean_shared;
  const unsigned c = blockIdx.x / sp.parts;
  if (threadIdx.x < 32) {
    const double total = warp_sum(sums + static_cast<std::size_t>(c) * sp.parts, sp.parts);
    if (threadIdx.x == 0) {
      mean_shared = total / static_cast<double>(sp.m);
      if (blockIdx.x % sp.parts == 0) means[c] = mean_shared;
    }
  }
  __syncthreads();
  const double mean = mean_shared;
  double acc = 0.0;
  for (Walk<I> w(sp); w.more(); w.next(sp)) {
    const double d = static_cast<double>(x[w.offset(sp)]) - mean;
    acc += d * d;
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) sq[blockIdx.x] = acc;
}

// Training, finish: one thread per channel sums the P partials of pass 2 in order for the biased
// variance; writes the saved statistics (if asked), updates the running ones (if defined) and
// leaves the normalising coefficients scale, shift in coef (2C doubles): y = x * scale + shift.
template <typename T>
__global__ void train_finish_kernel(std::int64_t nc, std::int64_t m, unsigned parts,
                                    const double* __restrict__ sq, const double* __restrict__ means,
                                    double eps, double momentum, Channel<T> weight, Channel<T> bias,
                                    Channel<T> running_mean, Channel<T> running_var, T* save_mean,
                                    T* save_invstd, double* coef) {
  TANDEM_GRID_LOOP(c, nc) {
    const double* part = sq + c * parts;
    double total = 0.0;
    for (unsigned q = 0; q < parts; ++q) total += part[q];
    const double mean = means[c];
    const double var = total / static_cast<double>(m);
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

// for (i = global thread index; i < n; i += grid size), in index type I (I unsigned 32-bit only
// for n < 2^31, so that i + grid size cannot wrap).
#define TANDEM_GRID_LOOP_AS(I, i, n)                                                              \
  for (I i =                                                                                      \
           static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x); \
       i < (n); i += static_cast<I>(blockDim.x) * static_cast<I>(gridDim.x))

// y (N, C, S) = x * scale[c] + shift[c], in double.
template <typename T, typename I>
__global__ void normalise_kernel(const T* __restrict__ x, T* __restrict__ y,
                                 const double* __restrict__ coef, I nc, I s, I total) {
  TANDEM_GRID_LOOP_AS(I, i, total) {
    const I c = (i / s) % nc;
    y[i] = static_cast<T>(static_cast<double>(x[i]) * coef[2 * c] + coef[2 * c + 1]);
  }
}

// Backward, with xhat = (x - mean) invstd and sums over the channel's M values:
//   grad_bias = sum g, grad_weight = sum g xhat,
//   grad_x = w invstd (g - grad_bias / M - xhat grad_weight / M).
// Pass 1: block (c, p) leaves the sums of g and of g xhat over its part in sums[c * P + p] and
// sums[C * P + c * P + p].
template <typename T, typename I>
__global__ void backward_sum_kernel(const T* __restrict__ g, const T* __restrict__ x, Split<I> sp,
                                    Channel<T> save_mean, Channel<T> save_invstd,
                                    double* __restrict__ sums) {
  __shared__ double scratch[32];
  const unsigned c = blockIdx.x / sp.parts;
  const double mean = static_cast<double>(save_mean.get(c));
  const double invstd = static_cast<double>(save_invstd.get(c));
  double sum_g = 0.0, sum_gx = 0.0;
  for (Walk<I> w(sp); w.more(); w.next(sp)) {
    const I at = w.offset(sp);
    const double gi = static_cast<double>(g[at]);
    sum_g += gi;
    sum_gx += gi * (static_cast<double>(x[at]) - mean) * invstd;
  }
  sum_g = block_sum(sum_g, scratch);
  sum_gx = block_sum(sum_gx, scratch);
  if (threadIdx.x != 0) return;
  sums[blockIdx.x] = sum_g;
  sums[static_cast<std::size_t>(gridDim.x) + blockIdx.x] = sum_gx;
}

// Backward, finish: one thread per channel sums the P partials of each kind in order; writes
// grad_weight / grad_bias where asked, and leaves (mean, invstd, w invstd, sum g / M,
// sum g xhat / M) in coef (5C doubles) for backward_input_kernel.
template <typename T>
__global__ void backward_finish_kernel(std::int64_t nc, std::int64_t m, unsigned parts,
                                       const double* __restrict__ sums, Channel<T> weight,
                                       Channel<T> save_mean, Channel<T> save_invstd, T* grad_weight,
                                       T* grad_bias, double* coef) {
  TANDEM_GRID_LOOP(c, nc) {
    const double* pg = sums + c * parts;
    const double* pgx = sums + (nc + c) * parts;
    double sum_g = 0.0, sum_gx = 0.0;
    for (unsigned q = 0; q < parts; ++q) {
      sum_g += pg[q];
      sum_gx += pgx[q];
    }
    if (grad_weight) grad_weight[c] = static_cast<T>(sum_gx);
    if (grad_bias) grad_bias[c] = static_cast<T>(sum_g);
    const double invstd = static_cast<double>(save_invstd.get(c));
    const double inv_m = 1.0 / static_cast<double>(m);
    double* k = coef + 5 * c;
    k[0] = static_cast<double>(save_mean.get(c));
    k[1] = invstd;
    k[2] = static_cast<double>(weight.get(c)) * invstd;
    k[3] = sum_g * inv_m;
    k[4] = sum_gx * inv_m;
  }
}

template <typename T, typename I>
__global__ void backward_input_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                      T* __restrict__ gx, const double* __restrict__ coef, I nc,
                                      I s, I total) {
  TANDEM_GRID_LOOP_AS(I, i, total) {
    const double* k = coef + 5 * ((i / s) % nc);
    const double xhat = (static_cast<double>(x[i]) - k[0]) * k[1];
    gx[i] = static_cast<T>(k[2] * (static_cast<double>(g[i]) - k[3] - xhat * k[4]));
  }
}

#undef TANDEM_GRID_LOOP_AS

Tensor coef_buffer(std::int64_t count, const Tensor& like) {
  return empty({count}, {.dtype = DType::Float64, .device = like.device()});
}

// The P * C blocks of a reduction, in one dimension.
unsigned reduction_blocks(const char* op, const Geometry& g, unsigned parts) {
  const std::int64_t blocks = g.c * static_cast<std::int64_t>(parts);
  TANDEM_CHECK(blocks <= 0x7fffffff, op, ": ", g.c, " channels are too many to reduce");
  return static_cast<unsigned>(blocks);
}

template <typename T>
void launch_normalise(const Tensor& x, const Tensor& y, const Tensor& coef, const Geometry& g,
                      cudaStream_t stream) {
  if (g.small()) {
    normalise_kernel<T, unsigned><<<blocks_for(g.total()), kThreads, 0, stream>>>(
        ptr<const T>(x), ptr<T>(y), ptr<const double>(coef), static_cast<unsigned>(g.c),
        static_cast<unsigned>(g.s), static_cast<unsigned>(g.total()));
  } else {
    normalise_kernel<T, std::int64_t><<<blocks_for(g.total()), kThreads, 0, stream>>>(
        ptr<const T>(x), ptr<T>(y), ptr<const double>(coef), g.c, g.s, g.total());
  }
  TANDEM_CUDA_LAUNCHED("normalise_kernel");
}

// Passes 1 and 2 of training in index type I; work holds 2 * P * C + C doubles.
template <typename T, typename I>
void train_passes(const Tensor& x, const Geometry& g, unsigned parts, unsigned blocks, double* work,
                  cudaStream_t stream) {
  const Split<I> sp = split_of<I>(g, parts);
  double* sums = work;
  double* sq = work + blocks;
  double* means = work + 2 * static_cast<std::size_t>(blocks);
  train_sum_kernel<T, I><<<blocks, kStatThreads, 0, stream>>>(ptr<const T>(x), sp, sums);
  TANDEM_CUDA_LAUNCHED("train_sum_kernel");
  train_sq_kernel<T, I><<<blocks, kStatThreads, 0, stream>>>(ptr<const T>(x), sp, sums, sq, means);
  TANDEM_CUDA_LAUNCHED("train_sq_kernel");
}

template <typename T>
void run_train(const Tensor& x, const Tensor& y, const Geometry& g, const Tensor& weight,
               const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
               double momentum, double eps, const Tensor& save_mean, const Tensor& save_invstd,
               cudaStream_t stream) {
  const unsigned parts = parts_for(g.c, g.m());
  const unsigned blocks = reduction_blocks("batch_norm", g, parts);
  const Tensor coef = coef_buffer(2 * g.c, x);
  const Tensor work = coef_buffer(2 * static_cast<std::int64_t>(blocks) + g.c, x);
  double* w = ptr<double>(work);
  if (g.small()) {
    train_passes<T, unsigned>(x, g, parts, blocks, w, stream);
  } else {
    train_passes<T, std::int64_t>(x, g, parts, blocks, w, stream);
  }
  train_finish_kernel<T><<<blocks_for(g.c), kThreads, 0, stream>>>(
      g.c, g.m(), parts, w + blocks, w + 2 * static_cast<std::size_t>(blocks), eps, momentum,
      channel_of<T>(weight, T(1)), channel_of<T>(bias, T(0)), channel_of<T>(running_mean, T(0)),
      channel_of<T>(running_var, T(0)), save_mean.defined() ? ptr<T>(save_mean) : nullptr,
      save_invstd.defined() ? ptr<T>(save_invstd) : nullptr, ptr<double>(coef));
  TANDEM_CUDA_LAUNCHED("train_finish_kernel");
  launch_normalise<T>(x, y, coef, g, stream);
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
  launch_normalise<T>(x, y, coef, g, stream);
}

// Pass 1 of backward in index type I; sums holds 2 * P * C doubles.
template <typename T, typename I>
void backward_sums(const Tensor& go, const Tensor& x, const Geometry& g, unsigned parts,
                   unsigned blocks, const Tensor& save_mean, const Tensor& save_invstd,
                   double* sums, cudaStream_t stream) {
  backward_sum_kernel<T, I><<<blocks, kStatThreads, 0, stream>>>(
      ptr<const T>(go), ptr<const T>(x), split_of<I>(g, parts), channel_of<T>(save_mean, T(0)),
      channel_of<T>(save_invstd, T(0)), sums);
  TANDEM_CUDA_LAUNCHED("backward_sum_kernel");
}

template <typename T, typename I>
void backward_input(const Tensor& go, const Tensor& x, const Tensor& gx, const Tensor& coef,
                    const Geometry& g, cudaStream_t stream) {
  backward_input_kernel<T, I><<<blocks_for(g.total()), kThreads, 0, stream>>>(
      ptr<const T>(go), ptr<const T>(x), ptr<T>(gx), ptr<const double>(coef), static_cast<I>(g.c),
      static_cast<I>(g.s), static_cast<I>(g.total()));
  TANDEM_CUDA_LAUNCHED("backward_input_kernel");
}

template <typename T>
void run_backward(const Tensor& go, const Tensor& x, const Tensor& gx, const Geometry& g,
                  const Tensor& weight, const Tensor& save_mean, const Tensor& save_invstd,
                  const Tensor& gw, const Tensor& gb, cudaStream_t stream) {
  const unsigned parts = parts_for(g.c, g.m());
  const unsigned blocks = reduction_blocks("batch_norm_backward", g, parts);
  const Tensor coef = coef_buffer(5 * g.c, x);
  const Tensor sums = coef_buffer(2 * static_cast<std::int64_t>(blocks), x);
  if (g.small()) {
    backward_sums<T, unsigned>(go, x, g, parts, blocks, save_mean, save_invstd, ptr<double>(sums),
                               stream);
  } else {
    backward_sums<T, std::int64_t>(go, x, g, parts, blocks, save_mean, save_invstd,
                                   ptr<double>(sums), stream);
  }
  backward_finish_kernel<T><<<blocks_for(g.c), kThreads, 0, stream>>>(
      g.c, g.m(), parts, ptr<const double>(sums), channel_of<T>(weight, T(1)),
      channel_of<T>(save_mean, T(0)), channel_of<T>(save_invstd, T(0)),
      gw.defined() ? ptr<T>(gw) : nullptr, gb.defined() ? ptr<T>(gb) : nullptr, ptr<double>(coef));
  TANDEM_CUDA_LAUNCHED("backward_finish_kernel");
  if (g.small()) {
    backward_input<T, unsigned>(go, x, gx, coef, g, stream);
  } else {
    backward_input<T, std::int64_t>(go, x, gx, coef, g, stream);
  }
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
  TANDEM_CHECK(g.c <= 0x7fffffff, op, ": ", g.c, " channels are too many to reduce");
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
  TANDEM_CHECK(g.c <= 0x7fffffff, op, ": ", g.c, " channels are too many to reduce");
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
