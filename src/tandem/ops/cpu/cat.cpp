// Concatenation on the CPU: each input is copied into its slab of a new contiguous tensor (any
// input strides, any dtype). Inputs must share rank, dtype and every dim except `dim`.
#include "tandem/ops/cpu/common.h"
#include "tandem/ops/geometry.h"
#include "tandem/ops/ops.h"

namespace tandem::ops {

Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  if (!tensors.empty() && cpu::on_gpu({&tensors.front()})) return cuda::cat(tensors, dim);
  std::int64_t d = 0;
  const Shape out_shape = cat_shape(tensors, dim, &d);
  const Tensor& first = tensors.front();
  Tensor y = cpu::new_like(out_shape, first);
  std::int64_t start = 0;
  for (const Tensor& t : tensors) {
    if (t.numel() > 0) copy_into(make_view(y, t.shape(), y.strides(), start * y.stride(d)), t);
    start += t.size(d);
  }
  return y;
}

}  // namespace tandem::ops
