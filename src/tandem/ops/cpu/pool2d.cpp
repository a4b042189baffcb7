// 2-D pooling on the CPU with PyTorch's semantics: max (with flat h*W+w indices), average
// (count_include_pad or not, ceil_mode) and adaptive average, forward and backward. Plain loops
// for float32 and float64 alike: they give max pooling its indices and match PyTorch's ceil_mode
// divisors exactly, which oneDNN's pooling primitives do not.
// x (N, C, H, W) -> y (N, C, P, Q); kernel (R, S).
#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tandem/ops/cpu/common.h"
#include "tandem/ops/ops.h"

namespace tandem::ops {
namespace {

// Prints a (height, width) pair as "(3, 3)" in error messages.
struct PairPrinter {
  const std::array<std::int64_t, 2>& pair;
};
std::ostream& operator<<(std::ostream& out, PairPrinter p) {
  return out << "(" << p.pair[0] << ", " << p.pair[1] << ")";
}
PairPrinter show_pair(const std::array<std::int64_t, 2>& pair) { return {pair}; }

// Floor division for a possibly negative numerator (positive d).
std::int64_t floor_div(std::int64_t n, std::int64_t d) {
  return n >= 0 ? n / d : -((-n + d - 1) / d);
}

// Output length along one dimension, as PyTorch computes it: with ceil_mode the last window
// must still start inside the input or its left padding.
std::int64_t pooled_length(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                           std::int64_t pad, bool ceil_mode) {
  std::int64_t out = floor_div(in + 2 * pad - kernel + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

void check_input(const char* op, const Tensor& x) {
  cpu::check_operands(op, {&x});
  TANDEM_CHECK(x.dim() == 4, op, ": expected input (N, C, H, W), got ", show(x.shape()));
}

void check_grad_out(const char* op, const Tensor& grad_out, const Shape& expected) {
  TANDEM_CHECK(grad_out.shape() == expected, op, ": grad_out ", show(grad_out.shape()),
               " does not match the pooled output ", show(expected));
}

// Window [start, end) of output position i along one dimension, clipped to the input [0, in).
struct Window {
  std::int64_t start, end;
};
Window clipped_window(std::int64_t i, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                      std::int64_t in) {
  const std::int64_t start = i * stride - pad;
  return {std::max<std::int64_t>(start, 0), std::min(start + kernel, in)};
}

// Number of elements avg pooling divides by for output position (oh, ow).
std::int64_t avg_divisor(std::int64_t oh, std::int64_t ow, std::int64_t h, std::int64_t w,
                         const Pool2dParams& p) {
  if (!p.count_include_pad) {
    const Window wh = clipped_window(oh, p.kernel[0], p.stride[0], p.padding[0], h);
    const Window ww = clipped_window(ow, p.kernel[1], p.stride[1], p.padding[1], w);
    return (wh.end - wh.start) * (ww.end - ww.start);
  }
  // The window clipped to the padded input (ceil_mode windows may run past it).
  const std::int64_t h0 = oh * p.stride[0] - p.padding[0], w0 = ow * p.stride[1] - p.padding[1];
  const std::int64_t h1 = std::min(h0 + p.kernel[0], h + p.padding[0]);
  const std::int64_t w1 = std::min(w0 + p.kernel[1], w + p.padding[1]);
  return (h1 - h0) * (w1 - w0);
}

// Adaptive window of output cell i of `out` over an input of length `in`:
// [floor(i * in / out), ceil((i + 1) * in / out)).
Window adaptive_window(std::int64_t i, std::int64_t out, std::int64_t in) {
  return {(i * in) / out, ((i + 1) * in + out - 1) / out};
}

}  // namespace

Shape pool2d_output_shape(const Shape& x, const Pool2dParams& p, const char* op) {
  TANDEM_CHECK(x.size() == 4, op, ": expected input (N, C, H, W), got ", show(x));
  TANDEM_CHECK(p.kernel[0] >= 1 && p.kernel[1] >= 1, op, ": kernel ", show_pair(p.kernel),
               " must be positive");
  TANDEM_CHECK(p.stride[0] >= 1 && p.stride[1] >= 1, op, ": stride ", show_pair(p.stride),
               " must be positive");
  TANDEM_CHECK(p.padding[0] >= 0 && p.padding[1] >= 0, op, ": padding ", show_pair(p.padding),
               " must not be negative");
  TANDEM_CHECK(p.padding[0] <= p.kernel[0] / 2 && p.padding[1] <= p.kernel[1] / 2, op,
               ": padding ", show_pair(p.padding), " must be at most half the kernel ",
               show_pair(p.kernel));
  const Shape y{x[0], x[1], pooled_length(x[2], p.kernel[0], p.stride[0], p.padding[0], p.ceil_mode),
                pooled_length(x[3], p.kernel[1], p.stride[1], p.padding[1], p.ceil_mode)};
  TANDEM_CHECK(y[2] >= 1 && y[3] >= 1, op, ": input ", show(x), " is too small for kernel ",
               show_pair(p.kernel), " with padding ", show_pair(p.padding), " (output would be ",
               show(y), ")");
  return y;
}

namespace {

// The max over one window, PyTorch's way: the first maximum wins, and a NaN propagates (the last
// NaN's index). `consider` takes the window's values in row-major order.
template <typename T>
struct MaxOfWindow {
  T best;
  std::int64_t at;
  void consider(T v, std::int64_t where) {
    if (v > best || std::isnan(v)) {
      best = v;
      at = where;
    }
  }
};

// Whether every window is a whole, non-overlapping k x k tile inside the input (kernel == stride,
// no padding, and ceil_mode adds no partial window): the common 2 x 2 / stride 2 case.
bool whole_tiles(const Pool2dParams& p, std::int64_t h, std::int64_t w) {
  if (p.kernel != p.stride || p.padding[0] != 0 || p.padding[1] != 0) return false;
  return !p.ceil_mode || (h % p.kernel[0] == 0 && w % p.kernel[1] == 0);
}

// One whole 2 x 2 tile at columns (c, c + 1) of rows r0 and r1: its maximum, and where it is as
// a code 0..3 (r0[c], r0[c + 1], r1[c], r1[c + 1]), by MaxOfWindow's rule.
template <typename T>
int max_of_tile(const T* r0, const T* r1, std::int64_t c, T* best_out) {
  MaxOfWindow<T> m{r0[c], 0};
  m.consider(r0[c + 1], 1);
  m.consider(r1[c], 2);
  m.consider(r1[c + 1], 3);
  *best_out = m.best;
  return static_cast<int>(m.at);
}

#if defined(__SSE2__)
// Four tiles at once (columns c .. c + 7), branch-free: on real data the comparisons are
// unpredictable and jumps cost more than the arithmetic. Same rule: a later value wins when it is
// greater or a NaN. Writes the four maxima to y and their codes to codes.
inline void max_of_4_tiles(const float* r0, const float* r1, std::int64_t c, float* y,
                           std::int32_t* codes) {
  const __m128 r0a = _mm_loadu_ps(r0 + c), r0b = _mm_loadu_ps(r0 + c + 4);
  const __m128 r1a = _mm_loadu_ps(r1 + c), r1b = _mm_loadu_ps(r1 + c + 4);
  const __m128 candidates[4] = {_mm_shuffle_ps(r0a, r0b, _MM_SHUFFLE(2, 0, 2, 0)),   // r0 even
                                _mm_shuffle_ps(r0a, r0b, _MM_SHUFFLE(3, 1, 3, 1)),   // r0 odd
                                _mm_shuffle_ps(r1a, r1b, _MM_SHUFFLE(2, 0, 2, 0)),   // r1 even
                                _mm_shuffle_ps(r1a, r1b, _MM_SHUFFLE(3, 1, 3, 1))};  // r1 odd
  __m128 best = candidates[0];
  __m128i code = _mm_setzero_si128();
  for (int k = 1; k < 4; ++k) {
    const __m128 v = candidates[k];
    const __m128 take = _mm_or_ps(_mm_cmpgt_ps(v, best), _mm_cmpunord_ps(v, v));
    best = _mm_or_ps(_mm_and_ps(take, v), _mm_andnot_ps(take, best));
    const __m128i take_i = _mm_castps_si128(take);
    code = _mm_or_si128(_mm_and_si128(take_i, _mm_set1_epi32(k)), _mm_andnot_si128(take_i, code));
  }
  _mm_storeu_ps(y, best);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), code);
}
#endif

// Max pooling over whole 2 x 2 tiles: y (planes, P, Q) and flat indices into each (H, W) plane.
template <typename T>
void max_pool_2x2(const T* px, T* py, std::int64_t* pi, std::int64_t planes, std::int64_t h,
                  std::int64_t w, std::int64_t ph, std::int64_t pw) {
  const std::int64_t offset_of[4] = {0, 1, w, w + 1};  // a tile code's place from its corner
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    const T* xp = px + plane * h * w;
    T* yp = py + plane * ph * pw;
    std::int64_t* ip = pi ? pi + plane * ph * pw : nullptr;
    for (std::int64_t oh = 0; oh < ph; ++oh) {
      const T* r0 = xp + 2 * oh * w;
      const T* r1 = r0 + w;
      T* y = yp + oh * pw;
      std::int64_t* idx = ip ? ip + oh * pw : nullptr;
      std::int64_t ow = 0;
#if defined(__SSE2__)
      if constexpr (std::is_same_v<T, float>) {
        std::int32_t codes[4];
        for (; ow + 4 <= pw; ow += 4) {
          max_of_4_tiles(r0, r1, 2 * ow, y + ow, codes);
          if (idx) {
            for (int j = 0; j < 4; ++j) {
              idx[ow + j] = 2 * oh * w + 2 * (ow + j) + offset_of[codes[j]];
            }
          }
        }
      }
#endif
      for (; ow < pw; ++ow) {
        const int code = max_of_tile(r0, r1, 2 * ow, &y[ow]);
        if (idx) idx[ow] = 2 * oh * w + 2 * ow + offset_of[code];
      }
    }
  }
}

// Any window: clipped to the input, starting from -inf (PyTorch's padding never wins).
template <typename T>
void max_pool_any(const T* px, T* py, std::int64_t* pi, std::int64_t planes, std::int64_t h,
                  std::int64_t w, std::int64_t ph, std::int64_t pw, const Pool2dParams& p) {
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    const T* xp = px + plane * h * w;
    for (std::int64_t oh = 0; oh < ph; ++oh) {
      const Window wh = clipped_window(oh, p.kernel[0], p.stride[0], p.padding[0], h);
      for (std::int64_t ow = 0; ow < pw; ++ow) {
        const Window ww = clipped_window(ow, p.kernel[1], p.stride[1], p.padding[1], w);
        MaxOfWindow<T> m{-std::numeric_limits<T>::infinity(), wh.start * w + ww.start};
        for (std::int64_t ih = wh.start; ih < wh.end; ++ih) {
          for (std::int64_t iw = ww.start; iw < ww.end; ++iw) m.consider(xp[ih * w + iw], ih * w + iw);
        }
        const std::int64_t o = (plane * ph + oh) * pw + ow;
        py[o] = m.best;
        if (pi) pi[o] = m.at;
      }
    }
  }
}

}  // namespace

Tensor max_pool2d(const Tensor& x_in, const Pool2dParams& p, Tensor* indices) {
  if (cpu::on_gpu({&x_in})) return cuda::max_pool2d(x_in, p, indices);
  check_input("max_pool2d", x_in);
  const Shape y_shape = pool2d_output_shape(x_in.shape(), p, "max_pool2d");
  Tensor x = cpu::contig(x_in);
  Tensor y = cpu::new_like(y_shape, x);
  Tensor idx = indices ? empty(y_shape, {.dtype = DType::Int64}) : Tensor();
  const std::int64_t planes = y_shape[0] * y_shape[1], h = x.size(2), w = x.size(3);
  const std::int64_t ph = y_shape[2], pw = y_shape[3];
  visit_floating(x.dtype(), "max_pool2d", [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    std::int64_t* pi = indices ? idx.data<std::int64_t>() : nullptr;
    if (p.kernel[0] == 2 && p.kernel[1] == 2 && whole_tiles(p, h, w)) {
      max_pool_2x2(px, py, pi, planes, h, w, ph, pw);
    } else {
      max_pool_any(px, py, pi, planes, h, w, ph, pw, p);
    }
  });
  if (indices) *indices = idx;
  return y;
}

Tensor max_pool2d_backward(const Tensor& grad_out_in, const Tensor& indices_in,
                           const Shape& x_shape) {
  if (cpu::on_gpu({&grad_out_in, &indices_in})) {
    return cuda::max_pool2d_backward(grad_out_in, indices_in, x_shape);
  }
  const char* op = "max_pool2d_backward";
  cpu::check_operands(op, {&grad_out_in});
  TANDEM_CHECK(x_shape.size() == 4 && grad_out_in.dim() == 4 &&
                   grad_out_in.size(0) == x_shape[0] && grad_out_in.size(1) == x_shape[1],
               op, ": grad_out ", show(grad_out_in.shape()), " does not match input ",
               show(x_shape));
  TANDEM_CHECK(indices_in.defined() && indices_in.dtype() == DType::Int64 &&
                   indices_in.shape() == grad_out_in.shape(),
               op, ": indices must be int64 of grad_out's shape ", show(grad_out_in.shape()));
  Tensor g = cpu::contig(grad_out_in), indices = cpu::contig(indices_in);
  Tensor gx = cpu::new_like(x_shape, g);
  fill_(gx, 0.0);
  const std::int64_t planes = x_shape[0] * x_shape[1], hw = x_shape[2] * x_shape[3];
  const std::int64_t per_plane = g.size(2) * g.size(3);
  visit_floating(g.dtype(), op, [&]<typename T>() {
    const T* pg = g.data<T>();
    const std::int64_t* pi = indices.data<std::int64_t>();
    T* pgx = gx.data<T>();
    for (std::int64_t plane = 0; plane < planes; ++plane) {
      for (std::int64_t j = 0; j < per_plane; ++j) {
        const std::int64_t at = pi[plane * per_plane + j];
        if (at < 0 || at >= hw) {
          TANDEM_FAIL(op, ": index ", at, " outside the input plane ", show(x_shape));
        }
        pgx[plane * hw + at] += pg[plane * per_plane + j];
      }
    }
  });
  return gx;
}

namespace {

// One averaging cell: the input rows and columns an output element covers, and what their sum is
// divided by.
struct AvgCell {
  Window h, w;
  std::int64_t divisor;
};

// y (planes, P, Q) = the sum over each cell(oh, ow) of x (planes, H, W), divided by its divisor.
template <typename CellOf>
Tensor average_cells(const char* op, const Tensor& x, const Shape& y_shape, CellOf cell_of) {
  Tensor y = cpu::new_like(y_shape, x);
  const std::int64_t planes = y_shape[0] * y_shape[1], h = x.size(2), w = x.size(3);
  const std::int64_t ph = y_shape[2], pw = y_shape[3];
  visit_floating(x.dtype(), op, [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (std::int64_t plane = 0; plane < planes; ++plane) {
      const T* xp = px + plane * h * w;
      for (std::int64_t oh = 0; oh < ph; ++oh) {
        for (std::int64_t ow = 0; ow < pw; ++ow) {
          const AvgCell c = cell_of(oh, ow);
          T acc = 0;
          for (std::int64_t ih = c.h.start; ih < c.h.end; ++ih) {
            for (std::int64_t iw = c.w.start; iw < c.w.end; ++iw) acc += xp[ih * w + iw];
          }
          py[(plane * ph + oh) * pw + ow] = acc / static_cast<T>(c.divisor);
        }
      }
    }
  });
  return y;
}

// The backward of average_cells: gx (planes, H, W) receives each g (planes, P, Q) element divided
// by its cell's divisor, spread over the cell.
template <typename CellOf>
Tensor spread_cells(const char* op, const Tensor& g, const Shape& x_shape, CellOf cell_of) {
  Tensor gx = cpu::new_like(x_shape, g);
  fill_(gx, 0.0);
  const std::int64_t planes = x_shape[0] * x_shape[1], h = x_shape[2], w = x_shape[3];
  const std::int64_t ph = g.size(2), pw = g.size(3);
  visit_floating(g.dtype(), op, [&]<typename T>() {
    const T* pg = g.data<T>();
    T* pgx = gx.data<T>();
    for (std::int64_t plane = 0; plane < planes; ++plane) {
      T* gxp = pgx + plane * h * w;
      for (std::int64_t oh = 0; oh < ph; ++oh) {
        for (std::int64_t ow = 0; ow < pw; ++ow) {
          const AvgCell c = cell_of(oh, ow);
          const T share = pg[(plane * ph + oh) * pw + ow] / static_cast<T>(c.divisor);
          for (std::int64_t ih = c.h.start; ih < c.h.end; ++ih) {
            for (std::int64_t iw = c.w.start; iw < c.w.end; ++iw) gxp[ih * w + iw] += share;
          }
        }
      }
    }
  });
  return gx;
}

// The cells of avg_pool2d (clipped windows, PyTorch's divisor) and of adaptive_avg_pool2d.
auto avg_cells(const Pool2dParams& p, std::int64_t h, std::int64_t w) {
  return [&p, h, w](std::int64_t oh, std::int64_t ow) {
    return AvgCell{clipped_window(oh, p.kernel[0], p.stride[0], p.padding[0], h),
                   clipped_window(ow, p.kernel[1], p.stride[1], p.padding[1], w),
                   avg_divisor(oh, ow, h, w, p)};
  };
}

auto adaptive_cells(std::int64_t ph, std::int64_t pw, std::int64_t h, std::int64_t w) {
  return [=](std::int64_t oh, std::int64_t ow) {
    const Window wh = adaptive_window(oh, ph, h), ww = adaptive_window(ow, pw, w);
    return AvgCell{wh, ww, (wh.end - wh.start) * (ww.end - ww.start)};
  };
}

}  // namespace

Tensor avg_pool2d(const Tensor& x_in, const Pool2dParams& p) {
  if (cpu::on_gpu({&x_in})) return cuda::avg_pool2d(x_in, p);
  check_input("avg_pool2d", x_in);
  const Shape y_shape = pool2d_output_shape(x_in.shape(), p, "avg_pool2d");
  Tensor x = cpu::contig(x_in);
  return average_cells("avg_pool2d", x, y_shape, avg_cells(p, x.size(2), x.size(3)));
}

Tensor avg_pool2d_backward(const Tensor& grad_out_in, const Shape& x_shape,
                           const Pool2dParams& p) {
  if (cpu::on_gpu({&grad_out_in})) return cuda::avg_pool2d_backward(grad_out_in, x_shape, p);
  const char* op = "avg_pool2d_backward";
  cpu::check_operands(op, {&grad_out_in});
  check_grad_out(op, grad_out_in, pool2d_output_shape(x_shape, p, op));
  return spread_cells(op, cpu::contig(grad_out_in), x_shape, avg_cells(p, x_shape[2], x_shape[3]));
}

Tensor adaptive_avg_pool2d(const Tensor& x_in, std::array<std::int64_t, 2> output_size) {
  if (cpu::on_gpu({&x_in})) return cuda::adaptive_avg_pool2d(x_in, output_size);
  const char* op = "adaptive_avg_pool2d";
  check_input(op, x_in);
  TANDEM_CHECK(output_size[0] >= 1 && output_size[1] >= 1, op, ": output size ",
               show_pair(output_size), " must be positive");
  TANDEM_CHECK(x_in.size(2) >= 1 && x_in.size(3) >= 1, op, ": input ", show(x_in.shape()),
               " has an empty plane");
  Tensor x = cpu::contig(x_in);
  const std::int64_t ph = output_size[0], pw = output_size[1];
  return average_cells(op, x, {x.size(0), x.size(1), ph, pw},
                       adaptive_cells(ph, pw, x.size(2), x.size(3)));
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out_in, const Shape& x_shape) {
  if (cpu::on_gpu({&grad_out_in})) return cuda::adaptive_avg_pool2d_backward(grad_out_in, x_shape);
  const char* op = "adaptive_avg_pool2d_backward";
  cpu::check_operands(op, {&grad_out_in});
  TANDEM_CHECK(x_shape.size() == 4 && grad_out_in.dim() == 4 &&
                   grad_out_in.size(0) == x_shape[0] && grad_out_in.size(1) == x_shape[1],
               op, ": grad_out ", show(grad_out_in.shape()), " does not match input ",
               show(x_shape));
  Tensor g = cpu::contig(grad_out_in);
  return spread_cells(op, g, x_shape, adaptive_cells(g.size(2), g.size(3), x_shape[2], x_shape[3]));
}

}  // namespace tandem::ops
