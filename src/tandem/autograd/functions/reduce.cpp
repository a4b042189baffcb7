// Differentiable reductions: sum and mean over dims (the gradient is broadcast back), argmax
// (no gradient).
#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

namespace {

// Broadcasts a reduced gradient back over the reduced dims of `shape`, times `scale`.
// With keepdim or without, the gradient holds exactly the kept elements in order, so it is
// viewed with the reduced dims as size 1.
Tensor expand_reduced(const Tensor& g, const Shape& shape, const std::vector<std::int64_t>& dims,
                      double scale) {
  const std::int64_t rank = static_cast<std::int64_t>(shape.size());
  std::vector<bool> reduced(shape.size(), dims.empty());
  for (auto d : dims) reduced[static_cast<std::size_t>(wrap_dim(d, rank, "sum"))] = true;
  Shape kept(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) kept[i] = reduced[i] ? 1 : shape[i];
  Tensor gc = g.is_contiguous() ? g : contiguous_copy(g);
  Tensor gk = make_view(gc, kept, contiguous_strides(kept), gc.offset());
  // out = broadcast(gk) * scale: a zero-strided view materialised by affine().
  Strides st = gk.strides();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (reduced[i]) st[i] = 0;
  }
  return ops::affine(make_view(gk, shape, st, gk.offset()), scale, 0.0);
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  Tensor y = ops::sum(x, dims, keepdim);
  record("sum", {x}, {y}, [xs = x.shape(), dims](Grads& g, const Node&) {
    return Grads{expand_reduced(g[0], xs, dims, 1.0)};
  });
  return y;
}

Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  std::int64_t count = 1;
  if (dims.empty()) {
    count = x.numel();
  } else {
    for (auto d : dims) count *= x.size(d);
  }
  Tensor s = ops::sum(x, dims, keepdim);
  Tensor y = ops::affine(s, 1.0 / static_cast<double>(count), 0.0);
  record("mean", {x}, {y}, [xs = x.shape(), dims, count](Grads& g, const Node&) {
    return Grads{expand_reduced(g[0], xs, dims, 1.0 / static_cast<double>(count))};
  });
  return y;
}

Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim) {
  return ops::argmax(x, dim, keepdim);
}

}  // namespace tandem
