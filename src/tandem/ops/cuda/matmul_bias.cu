// The linear layer's bias on a GPU, beside matmul.cpp's cuBLAS products: the forward's broadcast
// add over rows and the backward's sum over rows (each column summed in row order, in double for
// float32, so the result is the same on every run). Shapes: y, g (N, D); b, out (D).
#include <cstdint>

#include "tandem/base/dispatch.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/launch.cuh"

namespace tandem::ops::cuda {

namespace {

// y[i, j] += b[j] for the n*d elements of y.
template <typename T>
__global__ void add_bias_rows_kernel(T* y, const T* b, std::int64_t total, std::int64_t d) {
  TANDEM_GRID_LOOP(i, total) { y[i] = y[i] + b[i % d]; }
}

// out[j] = sum over rows i of g[i, j]; one thread per column, rows in order (adjacent threads read
// adjacent columns: coalesced).
template <typename T>
__global__ void sum_rows_kernel(const T* g, T* out, std::int64_t n, std::int64_t d) {
  TANDEM_GRID_LOOP(j, d) {
    double acc = 0;
    for (std::int64_t i = 0; i < n; ++i) acc += static_cast<double>(g[i * d + j]);
    out[j] = static_cast<T>(acc);
  }
}

}  // namespace

namespace linear_bias {

void add_bias_rows(const Tensor& y, const Tensor& b) {
  check_gpu_operands("linear", {&y, &b});
  const OnDevice on(y);
  const std::int64_t total = y.numel(), d = b.numel();
  if (total == 0 || d == 0) return;
  visit_floating(y.dtype(), "linear", [&]<typename T>() {
    add_bias_rows_kernel<T>
        <<<blocks_for(total), kThreads, 0, on.stream()>>>(ptr<T>(y), ptr<T>(b), total, d);
    TANDEM_CUDA_LAUNCHED("add_bias_rows_kernel");
  });
}

void sum_rows(const Tensor& g, const Tensor& out) {
  check_gpu_operands("linear_backward", {&g, &out});
  const OnDevice on(g);
  const std::int64_t d = out.numel();
  const std::int64_t n = d == 0 ? 0 : g.numel() / d;
  if (d == 0) return;
  visit_floating(g.dtype(), "linear_backward", [&]<typename T>() {
    sum_rows_kernel<T><<<blocks_for(d), kThreads, 0, on.stream()>>>(ptr<T>(g), ptr<T>(out), n, d);
    TANDEM_CUDA_LAUNCHED("sum_rows_kernel");
  });
}

}  // namespace linear_bias

}  // namespace tandem::ops::cuda
