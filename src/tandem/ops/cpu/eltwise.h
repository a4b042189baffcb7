// oneDNN eltwise primitives (relu, gelu) on contiguous float32 tensors, forward and backward; the
// activation kernels in elementwise.cpp use them for float32 and keep loops for float64.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "tandem/tensor/tensor.h"

namespace tandem::ops::cpu {

// y = f(x); x contiguous float32.
Tensor eltwise_forward(dnnl::algorithm algorithm, const Tensor& x);
// grad_in = grad_out * f'(at); `at` is x, or y for *_use_dst_for_bwd algorithms. Both contiguous
// float32 of one shape.
Tensor eltwise_backward(dnnl::algorithm algorithm, const Tensor& grad_out, const Tensor& at);

}  // namespace tandem::ops::cpu
