// Softmax and log-softmax along any dim on a GPU, with their backwards from the output y
// (the same meaning as cpu/softmax.cpp), float32 and float64, max-subtracted. Not fused with
// anything (cross_entropy.cu calls log_softmax). Shapes: x (A, L, B) with L the softmax dim, A the
// product of the dims before it, B of those after. B == 1 (the last dim): one warp per row of L
// contiguous values; otherwise one thread per (a, b) column, neighbours reading neighbours.
#include <algorithm>
#include <cstdint>

#include "tandem/base/dispatch.h"
#include "tandem/base/shape.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/launch.cuh"
#include "tandem/ops/geometry.h"

namespace tandem::ops::cuda {
namespace {

using Geometry = AlongDim;  // (a, l, b) around the softmax dim (geometry.h)

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

template <typename T>
__device__ T warp_max(T v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = max(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

template <typename T>
__device__ T warp_sum(T v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ inline float exp_of(float v) { return expf(v); }
__device__ inline double exp_of(double v) { return exp(v); }
__device__ inline float log_of(float v) { return logf(v); }
__device__ inline double log_of(double v) { return log(v); }

// ---- forward ----------------------------------------------------------------------------------
// y = exp(x - max) / sum exp(x - max), or (x - max) - log(sum exp(x - max)) when kLog.

// B == 1: rows of l contiguous values, one warp each. The whole warp takes the row loop together
// (row is uniform across the warp), so the shuffles see every lane.
template <typename T, bool kLog>
__global__ void forward_rows(const T* x, T* y, std::int64_t rows, std::int64_t l) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const std::int64_t warps_per_block = blockDim.x / kWarp;
  for (std::int64_t row =
           static_cast<std::int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / kWarp;
       row < rows; row += static_cast<std::int64_t>(gridDim.x) * warps_per_block) {
    const T* px = x + row * l;
    T* py = y + row * l;
    T mx = -INFINITY;
    for (std::int64_t k = lane; k < l; k += kWarp) mx = max(mx, px[k]);
    mx = warp_max(mx);
    T sum = 0;
    for (std::int64_t k = lane; k < l; k += kWarp) sum += exp_of(px[k] - mx);
    sum = warp_sum(sum);
    if constexpr (kLog) {
      const T log_sum = log_of(sum);
      for (std::int64_t k = lane; k < l; k += kWarp) py[k] = (px[k] - mx) - log_sum;
    } else {
      for (std::int64_t k = lane; k < l; k += kWarp) py[k] = exp_of(px[k] - mx) / sum;
    }
  }
}

// B > 1: one thread per (a, b), the l values b apart.
template <typename T, bool kLog>
__global__ void forward_columns(const T* x, T* y, std::int64_t a, std::int64_t l, std::int64_t b) {
  TANDEM_GRID_LOOP(t, a * b) {
    const std::int64_t base = (t / b) * l * b + t % b;
    const T* px = x + base;
    T* py = y + base;
    T mx = -INFINITY;
    for (std::int64_t k = 0; k < l; ++k) mx = max(mx, px[k * b]);
    T sum = 0;
    for (std::int64_t k = 0; k < l; ++k) sum += exp_of(px[k * b] - mx);
    if constexpr (kLog) {
      const T log_sum = log_of(sum);
      for (std::int64_t k = 0; k < l; ++k) py[k * b] = (px[k * b] - mx) - log_sum;
    } else {
      for (std::int64_t k = 0; k < l; ++k) py[k * b] = exp_of(px[k * b] - mx) / sum;
    }
  }
}

// ---- backward from the output y -----------------------------------------------------------------
//   softmax:     dx = y (g - sum(g y))
//   log_softmax: dx = g - exp(y) sum(g)

template <typename T, bool kLog>
__device__ T backward_term(T g, T y) {
  if constexpr (kLog) {
    return g;
  } else {
    return g * y;
  }
}

template <typename T, bool kLog>
__device__ T backward_value(T g, T y, T dot) {
  if constexpr (kLog) {
    return g - exp_of(y) * dot;
  } else {
    return y * (g - dot);
  }
}

template <typename T, bool kLog>
__global__ void backward_rows(const T* go, const T* y, T* gx, std::int64_t rows, std::int64_t l) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const std::int64_t warps_per_block = blockDim.x / kWarp;
  for (std::int64_t row =
           static_cast<std::int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / kWarp;
       row < rows; row += static_cast<std::int64_t>(gridDim.x) * warps_per_block) {
    const std::int64_t base = row * l;
    T dot = 0;
    for (std::int64_t k = lane; k < l; k += kWarp) {
      dot += backward_term<T, kLog>(go[base + k], y[base + k]);
    }
    dot = warp_sum(dot);
    for (std::int64_t k = lane; k < l; k += kWarp) {
      gx[base + k] = backward_value<T, kLog>(go[base + k], y[base + k], dot);
    }
  }
}

template <typename T, bool kLog>
__global__ void backward_columns(const T* go, const T* y, T* gx, std::int64_t a, std::int64_t l,
                                 std::int64_t b) {
  TANDEM_GRID_LOOP(t, a * b) {
    const std::int64_t base = (t / b) * l * b + t % b;
    T dot = 0;
    for (std::int64_t k = 0; k < l; ++k) {
      dot += backward_term<T, kLog>(go[base + k * b], y[base + k * b]);
    }
    for (std::int64_t k = 0; k < l; ++k) {
      const std::int64_t o = base + k * b;
      gx[o] = backward_value<T, kLog>(go[o], y[o], dot);
    }
  }
}

// Blocks for `rows` rows at one warp each (kThreads / 32 warps a block).
unsigned blocks_for_rows(std::int64_t rows) {
  constexpr std::int64_t kWarpsPerBlock = kThreads / kWarp;
  const std::int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, 65535 * 8));
}

template <bool kLog>
Tensor forward(const char* op, const Tensor& x_in, std::int64_t dim) {
  check_gpu_operands(op, {&x_in});
  const Geometry g = along_dim(op, x_in, dim);
  const OnDevice on(x_in);
  const Tensor x = contig(x_in);
  Tensor y = new_like(x.shape(), x);
  if (y.numel() == 0) return y;
  visit_floating(x.dtype(), op, [&]<typename T>() {
    if (g.b == 1) {
      forward_rows<T, kLog>
          <<<blocks_for_rows(g.a), kThreads, 0, on.stream()>>>(ptr<T>(x), ptr<T>(y), g.a, g.l);
      TANDEM_CUDA_LAUNCHED("softmax forward_rows");
    } else {
      forward_columns<T, kLog><<<blocks_for(g.a * g.b), kThreads, 0, on.stream()>>>(
          ptr<T>(x), ptr<T>(y), g.a, g.l, g.b);
      TANDEM_CUDA_LAUNCHED("softmax forward_columns");
    }
  });
  return y;
}

template <bool kLog>
Tensor backward(const char* op, const Tensor& grad_out_in, const Tensor& y_in, std::int64_t dim) {
  check_gpu_operands(op, {&grad_out_in, &y_in});
  TANDEM_CHECK(grad_out_in.shape() == y_in.shape(), op, ": gradient ", show(grad_out_in.shape()),
               " does not match output ", show(y_in.shape()));
  const Geometry g = along_dim(op, y_in, dim);
  const OnDevice on(y_in);
  const Tensor go = contig(grad_out_in), y = contig(y_in);
  Tensor gx = new_like(y.shape(), y);
  if (gx.numel() == 0) return gx;
  visit_floating(y.dtype(), op, [&]<typename T>() {
    if (g.b == 1) {
      backward_rows<T, kLog><<<blocks_for_rows(g.a), kThreads, 0, on.stream()>>>(
          ptr<T>(go), ptr<T>(y), ptr<T>(gx), g.a, g.l);
      TANDEM_CUDA_LAUNCHED("softmax backward_rows");
    } else {
      backward_columns<T, kLog><<<blocks_for(g.a * g.b), kThreads, 0, on.stream()>>>(
          ptr<T>(go), ptr<T>(y), ptr<T>(gx), g.a, g.l, g.b);
      TANDEM_CUDA_LAUNCHED("softmax backward_columns");
    }
  });
  return gx;
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t dim) { return forward<false>("softmax", x, dim); }

Tensor log_softmax(const Tensor& x, std::int64_t dim) {
  return forward<true>("log_softmax", x, dim);
}

Tensor softmax_backward(const Tensor& grad_out, const Tensor& y, std::int64_t dim) {
  return backward<false>("softmax_backward", grad_out, y, dim);
}

Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& y, std::int64_t dim) {
  return backward<true>("log_softmax_backward", grad_out, y, dim);
}

}  // namespace tandem::ops::cuda
