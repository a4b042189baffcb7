// Contiguous copies of strided GPU tensors, on the GPU: one thread per element, moving elements
// as unsigned integers of their size (any dtype).
#include <cuda_runtime.h>

#include <cstdint>

#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/launch.cuh"
#include "tandem/ops/cuda/strided.cuh"

namespace tandem::ops::cuda {
namespace {

template <typename U>
__global__ void gather_kernel(const U* x, U* y, std::int64_t n, StridedWalk<1> walk) {
  TANDEM_GRID_LOOP(i, n) {
    std::int64_t o[1];
    walk.offsets(i, o);
    y[i] = x[o[0]];
  }
}

}  // namespace

Tensor contiguous(const Tensor& x) {
  check_gpu_operands("contiguous", {&x});
  if (x.is_contiguous()) return x;
  Tensor y = new_like(x.shape(), x);
  const std::int64_t n = y.numel();
  if (n == 0) return y;
  const OnDevice on(x);
  const StridedWalk<1> walk = make_walk<1>(x.shape(), {x.strides()}, "contiguous");
  const auto launch = [&]<typename U>() {
    gather_kernel<U><<<blocks_for(n), kThreads, 0, on.stream()>>>(ptr<const U>(x), ptr<U>(y), n,
                                                                    walk);
    TANDEM_CUDA_LAUNCHED("contiguous");
  };
  switch (element_size(x.dtype())) {
    case 1: launch.template operator()<std::uint8_t>(); break;
    case 2: launch.template operator()<std::uint16_t>(); break;
    case 4: launch.template operator()<std::uint32_t>(); break;
    default: launch.template operator()<std::uint64_t>(); break;
  }
  return y;
}

}  // namespace tandem::ops::cuda
