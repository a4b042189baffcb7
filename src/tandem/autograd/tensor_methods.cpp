// The differentiable Tensor methods and operators declared in tensor/tensor.h, forwarding to
// the functions of autograd/functions.h, and Tensor::backward.
#include "tandem/autograd/engine.h"
#include "tandem/autograd/functions.h"
#include "tandem/tensor/factories.h"

namespace tandem {

Tensor Tensor::view(const Shape& s) const { return tandem::view(*this, s); }
Tensor Tensor::reshape(const Shape& s) const { return tandem::reshape(*this, s); }
Tensor Tensor::flatten(std::int64_t a, std::int64_t b) const { return tandem::flatten(*this, a, b); }
Tensor Tensor::transpose(std::int64_t a, std::int64_t b) const {
  return tandem::transpose(*this, a, b);
}
Tensor Tensor::permute(const std::vector<std::int64_t>& d) const { return tandem::permute(*this, d); }
Tensor Tensor::narrow(std::int64_t d, std::int64_t s, std::int64_t l) const {
  return tandem::narrow(*this, d, s, l);
}
Tensor Tensor::slice(std::int64_t d, std::int64_t s, std::int64_t e, std::int64_t st) const {
  return tandem::slice(*this, d, s, e, st);
}
Tensor Tensor::select(std::int64_t d, std::int64_t i) const { return tandem::select(*this, d, i); }
Tensor Tensor::unsqueeze(std::int64_t d) const { return tandem::unsqueeze(*this, d); }
Tensor Tensor::squeeze(std::int64_t d) const { return tandem::squeeze(*this, d); }
Tensor Tensor::expand(const Shape& s) const { return tandem::expand(*this, s); }
Tensor Tensor::contiguous() const { return tandem::contiguous(*this); }
Tensor Tensor::clone() const { return tandem::clone(*this); }
Tensor Tensor::to(Device d) const { return tandem::to_device(*this, d); }
Tensor Tensor::to(DType t) const { return tandem::to_dtype(*this, t); }
Tensor Tensor::sum() const { return tandem::sum(*this); }
Tensor Tensor::sum(const std::vector<std::int64_t>& d, bool k) const { return tandem::sum(*this, d, k); }
Tensor Tensor::mean() const { return tandem::mean(*this); }
Tensor Tensor::mean(const std::vector<std::int64_t>& d, bool k) const {
  return tandem::mean(*this, d, k);
}
Tensor Tensor::argmax(std::int64_t d, bool k) const { return tandem::argmax(*this, d, k); }
Tensor Tensor::detach() const { return data_only(*this); }
Tensor Tensor::neg() const { return tandem::neg(*this); }
Tensor Tensor::exp() const { return tandem::exp(*this); }
Tensor Tensor::log() const { return tandem::log(*this); }
Tensor Tensor::sqrt() const { return tandem::sqrt(*this); }
Tensor Tensor::pow(double e) const { return tandem::pow(*this, e); }
Tensor Tensor::relu() const { return tandem::relu(*this); }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::run_backward({*this}, {gradient}, retain_graph);
}

Tensor& Tensor::fill_(double value) {
  ops::fill_(*this, value);
  return *this;
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return affine(a, 1.0, b); }
Tensor operator-(const Tensor& a, double b) { return affine(a, 1.0, -b); }
Tensor operator*(const Tensor& a, double b) { return affine(a, b, 0.0); }
Tensor operator/(const Tensor& a, double b) { return affine(a, 1.0 / b, 0.0); }
Tensor operator+(double a, const Tensor& b) { return affine(b, 1.0, a); }
Tensor operator-(double a, const Tensor& b) { return affine(b, -1.0, a); }
Tensor operator*(double a, const Tensor& b) { return affine(b, a, 0.0); }
Tensor operator-(const Tensor& a) { return neg(a); }

}  // namespace tandem
