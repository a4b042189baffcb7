// Small helpers shared by the CPU kernels: device and dtype checks with the op's name, the
// hand-off to the CUDA kernels, and making operands contiguous.
#pragma once

#include <initializer_list>

#include "tandem/base/dispatch.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/tensor/factories.h"
#include "tandem/tensor/tensor.h"

namespace tandem::ops::cpu {

// Every defined tensor must be on the CPU (until a backend for its device exists) and all must
// share one dtype.
void check_operands(const char* op, std::initializer_list<const Tensor*> tensors);

// Whether an op goes to the CUDA kernels (cuda/cuda_ops.h): some defined operand is on a GPU.
// They check that all are on that one GPU.
inline bool on_gpu(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (t->defined() && t->device().is_cuda()) return true;
  }
  return false;
}

inline Tensor contig(const Tensor& t) { return t.is_contiguous() ? t : contiguous_copy(t); }

inline Tensor new_like(const Shape& shape, const Tensor& like) {
  return empty(shape, {.dtype = like.dtype(), .device = like.device()});
}

}  // namespace tandem::ops::cpu
