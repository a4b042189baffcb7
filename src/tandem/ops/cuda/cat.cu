// Concatenation on the GPU: each input (any strides, any dtype) is copied into its slab of a new
// contiguous tensor by one strided-copy kernel per input. Same checks as cpu/cat.cpp.
#include <cuda_runtime.h>

#include <cstdint>

#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/launch.cuh"
#include "tandem/ops/cuda/strided.cuh"
#include "tandem/ops/geometry.h"

namespace tandem::ops::cuda {
namespace {

// dst[walk offset 0] = src[walk offset 1] for every element of the walked shape.
template <typename U>
__global__ void strided_copy_kernel(U* dst, const U* src, std::int64_t n, StridedWalk<2> walk) {
  TANDEM_GRID_LOOP(i, n) {
    std::int64_t o[2];
    walk.offsets(i, o);
    dst[o[0]] = src[o[1]];
  }
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  std::int64_t d = 0;
  const Shape out_shape = cat_shape(tensors, dim, &d);
  const Tensor& first = tensors.front();
  check_gpu_operands("cat", {&first});
  Tensor y = new_like(out_shape, first);
  const OnDevice on(first);
  std::int64_t start = 0;
  for (const Tensor& t : tensors) {
    const std::int64_t n = t.numel();
    if (n > 0) {
      const StridedWalk<2> walk = make_walk<2>(t.shape(), {y.strides(), t.strides()}, "cat");
      const std::int64_t offset = start * y.stride(d);
      const auto launch = [&]<typename U>() {
        strided_copy_kernel<U><<<blocks_for(n), kThreads, 0, on.stream()>>>(
            ptr<U>(y) + offset, ptr<const U>(t), n, walk);
        TANDEM_CUDA_LAUNCHED("cat");
      };
      switch (element_size(t.dtype())) {
        case 1: launch.template operator()<std::uint8_t>(); break;
        case 2: launch.template operator()<std::uint16_t>(); break;
        case 4: launch.template operator()<std::uint32_t>(); break;
        default: launch.template operator()<std::uint64_t>(); break;
      }
    }
    start += t.size(d);
  }
  return y;
}

}  // namespace tandem::ops::cuda
