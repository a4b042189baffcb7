// bfloat16 convolutions and matrix products on the CPU: the operands are widened to float32
// (exactly), the float32 kernel accumulates in float32, and the result is rounded to bfloat16 —
// the numbers of a bfloat16 kernel with float32 accumulation, not its speed (oneDNN's native
// bfloat16 needs AVX-512). Not for biases: a bfloat16 product takes none (autocast adds it in
// float32). Shapes as in ops.h.
#pragma once

#include "tandem/ops/ops.h"

namespace tandem::ops::cpu::bf16 {

// Whether an op's operands are bfloat16 (the first defined one decides; the op checks the rest).
bool applies(const Tensor& first);

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p);
Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& w, const Shape& x_shape,
                             const Conv2dParams& p);
void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Shape& w_shape,
                             const Conv2dParams& p, Tensor* grad_w, Tensor* grad_b);
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b);
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
Tensor linear_backward_input(const Tensor& grad_out, const Tensor& w);
void linear_backward_weights(const Tensor& grad_out, const Tensor& x, Tensor* grad_w,
                             Tensor* grad_b);

}  // namespace tandem::ops::cpu::bf16
