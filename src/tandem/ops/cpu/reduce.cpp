// Reductions on the CPU: sum over any set of dims (accumulated in double for accuracy and
// determinism), the broadcast-gradient reduction sum_to_shape, and argmax along one dim.
#include <algorithm>

#include "tandem/ops/cpu/common.h"
#include "tandem/ops/geometry.h"
#include "tandem/ops/ops.h"
#include "tandem/tensor/strided.h"

namespace tandem::ops {

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  if (cpu::on_gpu({&x})) return cuda::sum(x, dims, keepdim);
  cpu::check_operands("sum", {&x});
  const std::int64_t rank = x.dim();
  std::vector<bool> reduce(static_cast<std::size_t>(rank), dims.empty());
  for (auto d : dims) reduce[static_cast<std::size_t>(wrap_dim(d, rank, "sum"))] = true;

  Shape kept;        // output shape with reduced dims as 1
  Shape out_shape;   // final output shape
  for (std::int64_t i = 0; i < rank; ++i) {
    const bool r = reduce[static_cast<std::size_t>(i)];
    kept.push_back(r ? 1 : x.shape()[static_cast<std::size_t>(i)]);
    if (!r || keepdim) out_shape.push_back(kept.back());
  }
  // Accumulator strides: 0 along reduced dims.
  Strides acc_strides = contiguous_strides(kept);
  for (std::int64_t i = 0; i < rank; ++i) {
    if (reduce[static_cast<std::size_t>(i)]) acc_strides[static_cast<std::size_t>(i)] = 0;
  }
  std::vector<double> acc(static_cast<std::size_t>(numel(kept)), 0.0);
  Tensor y = cpu::new_like(out_shape, x);
  visit_dtype(x.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, std::uint8_t>) {
      TANDEM_FAIL("sum: unsupported dtype ", x.dtype());
    } else {
      const T* px = static_cast<const T*>(x.raw_data());
      strided_loop<2>(x.shape(), {acc_strides, x.strides()}, {0, 0},
                      [&](const std::array<std::int64_t, 2>& o) {
                        acc[static_cast<std::size_t>(o[0])] += static_cast<double>(px[o[1]]);
                      });
      T* py = static_cast<T*>(y.raw_data());
      for (std::size_t i = 0; i < acc.size(); ++i) py[i] = static_cast<T>(acc[i]);
    }
  });
  return y;
}

Tensor sum_to_shape(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const std::int64_t lead = grad.dim() - static_cast<std::int64_t>(shape.size());
  TANDEM_CHECK(lead >= 0, "sum_to_shape: cannot reduce ", show(grad.shape()), " to ", show(shape));
  std::vector<std::int64_t> dims;
  for (std::int64_t i = 0; i < grad.dim(); ++i) {
    if (i < lead) {
      dims.push_back(i);
    } else if (shape[static_cast<std::size_t>(i - lead)] == 1 &&
               grad.shape()[static_cast<std::size_t>(i)] != 1) {
      dims.push_back(i);
    }
  }
  Tensor s = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  // Drop the leading dims and give exactly `shape`.
  return make_view(contiguous_copy(s), shape, contiguous_strides(shape), 0);
}

Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim) {
  if (cpu::on_gpu({&x})) return cuda::argmax(x, dim, keepdim);
  cpu::check_operands("argmax", {&x});
  const std::int64_t d = wrap_dim(dim, x.dim(), "argmax");
  TANDEM_CHECK(x.dim() > 0 && x.size(d) > 0, "argmax: empty dimension in ", show(x.shape()));
  Tensor xc = cpu::contig(x);
  const AlongDim g = along_dim("argmax", x, d);
  const std::int64_t outer = g.a, len = g.l, inner = g.b;
  const Shape out_shape = shape_without(x, d, keepdim);
  Tensor y = empty(out_shape, {.dtype = DType::Int64});
  std::int64_t* py = y.data<std::int64_t>();
  visit_dtype(x.dtype(), [&]<typename T>() {
    const T* px = static_cast<const T*>(xc.raw_data());
    for (std::int64_t o = 0; o < outer; ++o) {
      for (std::int64_t i = 0; i < inner; ++i) {
        const T* base = px + o * len * inner + i;
        std::int64_t best = 0;
        double best_v = to_double(base[0]);
        for (std::int64_t k = 1; k < len; ++k) {
          const double v = to_double(base[k * inner]);
          if (v > best_v || (v != v && best_v == best_v)) {  // NaN wins, as in PyTorch
            best_v = v;
            best = k;
          }
        }
        py[o * inner + i] = best;
      }
    }
  });
  return y;
}

}  // namespace tandem::ops
