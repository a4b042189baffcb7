// Tensor metadata, raw element access, autograd fields and printing.
#include "tandem/tensor/tensor.h"

#include <iomanip>

#include "tandem/base/dispatch.h"

namespace tandem {

std::int64_t Tensor::size(std::int64_t d) const {
  return shape()[static_cast<std::size_t>(wrap_dim(d, dim(), "size"))];
}

std::int64_t Tensor::stride(std::int64_t d) const {
  return strides()[static_cast<std::size_t>(wrap_dim(d, dim(), "stride"))];
}

bool Tensor::is_contiguous() const {
  const auto& s = shape();
  const auto& st = strides();
  // No elements, nothing out of place (as torch): contiguous_strides gives (4, 0) strides (1, 1).
  if (numel() == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    if (s[i] != 1 && st[i] != expected) return false;
    expected *= s[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  const TensorImpl& t = checked();
  return static_cast<char*>(t.storage->data()) +
         t.offset * static_cast<std::int64_t>(element_size(t.dtype));
}

double Tensor::item() const {
  TANDEM_CHECK(numel() == 1, "item: tensor of shape ", show(shape()), " has ", numel(),
               " elements, not one");
  Tensor host = copy_to(*this, kCPU);
  return visit_dtype(dtype(), [&]<typename T>() { return to_double(*host.data<T>()); });
}

double Tensor::at(std::initializer_list<std::int64_t> index) const {
  TANDEM_CHECK(device().is_cpu(), "at: tensor is on ", device(), "; copy it to the CPU first");
  TANDEM_CHECK(static_cast<std::int64_t>(index.size()) == dim(), "at: ", index.size(),
               " indices for a tensor of shape ", show(shape()));
  std::int64_t off = 0;
  std::size_t d = 0;
  for (std::int64_t i : index) {
    TANDEM_CHECK(i >= 0 && i < shape()[d], "at: index ", i, " out of range for dimension ", d,
                 " of shape ", show(shape()));
    off += i * strides()[d++];
  }
  return visit_dtype(dtype(), [&]<typename T>() { return to_double(static_cast<const T*>(raw_data())[off]); });
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = contiguous_copy(copy_to(*this, kCPU));
  std::vector<T> out(static_cast<std::size_t>(numel()));
  visit_dtype(dtype(), [&]<typename S>() {
    const S* src = host.data<S>();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(to_double(src[i]));
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;

AutogradMeta& Tensor::autograd_meta() const {
  TensorImpl& t = const_cast<TensorImpl&>(checked());
  if (!t.autograd) t.autograd = std::make_unique<AutogradMeta>();
  return *t.autograd;
}

bool Tensor::requires_grad() const {
  const TensorImpl& t = checked();
  return t.autograd && t.autograd->requires_grad;
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  if (requires_grad) {
    TANDEM_CHECK(is_floating(dtype()), "requires_grad: only floating-point tensors can require "
                 "gradients, this one is ", dtype());
  } else {
    TANDEM_CHECK(is_leaf(), "requires_grad: cannot turn off gradients of a non-leaf tensor; "
                 "use detach()");
  }
  autograd_meta().requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const {
  const TensorImpl& t = checked();
  return t.autograd && t.autograd->grad ? Tensor(t.autograd->grad) : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined()) {
    TANDEM_CHECK(grad.shape() == shape(), "set_grad: gradient of shape ", show(grad.shape()),
                 " for a tensor of shape ", show(shape()));
  }
  autograd_meta().grad = grad.impl_ptr();
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> kNone;
  const TensorImpl& t = checked();
  return t.autograd ? t.autograd->grad_fn : kNone;
}

void Tensor::register_grad_ready_hook(GradReadyHook hook) const {
  TANDEM_CHECK(is_leaf(), "register_grad_ready_hook: only leaf tensors (parameters) have one");
  autograd_meta().grad_ready_hooks.push_back(std::move(hook));
}

Tensor make_view(const Tensor& base, Shape shape, Strides strides, std::int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

Tensor data_only(const Tensor& x) {
  return make_view(x, x.shape(), x.strides(), x.offset());
}

}  // namespace tandem
