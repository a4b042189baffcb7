// bfloat16 convolutions and matrix products on the CPU through the float32 kernels: widen the
// operands, compute, round the result to bfloat16 (nearest even). See bfloat16_products.h.
#include "tandem/ops/cpu/bfloat16_products.h"

#include "tandem/base/check.h"
#include "tandem/ops/cpu/common.h"
#include "tandem/ops/geometry.h"

namespace tandem::ops::cpu::bf16 {
namespace {

// Every defined operand bfloat16 and on the CPU.
void check_bf16(const char* op, std::initializer_list<const Tensor*> tensors) {
  check_operands(op, tensors);
  for (const Tensor* t : tensors) {
    TANDEM_CHECK(!t->defined() || t->dtype() == DType::BFloat16, op,
                 ": expected bfloat16 operands, got ", t->dtype());
  }
}

Tensor widen(const Tensor& t) { return convert_dtype(t, DType::Float32); }
Tensor round_to_bf16(const Tensor& t) { return convert_dtype(t, DType::BFloat16); }

}  // namespace

bool applies(const Tensor& first) { return first.defined() && first.dtype() == DType::BFloat16; }

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  check_bf16("conv2d", {&x, &w});
  check_no_bf16_bias("conv2d", DType::BFloat16, b.defined());
  return round_to_bf16(ops::conv2d(widen(x), widen(w), Tensor(), p));
}

Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& w, const Shape& x_shape,
                             const Conv2dParams& p) {
  check_bf16("conv2d_backward_input", {&grad_out, &w});
  return round_to_bf16(ops::conv2d_backward_input(widen(grad_out), widen(w), x_shape, p));
}

void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Shape& w_shape,
                             const Conv2dParams& p, Tensor* grad_w, Tensor* grad_b) {
  check_bf16("conv2d_backward_weights", {&grad_out, &x});
  check_no_bf16_bias("conv2d_backward_weights", DType::BFloat16, grad_b != nullptr);
  if (!grad_w) return;
  Tensor gw;
  ops::conv2d_backward_weights(widen(grad_out), widen(x), w_shape, p, &gw, nullptr);
  *grad_w = round_to_bf16(gw);
}

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  check_bf16("matmul", {&a, &b});
  return round_to_bf16(ops::matmul(widen(a), widen(b), trans_a, trans_b));
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_bf16("linear", {&x, &w});
  check_no_bf16_bias("linear", DType::BFloat16, b.defined());
  return round_to_bf16(ops::linear(widen(x), widen(w), Tensor()));
}

Tensor linear_backward_input(const Tensor& grad_out, const Tensor& w) {
  check_bf16("linear_backward", {&grad_out, &w});
  return round_to_bf16(ops::linear_backward_input(widen(grad_out), widen(w)));
}

void linear_backward_weights(const Tensor& grad_out, const Tensor& x, Tensor* grad_w,
                             Tensor* grad_b) {
  check_bf16("linear_backward", {&grad_out, &x});
  check_no_bf16_bias("linear_backward", DType::BFloat16, grad_b != nullptr);
  if (!grad_w) return;
  Tensor gw;
  ops::linear_backward_weights(widen(grad_out), widen(x), &gw, nullptr);
  *grad_w = round_to_bf16(gw);
}

}  // namespace tandem::ops::cpu::bf16
