// Elementwise kernels on the GPU: binary ops with broadcasting (and the activations' backward,
// which are binary maps), scalar maps and unary math, in-place accumulate / scale / fill, equality
// and casts between every pair of dtypes. One grid-stride kernel per shape of work, the op chosen
// by a uniform switch; a contiguous fast path, else offsets from StridedWalk. Same results as
// cpu/elementwise.cpp up to the last bit of the device math library.
#include <cuda_runtime.h>

#include <cstdint>

#include "tandem/base/dispatch.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/dtype.cuh"
#include "tandem/ops/cuda/launch.cuh"
#include "tandem/ops/cuda/strided.cuh"

namespace tandem::ops::cuda {
namespace {

// Maps of one operand: y = f(x; p0, p1).
enum class Map : int {
  Neg,
  Exp,
  Log,
  Sqrt,
  Abs,
  Relu,
  Gelu,
  Sigmoid,
  Tanh,
  Affine,
  Rdiv,
  Pow,
  Square
};
// Maps of two operands: y = f(a, b).
enum class Zip : int { Add, Sub, Mul, Div, ReluBackward, GeluBackward };

template <typename T>
__device__ T gelu_of(T x) {
  return T(0.5) * x * (T(1) + dev_erf(x * T(0.70710678118654752440)));
}

template <typename T>
__device__ T gelu_derivative_of(T x) {
  const T cdf = T(0.5) * (T(1) + dev_erf(x * T(0.70710678118654752440)));
  // 0.5 * (1/sqrt(pi)) * sqrt(2) = 1/sqrt(2 pi)
  const T pdf = dev_exp(T(-0.5) * x * x) * T(0.39894228040143267794);
  return cdf + x * pdf;
}

template <typename T>
__device__ T apply_map(Map m, T v, T p0, T p1) {
  switch (m) {
    case Map::Neg:
      return -v;
    case Map::Exp:
      return dev_exp(v);
    case Map::Log:
      return dev_log(v);
    case Map::Sqrt:
      return dev_sqrt(v);
    case Map::Abs:
      return dev_abs(v);
    case Map::Relu:
      return v > T(0) ? v : T(0);
    case Map::Gelu:
      return gelu_of(v);
    case Map::Sigmoid:
      return T(1) / (T(1) + dev_exp(-v));
    case Map::Tanh:
      return dev_tanh(v);
    case Map::Affine:
      return v * p0 + p1;
    case Map::Rdiv:
      return p0 / v;
    case Map::Pow:
      return dev_pow(v, p0);
    case Map::Square:
      return v * v;
  }
  return v;
}

template <typename T>
__device__ T apply_zip(Zip z, T a, T b) {
  switch (z) {
    case Zip::Add:
      return a + b;
    case Zip::Sub:
      return a - b;
    case Zip::Mul:
      return a * b;
    case Zip::Div:
      return a / b;
    case Zip::ReluBackward:
      return b > T(0) ? a : T(0);  // a = grad, b = relu output
    case Zip::GeluBackward:
      if constexpr (std::is_floating_point_v<T>) return a * gelu_derivative_of(b);
      return T(0);
  }
  return a;
}

template <typename T>
__global__ void map_kernel(const T* x, T* y, std::int64_t n, Map m, T p0, T p1, bool contiguous,
                           StridedWalk<1> walk) {
  TANDEM_GRID_LOOP(i, n) {
    std::int64_t o[1] = {i};
    if (!contiguous) walk.offsets(i, o);
    y[i] = apply_map(m, x[o[0]], p0, p1);
  }
}

template <typename T>
__global__ void zip_kernel(const T* a, const T* b, T* y, std::int64_t n, Zip z, bool contiguous,
                           StridedWalk<2> walk) {
  TANDEM_GRID_LOOP(i, n) {
    std::int64_t o[2] = {i, i};
    if (!contiguous) walk.offsets(i, o);
    y[i] = apply_zip(z, a[o[0]], b[o[1]]);
  }
}

template <typename T>
__global__ void accumulate_kernel(T* dst, const T* src, std::int64_t n, T alpha, bool contiguous,
                                  StridedWalk<1> walk) {
  TANDEM_GRID_LOOP(i, n) {
    std::int64_t o[1] = {i};
    if (!contiguous) walk.offsets(i, o);
    dst[i] += alpha * src[o[0]];
  }
}

template <typename T>
__global__ void scale_kernel(T* dst, std::int64_t n, T value) {
  TANDEM_GRID_LOOP(i, n) { dst[i] *= value; }
}

template <typename S>
__global__ void fill_kernel(S* dst, std::int64_t n, S value, bool contiguous, StridedWalk<1> walk) {
  TANDEM_GRID_LOOP(i, n) {
    std::int64_t o[1] = {i};
    if (!contiguous) walk.offsets(i, o);
    dst[o[0]] = value;
  }
}

template <typename S>
__global__ void equal_kernel(const S* a, const S* b, std::uint8_t* y, std::int64_t n, DType dtype) {
  TANDEM_GRID_LOOP(i, n) { y[i] = stored_to_double(a[i], dtype) == stored_to_double(b[i], dtype); }
}

template <typename S, typename D>
__global__ void cast_kernel(const S* x, D* y, std::int64_t n, DType from, DType to) {
  TANDEM_GRID_LOOP(i, n) { y[i] = stored_from_double<D>(stored_to_double(x[i], from), to); }
}

template <typename T>
Tensor map(const char* name, const Tensor& x, Map m, double p0, double p1) {
  check_gpu_operands(name, {&x});
  Tensor y = new_like(x.shape(), x);
  const std::int64_t n = y.numel();
  if (n == 0) return y;
  const OnDevice on(x);
  const bool contiguous = x.is_contiguous();
  const StridedWalk<1> walk =
      contiguous ? StridedWalk<1>{} : make_walk<1>(x.shape(), {x.strides()}, name);
  map_kernel<T><<<blocks_for(n), kThreads, 0, on.stream()>>>(
      ptr<const T>(x), ptr<T>(y), n, m, static_cast<T>(p0), static_cast<T>(p1), contiguous, walk);
  TANDEM_CUDA_LAUNCHED(name);
  return y;
}

Tensor map_floating(const char* name, const Tensor& x, Map m, double p0 = 0, double p1 = 0) {
  return visit_floating(x.dtype(), name, [&]<typename T>() { return map<T>(name, x, m, p0, p1); });
}

// y = z(a, b) with a and b broadcast to a common shape; y contiguous.
Tensor zip(const char* name, const Tensor& a, const Tensor& b, Zip z, bool floating_only) {
  check_gpu_operands(name, {&a, &b});
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor y = new_like(shape, a);
  const std::int64_t n = y.numel();
  if (n == 0) return y;
  const OnDevice on(a);
  const bool contiguous = a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous();
  const StridedWalk<2> walk =
      contiguous
          ? StridedWalk<2>{}
          : make_walk<2>(shape, {broadcast_strides(a, shape), broadcast_strides(b, shape)}, name);
  const auto launch = [&]<typename T>() {
    zip_kernel<T><<<blocks_for(n), kThreads, 0, on.stream()>>>(ptr<const T>(a), ptr<const T>(b),
                                                               ptr<T>(y), n, z, contiguous, walk);
    TANDEM_CUDA_LAUNCHED(name);
  };
  if (floating_only) {
    visit_floating(a.dtype(), name, launch);
  } else {
    visit_arithmetic(a.dtype(), name, launch);
  }
  return y;
}

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "add";
    case BinaryOp::Sub:
      return "sub";
    case BinaryOp::Mul:
      return "mul";
    case BinaryOp::Div:
      return "div";
  }
  return "binary";
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Zip z = Zip::Add;
  switch (op) {
    case BinaryOp::Add:
      z = Zip::Add;
      break;
    case BinaryOp::Sub:
      z = Zip::Sub;
      break;
    case BinaryOp::Mul:
      z = Zip::Mul;
      break;
    case BinaryOp::Div:
      z = Zip::Div;
      break;
  }
  return zip(binary_name(op), a, b, z, /*floating_only=*/false);
}

Tensor affine(const Tensor& x, double scale, double shift) {
  return map_floating("affine", x, Map::Affine, scale, shift);
}

Tensor reciprocal_scaled(const Tensor& x, double numerator) {
  return map_floating("rdiv", x, Map::Rdiv, numerator);
}

Tensor pow_scalar(const Tensor& x, double exponent) {
  return exponent == 2.0 ? map_floating("pow", x, Map::Square)
                         : map_floating("pow", x, Map::Pow, exponent);
}

Tensor unary(UnaryOp op, const Tensor& x) {
  Map m = Map::Neg;
  switch (op) {
    case UnaryOp::Neg:
      m = Map::Neg;
      break;
    case UnaryOp::Exp:
      m = Map::Exp;
      break;
    case UnaryOp::Log:
      m = Map::Log;
      break;
    case UnaryOp::Sqrt:
      m = Map::Sqrt;
      break;
    case UnaryOp::Abs:
      m = Map::Abs;
      break;
    case UnaryOp::Relu:
      m = Map::Relu;
      break;
    case UnaryOp::Gelu:
      m = Map::Gelu;
      break;
    case UnaryOp::Sigmoid:
      m = Map::Sigmoid;
      break;
    case UnaryOp::Tanh:
      m = Map::Tanh;
      break;
  }
  return map_floating("unary op", x, m);
}

Tensor relu_backward(const Tensor& grad_out, const Tensor& y) {
  TANDEM_CHECK(grad_out.shape() == y.shape(), "relu_backward: gradient ", show(grad_out.shape()),
               " and output ", show(y.shape()), " differ in shape");
  return zip("relu_backward", grad_out, y, Zip::ReluBackward, /*floating_only=*/true);
}

Tensor gelu_backward(const Tensor& grad_out, const Tensor& x) {
  TANDEM_CHECK(grad_out.shape() == x.shape(), "gelu_backward: gradient ", show(grad_out.shape()),
               " and input ", show(x.shape()), " differ in shape");
  return zip("gelu_backward", grad_out, x, Zip::GeluBackward, /*floating_only=*/true);
}

void add_(const Tensor& dst, const Tensor& src, double alpha) {
  check_gpu_operands("add_", {&dst, &src});
  TANDEM_CHECK(dst.shape() == src.shape(), "add_: destination ", show(dst.shape()), " and source ",
               show(src.shape()), " differ in shape");
  TANDEM_CHECK(dst.is_contiguous(), "add_: destination must be contiguous");
  const std::int64_t n = dst.numel();
  if (n == 0) return;
  const OnDevice on(dst);
  const bool contiguous = src.is_contiguous();
  const StridedWalk<1> walk =
      contiguous ? StridedWalk<1>{} : make_walk<1>(src.shape(), {src.strides()}, "add_");
  visit_floating(dst.dtype(), "add_", [&]<typename T>() {
    accumulate_kernel<T><<<blocks_for(n), kThreads, 0, on.stream()>>>(
        ptr<T>(dst), ptr<const T>(src), n, static_cast<T>(alpha), contiguous, walk);
    TANDEM_CUDA_LAUNCHED("add_");
  });
}

void scale_(const Tensor& dst, double value) {
  check_gpu_operands("scale_", {&dst});
  TANDEM_CHECK(dst.is_contiguous(), "scale_: destination must be contiguous");
  const std::int64_t n = dst.numel();
  if (n == 0) return;
  const OnDevice on(dst);
  visit_floating(dst.dtype(), "scale_", [&]<typename T>() {
    scale_kernel<T>
        <<<blocks_for(n), kThreads, 0, on.stream()>>>(ptr<T>(dst), n, static_cast<T>(value));
    TANDEM_CUDA_LAUNCHED("scale_");
  });
}

void fill_(const Tensor& dst, double value) {
  check_gpu_operands("fill_", {&dst});
  const std::int64_t n = dst.numel();
  if (n == 0) return;
  const OnDevice on(dst);
  const bool contiguous = dst.is_contiguous();
  const StridedWalk<1> walk =
      contiguous ? StridedWalk<1>{} : make_walk<1>(dst.shape(), {dst.strides()}, "fill_");
  visit_stored(dst.dtype(), [&]<typename S>() {
    const S v = host_stored_from_double<S>(value, dst.dtype());
    fill_kernel<S>
        <<<blocks_for(n), kThreads, 0, on.stream()>>>(ptr<S>(dst), n, v, contiguous, walk);
    TANDEM_CUDA_LAUNCHED("fill_");
  });
}

Tensor equal(const Tensor& a, const Tensor& b) {
  check_gpu_operands("equal", {&a, &b});
  TANDEM_CHECK(a.shape() == b.shape(), "equal: shapes ", show(a.shape()), " and ", show(b.shape()),
               " differ");
  const Tensor ac = contig(a), bc = contig(b);
  Tensor y = empty(a.shape(), {.dtype = DType::UInt8, .device = a.device()});
  const std::int64_t n = y.numel();
  if (n == 0) return y;
  const OnDevice on(a);
  visit_stored(a.dtype(), [&]<typename S>() {
    equal_kernel<S><<<blocks_for(n), kThreads, 0, on.stream()>>>(
        ptr<const S>(ac), ptr<const S>(bc), ptr<std::uint8_t>(y), n, a.dtype());
    TANDEM_CUDA_LAUNCHED("equal");
  });
  return y;
}

Tensor cast(const Tensor& x, DType dtype) {
  check_gpu_operands("cast", {&x});
  if (x.dtype() == dtype) return x;
  const Tensor xc = contig(x);
  Tensor y = empty(x.shape(), {.dtype = dtype, .device = x.device()});
  const std::int64_t n = y.numel();
  if (n == 0) return y;
  const OnDevice on(x);
  visit_stored(x.dtype(), [&]<typename S>() {
    visit_stored(dtype, [&]<typename D>() {
      cast_kernel<S, D><<<blocks_for(n), kThreads, 0, on.stream()>>>(ptr<const S>(xc), ptr<D>(y), n,
                                                                     x.dtype(), dtype);
      TANDEM_CUDA_LAUNCHED("cast");
    });
  });
  return y;
}

}  // namespace tandem::ops::cuda
