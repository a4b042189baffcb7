// Differentiable concatenation: the gradient of each input is its slab of the output gradient.
#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  Tensor y = ops::cat(tensors, dim);
  const std::int64_t d = wrap_dim(dim, y.dim(), "cat");
  std::vector<std::int64_t> lengths;
  for (const Tensor& t : tensors) lengths.push_back(t.size(d));
  record("cat", tensors, {y}, [d, lengths](Grads& g, const Node& n) {
    Grads out(lengths.size());
    std::int64_t start = 0;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      if (n.needs_input_grad(i)) {
        Shape shape = g[0].shape();
        shape[static_cast<std::size_t>(d)] = lengths[i];
        out[i] = make_view(g[0], shape, g[0].strides(), g[0].offset() + start * g[0].stride(d));
      }
      start += lengths[i];
    }
    return out;
  });
  return y;
}

}  // namespace tandem
