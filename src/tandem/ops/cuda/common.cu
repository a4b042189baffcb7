// Operand checks shared by the CUDA kernels, and whether they are built (see launch.cuh).
#include "tandem/base/check.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/launch.cuh"

namespace tandem::ops::cuda {

bool built() { return true; }

void check_gpu_operands(const char* op, std::initializer_list<const Tensor*> tensors,
                        bool mixed_dtypes) {
  const Tensor* gpu = nullptr;  // the first operand on a GPU: the others must be on it too
  for (const Tensor* t : tensors) {
    if (t != nullptr && t->defined() && t->device().is_cuda()) {
      gpu = t;
      break;
    }
  }
  TANDEM_CHECK(gpu != nullptr, op, ": no operand is on a GPU");
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    TANDEM_CHECK(t->device() == gpu->device(), op, ": operands on different devices (",
                 gpu->device(), " and ", t->device(), "); move them to one device first");
    TANDEM_CHECK(mixed_dtypes || t->dtype() == gpu->dtype(), op, ": dtypes differ (",
                 gpu->dtype(), " and ", t->dtype(), ")");
  }
}

Tensor contig(const Tensor& t) { return t.is_contiguous() ? t : contiguous(t); }

}  // namespace tandem::ops::cuda
