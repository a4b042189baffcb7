// Copies of strided GPU tensors, on the GPU: contiguous copies, and copies between any strides
// (registered as the tensor layer's strided copy for CUDA tensors); one thread per element,
// moving elements as unsigned integers of their size (any dtype).
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

// y[walk's first offset] = x[its second], for each of the n elements of the shape walked.
template <typename U>
__global__ void scatter_kernel(const U* x, U* y, std::int64_t n, StridedWalk<2> walk) {
  TANDEM_GRID_LOOP(i, n) {
    std::int64_t o[2];
    walk.offsets(i, o);
    y[o[0]] = x[o[1]];
  }
}

// Calls f.template operator()<U>() with U the unsigned integer of the dtype's element size.
template <typename F>
void by_element_size(DType dtype, F&& f) {
  switch (element_size(dtype)) {
    case 1: f.template operator()<std::uint8_t>(); break;
    case 2: f.template operator()<std::uint16_t>(); break;
    case 4: f.template operator()<std::uint32_t>(); break;
    default: f.template operator()<std::uint64_t>(); break;
  }
}

// The tensor layer's strided copy on GPUs (copy_into, contiguous_copy), registered at start-up.
[[maybe_unused]] const bool registered = [] {
  register_strided_copy(DeviceType::CUDA, &copy_strided);
  return true;
}();

}  // namespace

void copy_strided(const Tensor& dst, const Tensor& src) {
  check_gpu_operands("copy", {&dst, &src});
  TANDEM_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype(), "copy: destination ",
               show(dst.shape()), " ", dst.dtype(), " and source ", show(src.shape()), " ",
               src.dtype(), " differ");
  const std::int64_t n = dst.numel();
  if (n == 0) return;
  const OnDevice on(dst);
  const StridedWalk<2> walk = make_walk<2>(dst.shape(), {dst.strides(), src.strides()}, "copy");
  by_element_size(dst.dtype(), [&]<typename U>() {
    scatter_kernel<U><<<blocks_for(n), kThreads, 0, on.stream()>>>(ptr<const U>(src),
                                                                     ptr<U>(dst), n, walk);
    TANDEM_CUDA_LAUNCHED("copy_strided");
  });
}

Tensor contiguous(const Tensor& x) {
  check_gpu_operands("contiguous", {&x});
  if (x.is_contiguous()) return x;
  Tensor y = new_like(x.shape(), x);
  const std::int64_t n = y.numel();
  if (n == 0) return y;
  const OnDevice on(x);
  const StridedWalk<1> walk = make_walk<1>(x.shape(), {x.strides()}, "contiguous");
  by_element_size(x.dtype(), [&]<typename U>() {
    gather_kernel<U><<<blocks_for(n), kThreads, 0, on.stream()>>>(ptr<const U>(x), ptr<U>(y), n,
                                                                    walk);
    TANDEM_CUDA_LAUNCHED("contiguous");
  });
  return y;
}

}  // namespace tandem::ops::cuda

// Named by the ops layer's link options (--undefined), so static links keep this file and its
// registration.
extern "C" {
extern const int tandem_cuda_strided_copy_anchor;
const int tandem_cuda_strided_copy_anchor = 1;
}
