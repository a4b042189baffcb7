// Differentiable views and copies: view/reshape/flatten, transpose/permute, slice/narrow/select,
// (un)squeeze, expand, contiguous/clone, and moves between devices and dtypes. Views share the
// input's storage; their backward maps the gradient back to the input's geometry.
#include <algorithm>
#include <numeric>

#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"
#include "tandem/tensor/factories.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

namespace {

// The gradient reshaped to `shape` (copying when it is not contiguous).
Tensor reshape_grad(const Tensor& g, const Shape& shape) {
  Tensor c = g.is_contiguous() ? g : contiguous_copy(g);
  return make_view(c, shape, contiguous_strides(shape), c.offset());
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  const Shape s = infer_shape(shape, x.numel(), "view");
  TANDEM_CHECK(x.is_contiguous(), "view: tensor of shape ", show(x.shape()),
               " is not contiguous; use reshape() (which copies) or contiguous() first");
  Tensor y = make_view(x, s, contiguous_strides(s), x.offset());
  record("view", {x}, {y}, [xs = x.shape()](Grads& g, const Node&) {
    return Grads{reshape_grad(g[0], xs)};
  });
  return y;
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  return x.is_contiguous() ? view(x, shape) : view(contiguous(x), shape);
}

Tensor flatten(const Tensor& x, std::int64_t start_dim, std::int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  const std::int64_t s = wrap_dim(start_dim, x.dim(), "flatten");
  const std::int64_t e = wrap_dim(end_dim, x.dim(), "flatten");
  TANDEM_CHECK(s <= e, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape out;
  for (std::int64_t i = 0; i < s; ++i) out.push_back(x.size(i));
  std::int64_t merged = 1;
  for (std::int64_t i = s; i <= e; ++i) merged *= x.size(i);
  out.push_back(merged);
  for (std::int64_t i = e + 1; i < x.dim(); ++i) out.push_back(x.size(i));
  return reshape(x, out);
}

Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims) {
  TANDEM_CHECK(static_cast<std::int64_t>(dims.size()) == x.dim(), "permute: ", dims.size(),
               " dims for a tensor of shape ", show(x.shape()));
  std::vector<std::int64_t> perm(dims.size());
  std::vector<bool> used(dims.size(), false);
  Shape shape(dims.size());
  Strides strides(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto d = static_cast<std::size_t>(wrap_dim(dims[i], x.dim(), "permute"));
    TANDEM_CHECK(!used[d], "permute: dimension ", d, " appears twice");
    used[d] = true;
    perm[i] = static_cast<std::int64_t>(d);
    shape[i] = x.shape()[d];
    strides[i] = x.strides()[d];
  }
  Tensor y = make_view(x, shape, strides, x.offset());
  record("permute", {x}, {y}, [perm](Grads& g, const Node&) {
    std::vector<std::int64_t> inverse(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) inverse[static_cast<std::size_t>(perm[i])] = static_cast<std::int64_t>(i);
    Shape s(perm.size());
    Strides st(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) {
      s[i] = g[0].shape()[static_cast<std::size_t>(inverse[i])];
      st[i] = g[0].strides()[static_cast<std::size_t>(inverse[i])];
    }
    return Grads{make_view(g[0], s, st, g[0].offset())};
  });
  return y;
}

Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1) {
  std::vector<std::int64_t> dims(static_cast<std::size_t>(x.dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[static_cast<std::size_t>(wrap_dim(dim0, x.dim(), "transpose"))],
            dims[static_cast<std::size_t>(wrap_dim(dim1, x.dim(), "transpose"))]);
  return permute(x, dims);
}

Tensor slice(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t end,
             std::int64_t step) {
  const auto d = static_cast<std::size_t>(wrap_dim(dim, x.dim(), "slice"));
  TANDEM_CHECK(step > 0, "slice: step must be positive, got ", step);
  const std::int64_t len = x.shape()[d];
  if (start < 0) start += len;
  if (end < 0) end += len;
  start = std::clamp<std::int64_t>(start, 0, len);
  end = std::clamp<std::int64_t>(end, start, len);
  Shape shape = x.shape();
  Strides strides = x.strides();
  shape[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  Tensor y = make_view(x, shape, strides, x.offset() + start * x.strides()[d]);
  record("slice", {x}, {y},
         [xs = x.shape(), dtype = x.dtype(), d, start, step, dev = x.device()](Grads& g,
                                                                                const Node&) {
           Tensor gx = zeros(xs, {.dtype = dtype, .device = dev});
           Strides st = gx.strides();
           const std::int64_t off = start * st[d];
           st[d] *= step;
           copy_into(make_view(gx, g[0].shape(), st, off), g[0]);
           return Grads{gx};
         });
  return y;
}

Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "narrow");
  TANDEM_CHECK(start >= 0 && length >= 0 && start + length <= x.size(d), "narrow: range [",
               start, ", ", start + length, ") is outside dimension ", d, " of ", show(x.shape()));
  return slice(x, d, start, start + length);
}

Tensor select(const Tensor& x, std::int64_t dim, std::int64_t index) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "select");
  const std::int64_t len = x.size(d);
  TANDEM_CHECK(index >= -len && index < len, "select: index ", index,
               " is out of range for dimension ", d, " of ", show(x.shape()));
  if (index < 0) index += len;
  return squeeze(narrow(x, d, index, 1), d);
}

Tensor unsqueeze(const Tensor& x, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape s = x.shape();
  Strides st = x.strides();
  const std::int64_t stride = d < x.dim() ? s[static_cast<std::size_t>(d)] * st[static_cast<std::size_t>(d)] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  Tensor y = make_view(x, s, st, x.offset());
  record("unsqueeze", {x}, {y}, [d](Grads& g, const Node&) {
    Shape gs = g[0].shape();
    Strides gst = g[0].strides();
    gs.erase(gs.begin() + d);
    gst.erase(gst.begin() + d);
    return Grads{make_view(g[0], gs, gst, g[0].offset())};
  });
  return y;
}

Tensor squeeze(const Tensor& x, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "squeeze");
  if (x.size(d) != 1) return x;
  Shape s = x.shape();
  Strides st = x.strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  Tensor y = make_view(x, s, st, x.offset());
  record("squeeze", {x}, {y}, [xs = x.shape()](Grads& g, const Node&) {
    return Grads{reshape_grad(g[0], xs)};
  });
  return y;
}

Tensor expand(const Tensor& x, const Shape& shape) {
  TANDEM_CHECK(shape.size() >= x.shape().size(), "expand: cannot expand ", show(x.shape()),
               " to ", show(shape));
  const std::size_t lead = shape.size() - x.shape().size();
  Shape s(shape.size());
  Strides st(shape.size(), 0);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      s[i] = shape[i];
      continue;
    }
    const std::int64_t have = x.shape()[i - lead];
    const std::int64_t want = shape[i] == -1 ? have : shape[i];
    TANDEM_CHECK(have == want || have == 1, "expand: cannot expand ", show(x.shape()), " to ",
                 show(shape));
    s[i] = want;
    st[i] = have == want ? x.strides()[i - lead] : 0;
  }
  Tensor y = make_view(x, s, st, x.offset());
  record("expand", {x}, {y}, [xs = x.shape()](Grads& g, const Node&) {
    return Grads{ops::sum_to_shape(g[0], xs)};
  });
  return y;
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  return clone(x);
}

Tensor clone(const Tensor& x) {
  Tensor y = contiguous_copy(x);
  record("clone", {x}, {y}, [](Grads& g, const Node&) { return Grads{g[0]}; });
  return y;
}

Tensor to_device(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  Tensor y = copy_to(x, device);
  record("to_device", {x}, {y}, [from = x.device()](Grads& g, const Node&) {
    return Grads{copy_to(g[0], from)};
  });
  return y;
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor y = ops::cast(x, dtype);
  record("to_dtype", {x}, {y}, [from = x.dtype()](Grads& g, const Node&) {
    return Grads{ops::cast(g[0], from)};
  });
  return y;
}

}  // namespace tandem
