// Tensor: a handle to shape, strides, offset and dtype over a shared Storage, plus the autograd
// fields (requires_grad, grad, grad_fn). Copying a Tensor copies the handle, as in PyTorch.
// The differentiable methods (view, sum, operators, backward...) are declared here and defined by
// the autograd layer (autograd/tensor_methods.cpp); this layer holds only data and metadata.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <vector>

#include "tandem/base/check.h"
#include "tandem/base/dtype.h"
#include "tandem/base/shape.h"
#include "tandem/device/device.h"
#include "tandem/tensor/storage.h"

namespace tandem {

namespace autograd {
class Node;
}

class Tensor;
struct TensorImpl;

// Called with the leaf's accumulated gradient as soon as backward has finished producing it.
using GradReadyHook = std::function<void(const Tensor& leaf)>;

struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;                    // accumulated gradient (leaves)
  std::shared_ptr<autograd::Node> grad_fn;             // producer; null for leaves
  std::uint32_t output_nr = 0;                         // which output of grad_fn this is
  std::weak_ptr<autograd::Node> grad_accumulator;      // a leaf's AccumulateGrad, shared by uses
  std::vector<GradReadyHook> grad_ready_hooks;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  std::int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  std::unique_ptr<AutogradMeta> autograd;  // null until autograd needs it
};

struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = kCPU;
  bool requires_grad = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return checked().shape; }
  const Shape& sizes() const { return shape(); }
  std::int64_t size(std::int64_t dim) const;
  std::int64_t dim() const { return static_cast<std::int64_t>(shape().size()); }
  std::int64_t numel() const { return tandem::numel(shape()); }
  const Strides& strides() const { return checked().strides; }
  std::int64_t stride(std::int64_t dim) const;
  std::int64_t offset() const { return checked().offset; }
  DType dtype() const { return checked().dtype; }
  Device device() const { return checked().storage->device(); }
  bool is_contiguous() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * element_size(dtype()); }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  const std::shared_ptr<Storage>& storage() const { return checked().storage; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // ---- raw data (no autograd) ----
  // Address of the first element, to read or write: a layout twin of the storage is dropped
  // first (written back if it held the only copy; see storage.h).
  void* raw_data() const;
  template <typename T>
  T* data() const {
    TANDEM_CHECK(dtype() == DTypeOf<T>::value, "data<", dtype_name(DTypeOf<T>::value),
                 ">: tensor holds ", dtype());
    return static_cast<T*>(raw_data());
  }
  // The single element of a one-element CPU tensor, converted to double.
  double item() const;
  template <typename T>
  T item() const { return static_cast<T>(item()); }
  // Element at a multi-index (CPU tensors, any strides), converted to double; for tests.
  double at(std::initializer_list<std::int64_t> index) const;
  // All elements in logical order, converted to T (CPU); for tests and small reads.
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- autograd fields ----
  bool requires_grad() const;
  Tensor& set_requires_grad(bool requires_grad = true);
  Tensor& requires_grad_(bool requires_grad = true) { return set_requires_grad(requires_grad); }
  Tensor grad() const;  // undefined until a gradient was accumulated
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  bool is_leaf() const { return grad_fn() == nullptr; }
  AutogradMeta& autograd_meta() const;  // creates it on first use
  // Registers a hook run when this leaf's gradient is ready during backward.
  void register_grad_ready_hook(GradReadyHook hook) const;

  // ---- differentiable methods (defined in the autograd layer) ----
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1) const;
  Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor permute(const std::vector<std::int64_t>& dims) const;
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor expand(const Shape& shape) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor sum() const;
  Tensor sum(const std::vector<std::int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<std::int64_t>& dims, bool keepdim = false) const;
  Tensor argmax(std::int64_t dim, bool keepdim = false) const;  // int64, not differentiable
  Tensor detach() const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor pow(double exponent) const;
  Tensor relu() const;
  // Runs backward from this tensor: a scalar (gradient 1) or with `gradient` of the same shape.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // In-place (no autograd): fill and zero, used by optimizers and tests.
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }

 private:
  const TensorImpl& checked() const {
    TANDEM_CHECK(impl_ != nullptr, "tensor: use of an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator-(const Tensor& a);

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

// ---- raw (non-differentiable) construction, used by kernels and the autograd layer ----
// A new tensor over `base`'s storage with the given geometry; no autograd link.
Tensor make_view(const Tensor& base, Shape shape, Strides strides, std::int64_t offset);
// A contiguous copy of any CPU or same-device tensor (no autograd link).
Tensor contiguous_copy(const Tensor& x);
// Copies between devices and converts dtypes (no autograd link); returns x itself if nothing
// changes.
Tensor copy_to(const Tensor& x, Device device);
Tensor convert_dtype(const Tensor& x, DType dtype);
// A handle sharing x's data and geometry but with no autograd meta.
Tensor data_only(const Tensor& x);
// Copies src's values into dst (same shape; any strides; across devices one dtype, and any
// strides on a device whose strided copy is registered, contiguous otherwise).
void copy_into(const Tensor& dst, const Tensor& src);

// A device's copy between two of its tensors of one shape and dtype, any strides (the CUDA kernels
// register theirs, ops/cuda/copy.cu): copy_into and contiguous_copy use it for that device's
// strided tensors instead of refusing them or going through the host.
using StridedCopy = void (*)(const Tensor& dst, const Tensor& src);
void register_strided_copy(DeviceType type, StridedCopy copy);

}  // namespace tandem
