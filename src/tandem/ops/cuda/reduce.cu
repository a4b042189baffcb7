// Reductions on the GPU: sum over any set of dims (one block per output element, threads
// striding over the reduced elements, accumulated in double and combined in a fixed tree order,
// so a result never depends on the run) and argmax along one dim (one thread per row; the first
// largest wins, NaN wins, as on the CPU).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/dtype.cuh"
#include "tandem/ops/cuda/launch.cuh"
#include "tandem/ops/cuda/strided.cuh"
#include "tandem/ops/geometry.h"

namespace tandem::ops::cuda {
namespace {

constexpr int kReduceThreads = 256;

// out[o] = sum over r of x[base(o) + inner(r)]: `kept` walks the kept dims (x's strides), `reduced`
// the reduced ones.
template <typename T>
__global__ void sum_kernel(const T* x, T* out, std::int64_t outputs, std::int64_t per_output,
                           StridedWalk<1> kept, StridedWalk<1> reduced) {
  __shared__ double partial[kReduceThreads];
  for (std::int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    std::int64_t base[1] = {0};
    if (kept.ndim > 0) kept.offsets(o, base);
    double acc = 0.0;
    for (std::int64_t r = threadIdx.x; r < per_output; r += blockDim.x) {
      std::int64_t off[1] = {0};
      if (reduced.ndim > 0) reduced.offsets(r, off);
      acc += static_cast<double>(x[base[0] + off[0]]);
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int width = kReduceThreads / 2; width > 0; width /= 2) {
      if (static_cast<int>(threadIdx.x) < width)
        partial[threadIdx.x] += partial[threadIdx.x + width];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[o] = static_cast<T>(partial[0]);
    __syncthreads();  // partial is reused by the next output
  }
}

template <typename S>
__global__ void argmax_kernel(const S* x, std::int64_t* out, std::int64_t outer, std::int64_t len,
                              std::int64_t inner, DType dtype) {
  TANDEM_GRID_LOOP(row, outer * inner) {
    const std::int64_t o = row / inner, i = row % inner;
    const S* base = x + o * len * inner + i;
    std::int64_t best = 0;
    double best_v = stored_to_double(base[0], dtype);
    for (std::int64_t k = 1; k < len; ++k) {
      const double v = stored_to_double(base[k * inner], dtype);
      if (v > best_v || (v != v && best_v == best_v)) {
        best_v = v;
        best = k;
      }
    }
    out[row] = best;
  }
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  check_gpu_operands("sum", {&x});
  TANDEM_CHECK(
      x.dtype() == DType::Float32 || x.dtype() == DType::Float64 || x.dtype() == DType::Int64,
      "sum: unsupported dtype ", x.dtype());
  const std::int64_t rank = x.dim();
  std::vector<bool> reduce(static_cast<std::size_t>(rank), dims.empty());
  for (auto d : dims) reduce[static_cast<std::size_t>(wrap_dim(d, rank, "sum"))] = true;
  Shape out_shape, kept_shape, reduced_shape;
  Strides kept_strides, reduced_strides;
  for (std::int64_t i = 0; i < rank; ++i) {
    const auto u = static_cast<std::size_t>(i);
    if (reduce[u]) {
      reduced_shape.push_back(x.shape()[u]);
      reduced_strides.push_back(x.strides()[u]);
      if (keepdim) out_shape.push_back(1);
    } else {
      kept_shape.push_back(x.shape()[u]);
      kept_strides.push_back(x.strides()[u]);
      out_shape.push_back(x.shape()[u]);
    }
  }
  Tensor y = new_like(out_shape, x);
  const std::int64_t outputs = numel(kept_shape);
  if (outputs == 0) return y;
  const OnDevice on(x);
  const std::int64_t per_output = numel(reduced_shape);
  if (per_output == 0) {
    fill_(y, 0.0);
    return y;
  }
  const StridedWalk<1> kept = make_walk<1>(kept_shape, {kept_strides}, "sum");
  const StridedWalk<1> reduced = make_walk<1>(reduced_shape, {reduced_strides}, "sum");
  const unsigned blocks = static_cast<unsigned>(outputs < 65535 * 8 ? outputs : 65535 * 8);
  const auto launch = [&]<typename T>() {
    sum_kernel<T><<<blocks, kReduceThreads, 0, on.stream()>>>(ptr<const T>(x), ptr<T>(y), outputs,
                                                              per_output, kept, reduced);
    TANDEM_CUDA_LAUNCHED("sum");
  };
  visit_arithmetic(x.dtype(), "sum", launch);  // float32, float64 or int64 (checked above)
  return y;
}

Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim) {
  check_gpu_operands("argmax", {&x});
  const std::int64_t d = wrap_dim(dim, x.dim(), "argmax");
  TANDEM_CHECK(x.dim() > 0 && x.size(d) > 0, "argmax: empty dimension in ", show(x.shape()));
  const Tensor xc = contig(x);
  const AlongDim g = along_dim("argmax", x, d);
  const std::int64_t outer = g.a, len = g.l, inner = g.b;
  const Shape out_shape = shape_without(x, d, keepdim);
  Tensor y = empty(out_shape, {.dtype = DType::Int64, .device = x.device()});
  const std::int64_t rows = outer * inner;
  if (rows == 0) return y;
  const OnDevice on(x);
  visit_stored(x.dtype(), [&]<typename S>() {
    argmax_kernel<S><<<blocks_for(rows), kThreads, 0, on.stream()>>>(
        ptr<const S>(xc), ptr<std::int64_t>(y), outer, len, inner, x.dtype());
    TANDEM_CUDA_LAUNCHED("argmax");
  });
  return y;
}

}  // namespace tandem::ops::cuda
