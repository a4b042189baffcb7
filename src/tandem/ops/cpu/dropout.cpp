// The dropout mask on the CPU: each element is 1 / (1 - p) with probability 1 - p and 0
// otherwise, drawn in order from the given Generator (one uniform float per element), so a
// generator in a known state gives a known mask.
#include "tandem/ops/cpu/common.h"
#include "tandem/ops/ops.h"

namespace tandem::ops {

Tensor dropout_mask(const Shape& shape, double p, DType dtype, Device device,
                    Generator& generator) {
  if (device.is_cuda()) return cuda::dropout_mask(shape, p, dtype, device, generator);
  TANDEM_CHECK(p >= 0.0 && p < 1.0, "dropout: probability must be in [0, 1), got ", p);
  TANDEM_CHECK(device.is_cpu(), "dropout: mask requested on ", device,
               ", but this build draws dropout masks only on the cpu");
  Tensor mask = empty(shape, {.dtype = dtype, .device = device});
  const double keep = 1.0 - p;
  const double scale = 1.0 / keep;
  visit_floating(dtype, "dropout", [&]<typename T>() {
    T* m = mask.data<T>();
    const std::int64_t n = mask.numel();
    for (std::int64_t i = 0; i < n; ++i) {
      m[i] = static_cast<double>(generator.uniform()) < keep ? static_cast<T>(scale) : T(0);
    }
  });
  return mask;
}

}  // namespace tandem::ops
