// Concatenation on the CPU: each input is copied into its slab of a new contiguous tensor (any
// input strides, any dtype). Inputs must share rank, dtype and every dim except `dim`.
#include "tandem/ops/cpu/common.h"
#include "tandem/ops/ops.h"

namespace tandem::ops {

Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  TANDEM_CHECK(!tensors.empty(), "cat: expected at least one tensor");
  const Tensor& first = tensors.front();
  TANDEM_CHECK(first.dim() > 0, "cat: cannot concatenate 0-d tensors");
  const std::int64_t d = wrap_dim(dim, first.dim(), "cat");
  Shape out_shape = first.shape();
  out_shape[static_cast<std::size_t>(d)] = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TANDEM_CHECK(t.defined(), "cat: tensor ", i, " is undefined");
    TANDEM_CHECK(t.device().is_cpu(), "cat: tensor ", i, " is on ", t.device(),
                 ", but this build runs cat only on the cpu");
    TANDEM_CHECK(t.dtype() == first.dtype(), "cat: tensor ", i, " is ", t.dtype(),
                 " but tensor 0 is ", first.dtype());
    bool same = t.dim() == first.dim();
    for (std::int64_t k = 0; same && k < t.dim(); ++k) same = k == d || t.size(k) == first.size(k);
    TANDEM_CHECK(same, "cat: tensor ", i, " of shape ", show(t.shape()),
                 " does not match tensor 0 of shape ", show(first.shape()),
                 " in every dimension except ", d);
    out_shape[static_cast<std::size_t>(d)] += t.size(d);
  }
  Tensor y = cpu::new_like(out_shape, first);
  std::int64_t start = 0;
  for (const Tensor& t : tensors) {
    if (t.numel() > 0) copy_into(make_view(y, t.shape(), y.strides(), start * y.stride(d)), t);
    start += t.size(d);
  }
  return y;
}

}  // namespace tandem::ops
