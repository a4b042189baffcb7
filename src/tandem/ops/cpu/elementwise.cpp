// Elementwise kernels on the CPU: binary ops with broadcasting, scalar affine maps, unary math
// and activations with their derivatives, in-place accumulate / scale / fill, casts.
// Same-shape contiguous operands take a flat loop the compiler vectorises; float32 relu and gelu
// (forward and backward) run oneDNN's eltwise primitives (eltwise.cpp).
#include <cmath>
#include <numbers>

#include "tandem/ops/cpu/common.h"
#include "tandem/ops/cpu/eltwise.h"
#include "tandem/ops/ops.h"
#include "tandem/tensor/strided.h"

namespace tandem::ops {
namespace {

// Strides of `t` seen as having shape `out` (broadcast dims get stride 0).
Strides broadcast_strides(const Tensor& t, const Shape& out) {
  Strides s(out.size(), 0);
  const std::size_t lead = out.size() - t.shape().size();
  for (std::size_t i = 0; i < t.shape().size(); ++i) {
    s[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  }
  return s;
}

template <typename T, typename F>
void binary_loop(const Tensor& a, const Tensor& b, const Tensor& y, F f) {
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  T* py = static_cast<T*>(y.raw_data());
  if (a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous()) {
    const std::int64_t n = y.numel();
    for (std::int64_t i = 0; i < n; ++i) py[i] = f(pa[i], pb[i]);
    return;
  }
  strided_loop<3>(y.shape(), {y.strides(), broadcast_strides(a, y.shape()),
                              broadcast_strides(b, y.shape())},
                  {0, 0, 0}, [&](const std::array<std::int64_t, 3>& o) {
                    py[o[0]] = f(pa[o[1]], pb[o[2]]);
                  });
}

// y[i] = f(x[i]) for any x strides; y contiguous.
template <typename T, typename F>
void unary_loop(const Tensor& x, const Tensor& y, F f) {
  const T* px = static_cast<const T*>(x.raw_data());
  T* py = static_cast<T*>(y.raw_data());
  if (x.is_contiguous()) {
    const std::int64_t n = y.numel();
    for (std::int64_t i = 0; i < n; ++i) py[i] = f(px[i]);
    return;
  }
  strided_loop<2>(y.shape(), {y.strides(), x.strides()}, {0, 0},
                  [&](const std::array<std::int64_t, 2>& o) { py[o[0]] = f(px[o[1]]); });
}

template <typename T>
T gelu(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(std::numbers::sqrt2 / 2)));
}

template <typename T>
T gelu_derivative(T x) {
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(std::numbers::sqrt2 / 2)));
  const T pdf = std::exp(T(-0.5) * x * x) * T(0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2);
  return cdf + x * pdf;
}

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
  }
  return "binary";
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  if (cpu::on_gpu({&a, &b})) return cuda::binary(op, a, b);
  const char* name = binary_name(op);
  cpu::check_operands(name, {&a, &b});
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor y = cpu::new_like(shape, a);
  visit_dtype(a.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, BFloat16>) {
      TANDEM_FAIL(name, ": bfloat16 arithmetic is not supported; convert to float32 first");
    } else {
      switch (op) {
        case BinaryOp::Add: binary_loop<T>(a, b, y, [](T u, T v) { return u + v; }); break;
        case BinaryOp::Sub: binary_loop<T>(a, b, y, [](T u, T v) { return u - v; }); break;
        case BinaryOp::Mul: binary_loop<T>(a, b, y, [](T u, T v) { return u * v; }); break;
        case BinaryOp::Div: binary_loop<T>(a, b, y, [](T u, T v) { return u / v; }); break;
      }
    }
  });
  return y;
}

Tensor affine(const Tensor& x, double scale, double shift) {
  if (cpu::on_gpu({&x})) return cuda::affine(x, scale, shift);
  cpu::check_operands("affine", {&x});
  Tensor y = cpu::new_like(x.shape(), x);
  visit_floating(x.dtype(), "affine", [&]<typename T>() {
    const T s = static_cast<T>(scale), b = static_cast<T>(shift);
    unary_loop<T>(x, y, [=](T v) { return v * s + b; });
  });
  return y;
}

Tensor reciprocal_scaled(const Tensor& x, double numerator) {
  if (cpu::on_gpu({&x})) return cuda::reciprocal_scaled(x, numerator);
  cpu::check_operands("rdiv", {&x});
  Tensor y = cpu::new_like(x.shape(), x);
  visit_floating(x.dtype(), "rdiv", [&]<typename T>() {
    const T n = static_cast<T>(numerator);
    unary_loop<T>(x, y, [=](T v) { return n / v; });
  });
  return y;
}

Tensor pow_scalar(const Tensor& x, double exponent) {
  if (cpu::on_gpu({&x})) return cuda::pow_scalar(x, exponent);
  cpu::check_operands("pow", {&x});
  Tensor y = cpu::new_like(x.shape(), x);
  visit_floating(x.dtype(), "pow", [&]<typename T>() {
    const T e = static_cast<T>(exponent);
    if (exponent == 2.0) {
      unary_loop<T>(x, y, [](T v) { return v * v; });
    } else {
      unary_loop<T>(x, y, [=](T v) { return std::pow(v, e); });
    }
  });
  return y;
}

// True when a float32 activation can go to oneDNN (contiguous operands of one shape).
static bool onednn_eltwise(std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = *tensors.begin();
  for (const Tensor* t : tensors) {
    if (t->dtype() != DType::Float32 || !t->is_contiguous() || t->shape() != first->shape()) {
      return false;
    }
  }
  return true;
}

Tensor unary(UnaryOp op, const Tensor& x) {
  if (cpu::on_gpu({&x})) return cuda::unary(op, x);
  cpu::check_operands("unary", {&x});
  if ((op == UnaryOp::Relu || op == UnaryOp::Gelu) && onednn_eltwise({&x})) {
    return cpu::eltwise_forward(
        op == UnaryOp::Relu ? dnnl::algorithm::eltwise_relu : dnnl::algorithm::eltwise_gelu_erf, x);
  }
  Tensor y = cpu::new_like(x.shape(), x);
  visit_floating(x.dtype(), "unary op", [&]<typename T>() {
    switch (op) {
      case UnaryOp::Neg: unary_loop<T>(x, y, [](T v) { return -v; }); break;
      case UnaryOp::Exp: unary_loop<T>(x, y, [](T v) { return std::exp(v); }); break;
      case UnaryOp::Log: unary_loop<T>(x, y, [](T v) { return std::log(v); }); break;
      case UnaryOp::Sqrt: unary_loop<T>(x, y, [](T v) { return std::sqrt(v); }); break;
      case UnaryOp::Abs: unary_loop<T>(x, y, [](T v) { return std::abs(v); }); break;
      case UnaryOp::Relu: unary_loop<T>(x, y, [](T v) { return v > T(0) ? v : T(0); }); break;
      case UnaryOp::Gelu: unary_loop<T>(x, y, [](T v) { return gelu(v); }); break;
      case UnaryOp::Sigmoid:
        unary_loop<T>(x, y, [](T v) { return T(1) / (T(1) + std::exp(-v)); });
        break;
      case UnaryOp::Tanh: unary_loop<T>(x, y, [](T v) { return std::tanh(v); }); break;
    }
  });
  return y;
}

Tensor relu_backward(const Tensor& grad_out, const Tensor& y) {
  if (cpu::on_gpu({&grad_out, &y})) return cuda::relu_backward(grad_out, y);
  cpu::check_operands("relu_backward", {&grad_out, &y});
  if (onednn_eltwise({&grad_out, &y})) {
    return cpu::eltwise_backward(dnnl::algorithm::eltwise_relu_use_dst_for_bwd, grad_out, y);
  }
  Tensor g = cpu::new_like(y.shape(), y);
  visit_floating(y.dtype(), "relu_backward", [&]<typename T>() {
    binary_loop<T>(grad_out, y, g, [](T gv, T yv) { return yv > T(0) ? gv : T(0); });
  });
  return g;
}

Tensor gelu_backward(const Tensor& grad_out, const Tensor& x) {
  if (cpu::on_gpu({&grad_out, &x})) return cuda::gelu_backward(grad_out, x);
  cpu::check_operands("gelu_backward", {&grad_out, &x});
  if (onednn_eltwise({&grad_out, &x})) {
    return cpu::eltwise_backward(dnnl::algorithm::eltwise_gelu_erf, grad_out, x);
  }
  Tensor g = cpu::new_like(x.shape(), x);
  visit_floating(x.dtype(), "gelu_backward", [&]<typename T>() {
    binary_loop<T>(grad_out, x, g, [](T gv, T xv) { return gv * gelu_derivative(xv); });
  });
  return g;
}

void add_(const Tensor& dst, const Tensor& src, double alpha) {
  if (cpu::on_gpu({&dst, &src})) return cuda::add_(dst, src, alpha);
  cpu::check_operands("add_", {&dst, &src});
  TANDEM_CHECK(dst.shape() == src.shape(), "add_: destination ", show(dst.shape()),
               " and source ", show(src.shape()), " differ in shape");
  TANDEM_CHECK(dst.is_contiguous(), "add_: destination must be contiguous");
  visit_floating(dst.dtype(), "add_", [&]<typename T>() {
    T* d = static_cast<T*>(dst.raw_data());
    const T a = static_cast<T>(alpha);
    if (src.is_contiguous()) {
      const T* s = static_cast<const T*>(src.raw_data());
      const std::int64_t n = dst.numel();
      if (alpha == 1.0) {
        for (std::int64_t i = 0; i < n; ++i) d[i] += s[i];
      } else {
        for (std::int64_t i = 0; i < n; ++i) d[i] += a * s[i];
      }
    } else {
      const T* s = static_cast<const T*>(src.raw_data());
      strided_loop<2>(dst.shape(), {dst.strides(), src.strides()}, {0, 0},
                      [&](const std::array<std::int64_t, 2>& o) { d[o[0]] += a * s[o[1]]; });
    }
  });
}

void scale_(const Tensor& dst, double value) {
  if (cpu::on_gpu({&dst})) return cuda::scale_(dst, value);
  cpu::check_operands("scale_", {&dst});
  TANDEM_CHECK(dst.is_contiguous(), "scale_: destination must be contiguous");
  visit_floating(dst.dtype(), "scale_", [&]<typename T>() {
    T* d = static_cast<T*>(dst.raw_data());
    const T v = static_cast<T>(value);
    for (std::int64_t i = 0, n = dst.numel(); i < n; ++i) d[i] *= v;
  });
}

void fill_(const Tensor& dst, double value) {
  if (cpu::on_gpu({&dst})) return cuda::fill_(dst, value);
  cpu::check_operands("fill_", {&dst});
  visit_dtype(dst.dtype(), [&]<typename T>() {
    T* d = static_cast<T*>(dst.raw_data());
    const T v = from_double<T>(value);
    strided_loop<1>(dst.shape(), {dst.strides()}, {0},
                    [&](const std::array<std::int64_t, 1>& o) { d[o[0]] = v; });
  });
}

Tensor equal(const Tensor& a, const Tensor& b) {
  if (cpu::on_gpu({&a, &b})) return cuda::equal(a, b);
  cpu::check_operands("equal", {&a, &b});
  TANDEM_CHECK(a.shape() == b.shape(), "equal: shapes ", show(a.shape()), " and ",
               show(b.shape()), " differ");
  Tensor ac = cpu::contig(a), bc = cpu::contig(b);
  Tensor y = empty(a.shape(), {.dtype = DType::UInt8});
  std::uint8_t* py = y.data<std::uint8_t>();
  visit_dtype(a.dtype(), [&]<typename T>() {
    const T* pa = static_cast<const T*>(ac.raw_data());
    const T* pb = static_cast<const T*>(bc.raw_data());
    for (std::int64_t i = 0, n = a.numel(); i < n; ++i) {
      py[i] = to_double(pa[i]) == to_double(pb[i]) ? 1 : 0;
    }
  });
  return y;
}

Tensor cast(const Tensor& x, DType dtype) {
  if (cpu::on_gpu({&x})) return cuda::cast(x, dtype);
  cpu::check_operands("cast", {&x});
  return convert_dtype(x, dtype);
}

}  // namespace tandem::ops
