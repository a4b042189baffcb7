// Dropout masks for GPU tensors: drawn on the host from the generator with the CPU kernel (the
// same numbers whatever the device, so a seed gives one mask everywhere), then copied to the GPU.
#include "tandem/ops/cuda/cuda_ops.h"

namespace tandem::ops::cuda {

Tensor dropout_mask(const Shape& shape, double p, DType dtype, Device device,
                    Generator& generator) {
  TANDEM_CHECK(device.is_cuda(), "dropout: mask requested on ", device, ", not on a GPU");
  return ops::dropout_mask(shape, p, dtype, kCPU, generator).to(device);
}

}  // namespace tandem::ops::cuda
