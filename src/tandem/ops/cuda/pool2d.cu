// 2-D pooling on a GPU with the CPU kernels' semantics (cpu/pool2d.cpp): max (with flat h*W+w
// indices, the first maximum winning and a NaN propagating), average (count_include_pad or not,
// ceil_mode) and adaptive average, forward and backward. One thread per output (forward) or per
// input (average backwards, a gather in the CPU's summation order); max backward scatters through
// the indices with atomicAdd. Not cuDNN: its pooling gives no indices and other ceil_mode divisors.
// x (N, C, H, W) -> y (N, C, P, Q); kernel (R, S); a "plane" is one (n, c) pair.
#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "tandem/base/check.h"
#include "tandem/device/cuda/check.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/launch.cuh"

namespace tandem::ops::cuda {
namespace {

// Window [start, end) of output position i along one dimension, clipped to the input [0, in).
struct Window {
  std::int64_t start, end;
};

__device__ __forceinline__ Window clipped_window(std::int64_t i, std::int64_t kernel,
                                                 std::int64_t stride, std::int64_t pad,
                                                 std::int64_t in) {
  const std::int64_t start = i * stride - pad;
  return {start > 0 ? start : 0, start + kernel < in ? start + kernel : in};
}

// Adaptive window of output cell i of `out` over an input of length `in`:
// [floor(i * in / out), ceil((i + 1) * in / out)).
__device__ __forceinline__ Window adaptive_window(std::int64_t i, std::int64_t out,
                                                  std::int64_t in) {
  return {(i * in) / out, ((i + 1) * in + out - 1) / out};
}

// The pooling geometry a kernel needs, by value (kernel parameters live in constant memory).
struct PoolGeometry {
  std::int64_t planes, h, w, ph, pw;  // input plane (H, W), output plane (P, Q)
  std::int64_t kh, kw, sh, sw, pad_h, pad_w;
  bool count_include_pad;
};

PoolGeometry geometry_of(const Shape& x_shape, const Shape& y_shape, const Pool2dParams& p) {
  return PoolGeometry{.planes = x_shape[0] * x_shape[1],
                      .h = x_shape[2],
                      .w = x_shape[3],
                      .ph = y_shape[2],
                      .pw = y_shape[3],
                      .kh = p.kernel[0],
                      .kw = p.kernel[1],
                      .sh = p.stride[0],
                      .sw = p.stride[1],
                      .pad_h = p.padding[0],
                      .pad_w = p.padding[1],
                      .count_include_pad = p.count_include_pad};
}

// Output o of (planes, P, Q): its plane, its row and column, and its window clipped to the input.
struct OutputCell {
  std::int64_t plane, oh, ow;
  Window rows, cols;
};

__device__ __forceinline__ OutputCell output_cell(std::int64_t o, const PoolGeometry& g) {
  const std::int64_t ow = o % g.pw;
  const std::int64_t oh = (o / g.pw) % g.ph;
  return {o / (g.pw * g.ph), oh, ow, clipped_window(oh, g.kh, g.sh, g.pad_h, g.h),
          clipped_window(ow, g.kw, g.sw, g.pad_w, g.w)};
}

// Number of elements avg pooling divides by for output position (oh, ow), as on the CPU.
__device__ __forceinline__ std::int64_t avg_divisor(std::int64_t oh, std::int64_t ow,
                                                    const PoolGeometry& g) {
  if (!g.count_include_pad) {
    const Window wh = clipped_window(oh, g.kh, g.sh, g.pad_h, g.h);
    const Window ww = clipped_window(ow, g.kw, g.sw, g.pad_w, g.w);
    return (wh.end - wh.start) * (ww.end - ww.start);
  }
  // The window clipped to the padded input (ceil_mode windows may run past it).
  const std::int64_t h0 = oh * g.sh - g.pad_h, w0 = ow * g.sw - g.pad_w;
  const std::int64_t h1 = h0 + g.kh < g.h + g.pad_h ? h0 + g.kh : g.h + g.pad_h;
  const std::int64_t w1 = w0 + g.kw < g.w + g.pad_w ? w0 + g.kw : g.w + g.pad_w;
  return (h1 - h0) * (w1 - w0);
}

// ---- max ---------------------------------------------------------------------------------------

// y, idx (planes, P, Q) from x (planes, H, W); idx may be null. The window's values in row-major
// order, starting from -inf: a value wins when it is greater than the best so far or a NaN.
template <typename T>
__global__ void max_pool_kernel(const T* __restrict__ x, T* __restrict__ y,
                                std::int64_t* __restrict__ idx, PoolGeometry g) {
  const std::int64_t total = g.planes * g.ph * g.pw;
  TANDEM_GRID_LOOP(o, total) {
    const OutputCell c = output_cell(o, g);
    const Window wh = c.rows, ww = c.cols;
    const T* xp = x + c.plane * g.h * g.w;
    T best = -static_cast<T>(INFINITY);
    std::int64_t at = wh.start * g.w + ww.start;
    for (std::int64_t ih = wh.start; ih < wh.end; ++ih) {
      for (std::int64_t iw = ww.start; iw < ww.end; ++iw) {
        const T v = xp[ih * g.w + iw];
        if (v > best || isnan(v)) {
          best = v;
          at = ih * g.w + iw;
        }
      }
    }
    y[o] = best;
    if (idx) idx[o] = at;
  }
}

// gx (planes, H*W) += g (planes, per_plane) at the indices; gx starts zeroed. Indices outside the
// plane are skipped (a kernel cannot throw; the CPU kernel reports them).
template <typename T>
__global__ void max_pool_backward_kernel(const T* __restrict__ g,
                                         const std::int64_t* __restrict__ idx, T* __restrict__ gx,
                                         std::int64_t planes, std::int64_t per_plane,
                                         std::int64_t hw) {
  const std::int64_t total = planes * per_plane;
  TANDEM_GRID_LOOP(o, total) {
    const std::int64_t at = idx[o];
    if (at < 0 || at >= hw) continue;
    atomicAdd(gx + (o / per_plane) * hw + at, g[o]);
  }
}

// ---- average -----------------------------------------------------------------------------------

// y (planes, P, Q): the sum over each clipped window, in row-major order, over its divisor.
template <typename T>
__global__ void avg_pool_kernel(const T* __restrict__ x, T* __restrict__ y, PoolGeometry g) {
  const std::int64_t total = g.planes * g.ph * g.pw;
  TANDEM_GRID_LOOP(o, total) {
    const OutputCell c = output_cell(o, g);
    const Window wh = c.rows, ww = c.cols;
    const T* xp = x + c.plane * g.h * g.w;
    T acc = 0;
    for (std::int64_t ih = wh.start; ih < wh.end; ++ih) {
      for (std::int64_t iw = ww.start; iw < ww.end; ++iw) acc += xp[ih * g.w + iw];
    }
    y[o] = acc / static_cast<T>(avg_divisor(c.oh, c.ow, g));
  }
}

// The outputs whose window (kernel k, stride s, padding pad) holds input position i: those with
// o * s - pad <= i < o * s - pad + k, within [0, out). Returned as [lo, hi] (empty when lo > hi).
__device__ __forceinline__ Window outputs_covering(std::int64_t i, std::int64_t k, std::int64_t s,
                                                   std::int64_t pad, std::int64_t out) {
  const std::int64_t first = i + pad - k + 1;  // o * s >= first
  const std::int64_t lo = first <= 0 ? 0 : (first + s - 1) / s;
  const std::int64_t last = (i + pad) / s;  // o * s <= i + pad (i + pad >= 0)
  return {lo, last < out - 1 ? last : out - 1};
}

// gx (planes, H, W): for each input, the sum of g / divisor over the outputs whose window holds
// it, taken in the outputs' row-major order (the order in which the CPU kernel adds them).
template <typename T>
__global__ void avg_pool_backward_kernel(const T* __restrict__ g, T* __restrict__ gx,
                                         PoolGeometry geo) {
  const std::int64_t total = geo.planes * geo.h * geo.w;
  TANDEM_GRID_LOOP(i, total) {
    const std::int64_t iw = i % geo.w;
    const std::int64_t ih = (i / geo.w) % geo.h;
    const std::int64_t plane = i / (geo.w * geo.h);
    const Window rows = outputs_covering(ih, geo.kh, geo.sh, geo.pad_h, geo.ph);
    const Window cols = outputs_covering(iw, geo.kw, geo.sw, geo.pad_w, geo.pw);
    const T* gp = g + plane * geo.ph * geo.pw;
    T acc = 0;
    for (std::int64_t oh = rows.start; oh <= rows.end; ++oh) {
      for (std::int64_t ow = cols.start; ow <= cols.end; ++ow) {
        acc += gp[oh * geo.pw + ow] / static_cast<T>(avg_divisor(oh, ow, geo));
      }
    }
    gx[i] = acc;
  }
}

// ---- adaptive average --------------------------------------------------------------------------

// y (planes, P, Q): the mean over each adaptive cell, summed in row-major order.
template <typename T>
__global__ void adaptive_avg_kernel(const T* __restrict__ x, T* __restrict__ y, std::int64_t planes,
                                    std::int64_t h, std::int64_t w, std::int64_t ph,
                                    std::int64_t pw) {
  const std::int64_t total = planes * ph * pw;
  TANDEM_GRID_LOOP(o, total) {
    const std::int64_t ow = o % pw;
    const std::int64_t oh = (o / pw) % ph;
    const std::int64_t plane = o / (pw * ph);
    const Window wh = adaptive_window(oh, ph, h), ww = adaptive_window(ow, pw, w);
    const T* xp = x + plane * h * w;
    T acc = 0;
    for (std::int64_t ih = wh.start; ih < wh.end; ++ih) {
      for (std::int64_t iw = ww.start; iw < ww.end; ++iw) acc += xp[ih * w + iw];
    }
    y[o] = acc / static_cast<T>((wh.end - wh.start) * (ww.end - ww.start));
  }
}

// The adaptive cells of `out` over `in` that hold input position i, as [lo, hi]. Cell o starts
// at floor(o * in / out) <= i exactly when o <= ceil((i + 1) * out / in) - 1, and ends at
// ceil((o + 1) * in / out) > i exactly when o >= floor(i * out / in).
__device__ __forceinline__ Window cells_covering(std::int64_t i, std::int64_t out,
                                                 std::int64_t in) {
  const std::int64_t lo = (i * out) / in;
  const std::int64_t hi = ((i + 1) * out + in - 1) / in - 1;
  return {lo, hi < out - 1 ? hi : out - 1};
}

// gx (planes, H, W): for each input, the sum of g / cell size over the cells holding it, in the
// cells' row-major order (as the CPU kernel adds them).
template <typename T>
__global__ void adaptive_avg_backward_kernel(const T* __restrict__ g, T* __restrict__ gx,
                                             std::int64_t planes, std::int64_t h, std::int64_t w,
                                             std::int64_t ph, std::int64_t pw) {
  const std::int64_t total = planes * h * w;
  TANDEM_GRID_LOOP(i, total) {
    const std::int64_t iw = i % w;
    const std::int64_t ih = (i / w) % h;
    const std::int64_t plane = i / (w * h);
    const Window rows = cells_covering(ih, ph, h), cols = cells_covering(iw, pw, w);
    const T* gp = g + plane * ph * pw;
    T acc = 0;
    for (std::int64_t oh = rows.start; oh <= rows.end; ++oh) {
      const Window wh = adaptive_window(oh, ph, h);
      if (ih < wh.start || ih >= wh.end) continue;  // guards the bounds above; never taken
      for (std::int64_t ow = cols.start; ow <= cols.end; ++ow) {
        const Window ww = adaptive_window(ow, pw, w);
        if (iw < ww.start || iw >= ww.end) continue;
        acc += gp[oh * pw + ow] / static_cast<T>((wh.end - wh.start) * (ww.end - ww.start));
      }
    }
    gx[i] = acc;
  }
}

// ---- host side ---------------------------------------------------------------------------------

void check_input(const char* op, const Tensor& x) {
  check_gpu_operands(op, {&x});
  TANDEM_CHECK(x.dim() == 4, op, ": expected input (N, C, H, W), got ", show(x.shape()));
}

void check_floating(const char* op, DType dtype) {
  TANDEM_CHECK(dtype == DType::Float32 || dtype == DType::Float64, op,
               ": expected a float32 or float64 tensor, got ", dtype);
}

void check_plane_match(const char* op, const Tensor& grad_out, const Shape& x_shape) {
  TANDEM_CHECK(x_shape.size() == 4 && grad_out.dim() == 4 && grad_out.size(0) == x_shape[0] &&
                   grad_out.size(1) == x_shape[1],
               op, ": grad_out ", show(grad_out.shape()), " does not match input ", show(x_shape));
}

template <typename T>
void launch_max_pool(const Tensor& x, const Tensor& y, const Tensor& idx, const PoolGeometry& g,
                     cudaStream_t stream) {
  const std::int64_t total = g.planes * g.ph * g.pw;
  max_pool_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
      ptr<const T>(x), ptr<T>(y), idx.defined() ? ptr<std::int64_t>(idx) : nullptr, g);
  TANDEM_CUDA_LAUNCHED("max_pool_kernel");
}

template <typename T>
void launch_max_pool_backward(const Tensor& g, const Tensor& idx, const Tensor& gx,
                              std::int64_t planes, std::int64_t per_plane, std::int64_t hw,
                              cudaStream_t stream) {
  max_pool_backward_kernel<T><<<blocks_for(planes * per_plane), kThreads, 0, stream>>>(
      ptr<const T>(g), ptr<const std::int64_t>(idx), ptr<T>(gx), planes, per_plane, hw);
  TANDEM_CUDA_LAUNCHED("max_pool_backward_kernel");
}

template <typename T>
void launch_avg_pool(const Tensor& x, const Tensor& y, const PoolGeometry& g, cudaStream_t stream) {
  avg_pool_kernel<T>
      <<<blocks_for(g.planes * g.ph * g.pw), kThreads, 0, stream>>>(ptr<const T>(x), ptr<T>(y), g);
  TANDEM_CUDA_LAUNCHED("avg_pool_kernel");
}

template <typename T>
void launch_avg_pool_backward(const Tensor& g, const Tensor& gx, const PoolGeometry& geo,
                              cudaStream_t stream) {
  avg_pool_backward_kernel<T><<<blocks_for(geo.planes * geo.h * geo.w), kThreads, 0, stream>>>(
      ptr<const T>(g), ptr<T>(gx), geo);
  TANDEM_CUDA_LAUNCHED("avg_pool_backward_kernel");
}

template <typename T>
void launch_adaptive(const Tensor& x, const Tensor& y, std::int64_t planes, std::int64_t h,
                     std::int64_t w, std::int64_t ph, std::int64_t pw, cudaStream_t stream) {
  adaptive_avg_kernel<T><<<blocks_for(planes * ph * pw), kThreads, 0, stream>>>(
      ptr<const T>(x), ptr<T>(y), planes, h, w, ph, pw);
  TANDEM_CUDA_LAUNCHED("adaptive_avg_kernel");
}

template <typename T>
void launch_adaptive_backward(const Tensor& g, const Tensor& gx, std::int64_t planes,
                              std::int64_t h, std::int64_t w, std::int64_t ph, std::int64_t pw,
                              cudaStream_t stream) {
  adaptive_avg_backward_kernel<T><<<blocks_for(planes * h * w), kThreads, 0, stream>>>(
      ptr<const T>(g), ptr<T>(gx), planes, h, w, ph, pw);
  TANDEM_CUDA_LAUNCHED("adaptive_avg_backward_kernel");
}

}  // namespace

Tensor max_pool2d(const Tensor& x_in, const Pool2dParams& p, Tensor* indices) {
  const char* op = "max_pool2d";
  check_input(op, x_in);
  check_floating(op, x_in.dtype());
  const Shape y_shape = pool2d_output_shape(x_in.shape(), p, op);
  const OnDevice on(x_in);
  Tensor x = contig(x_in);
  Tensor y = new_like(y_shape, x);
  Tensor idx = indices ? empty(y_shape, {.dtype = DType::Int64, .device = x.device()}) : Tensor();
  if (y.numel() > 0) {
    const PoolGeometry g = geometry_of(x.shape(), y_shape, p);
    if (x.dtype() == DType::Float32) {
      launch_max_pool<float>(x, y, idx, g, on.stream());
    } else {
      launch_max_pool<double>(x, y, idx, g, on.stream());
    }
  }
  if (indices) *indices = idx;
  return y;
}

Tensor max_pool2d_backward(const Tensor& grad_out_in, const Tensor& indices_in,
                           const Shape& x_shape) {
  const char* op = "max_pool2d_backward";
  check_gpu_operands(op, {&grad_out_in, &indices_in}, /*mixed_dtypes=*/true);
  check_floating(op, grad_out_in.dtype());
  check_plane_match(op, grad_out_in, x_shape);
  TANDEM_CHECK(indices_in.defined() && indices_in.dtype() == DType::Int64 &&
                   indices_in.shape() == grad_out_in.shape(),
               op, ": indices must be int64 of grad_out's shape ", show(grad_out_in.shape()));
  const OnDevice on(grad_out_in);
  Tensor g = contig(grad_out_in), idx = contig(indices_in);
  Tensor gx = new_like(x_shape, g);
  if (gx.numel() == 0) return gx;
  TANDEM_CUDA_CHECK(cudaMemsetAsync(gx.raw_data(), 0, gx.nbytes(), on.stream()));
  if (g.numel() == 0) return gx;
  const std::int64_t planes = x_shape[0] * x_shape[1], hw = x_shape[2] * x_shape[3];
  const std::int64_t per_plane = g.size(2) * g.size(3);
  if (g.dtype() == DType::Float32) {
    launch_max_pool_backward<float>(g, idx, gx, planes, per_plane, hw, on.stream());
  } else {
    launch_max_pool_backward<double>(g, idx, gx, planes, per_plane, hw, on.stream());
  }
  return gx;
}

Tensor avg_pool2d(const Tensor& x_in, const Pool2dParams& p) {
  const char* op = "avg_pool2d";
  check_input(op, x_in);
  check_floating(op, x_in.dtype());
  const Shape y_shape = pool2d_output_shape(x_in.shape(), p, op);
  const OnDevice on(x_in);
  Tensor x = contig(x_in);
  Tensor y = new_like(y_shape, x);
  if (y.numel() == 0) return y;
  const PoolGeometry g = geometry_of(x.shape(), y_shape, p);
  if (x.dtype() == DType::Float32) {
    launch_avg_pool<float>(x, y, g, on.stream());
  } else {
    launch_avg_pool<double>(x, y, g, on.stream());
  }
  return y;
}

Tensor avg_pool2d_backward(const Tensor& grad_out_in, const Shape& x_shape, const Pool2dParams& p) {
  const char* op = "avg_pool2d_backward";
  check_gpu_operands(op, {&grad_out_in});
  check_floating(op, grad_out_in.dtype());
  const Shape y_shape = pool2d_output_shape(x_shape, p, op);
  TANDEM_CHECK(grad_out_in.shape() == y_shape, op, ": grad_out ", show(grad_out_in.shape()),
               " does not match the pooled output ", show(y_shape));
  const OnDevice on(grad_out_in);
  Tensor g = contig(grad_out_in);
  Tensor gx = new_like(x_shape, g);
  if (gx.numel() == 0) return gx;
  const PoolGeometry geo = geometry_of(x_shape, y_shape, p);
  if (g.dtype() == DType::Float32) {
    launch_avg_pool_backward<float>(g, gx, geo, on.stream());
  } else {
    launch_avg_pool_backward<double>(g, gx, geo, on.stream());
  }
  return gx;
}

Tensor adaptive_avg_pool2d(const Tensor& x_in, std::array<std::int64_t, 2> output_size) {
  const char* op = "adaptive_avg_pool2d";
  check_input(op, x_in);
  check_floating(op, x_in.dtype());
  TANDEM_CHECK(output_size[0] >= 1 && output_size[1] >= 1, op, ": output size (", output_size[0],
               ", ", output_size[1], ") must be positive");
  TANDEM_CHECK(x_in.size(2) >= 1 && x_in.size(3) >= 1, op, ": input ", show(x_in.shape()),
               " has an empty plane");
  const OnDevice on(x_in);
  Tensor x = contig(x_in);
  const std::int64_t ph = output_size[0], pw = output_size[1];
  Tensor y = new_like({x.size(0), x.size(1), ph, pw}, x);
  if (y.numel() == 0) return y;
  const std::int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
  if (x.dtype() == DType::Float32) {
    launch_adaptive<float>(x, y, planes, h, w, ph, pw, on.stream());
  } else {
    launch_adaptive<double>(x, y, planes, h, w, ph, pw, on.stream());
  }
  return y;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out_in, const Shape& x_shape) {
  const char* op = "adaptive_avg_pool2d_backward";
  check_gpu_operands(op, {&grad_out_in});
  check_floating(op, grad_out_in.dtype());
  check_plane_match(op, grad_out_in, x_shape);
  TANDEM_CHECK(grad_out_in.size(2) >= 1 && grad_out_in.size(3) >= 1, op, ": grad_out ",
               show(grad_out_in.shape()), " has an empty plane");
  const OnDevice on(grad_out_in);
  Tensor g = contig(grad_out_in);
  Tensor gx = new_like(x_shape, g);
  if (gx.numel() == 0) return gx;
  const std::int64_t planes = x_shape[0] * x_shape[1], h = x_shape[2], w = x_shape[3];
  const std::int64_t ph = g.size(2), pw = g.size(3);
  if (g.dtype() == DType::Float32) {
    launch_adaptive_backward<float>(g, gx, planes, h, w, ph, pw, on.stream());
  } else {
    launch_adaptive_backward<double>(g, gx, planes, h, w, ph, pw, on.stream());
  }
  return gx;
}

}  // namespace tandem::ops::cuda
