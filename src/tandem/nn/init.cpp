// torch.nn.init re-created: values are drawn on the host from a tandem Generator (float64 draws,
// rounded to the tensor's dtype) and written into the tensor's own storage.
#include "tandem/nn/init.h"

#include <cmath>
#include <vector>

#include "tandem/autograd/grad_mode.h"
#include "tandem/base/dispatch.h"
#include "tandem/tensor/factories.h"

namespace tandem::nn::init {
namespace {

// Writes draw() into every element of t, in logical order. CPU-contiguous tensors are filled in
// place; anything else is filled through a host staging tensor.
template <typename Draw>
Tensor fill_with(const Tensor& t, const char* op, Draw&& draw) {
  TANDEM_CHECK(t.defined(), "init::", op, ": undefined tensor");
  TANDEM_CHECK(is_floating(t.dtype()), "init::", op, ": expected a floating tensor, got ",
               t.dtype());
  NoGradGuard no_grad;
  const bool direct = t.device().is_cpu() && t.is_contiguous();
  Tensor host = direct ? t : empty(t.shape(), {.dtype = t.dtype()});
  visit_dtype(t.dtype(), [&]<typename T>() {
    T* p = static_cast<T*>(host.raw_data());
    const std::int64_t n = host.numel();
    for (std::int64_t i = 0; i < n; ++i) p[i] = from_double<T>(draw());
  });
  if (!direct) copy_into(t, copy_to(host, t.device()));
  return t;
}

Generator& pick(Generator* generator) { return generator ? *generator : default_generator(); }

double kaiming_std(const Tensor& t, const KaimingOptions& o, const char* op) {
  TANDEM_CHECK(t.dim() >= 2, "init::", op, ": fan in and fan out can not be computed for a ",
               "tensor of shape ", show(t.shape()), " (fewer than 2 dimensions)");
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const std::int64_t fan = o.mode == FanMode::FanIn ? fan_in : fan_out;
  TANDEM_CHECK(fan > 0, "init::", op, ": zero fan for a tensor of shape ", show(t.shape()));
  return calculate_gain(o.nonlinearity, o.a) / std::sqrt(static_cast<double>(fan));
}

double xavier_std(const Tensor& t, double gain, const char* op) {
  TANDEM_CHECK(t.dim() >= 2, "init::", op, ": fan in and fan out can not be computed for a ",
               "tensor of shape ", show(t.shape()), " (fewer than 2 dimensions)");
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  TANDEM_CHECK(fan_in + fan_out > 0, "init::", op, ": zero fans for a tensor of shape ",
               show(t.shape()));
  return gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
}

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv1d:
    case Nonlinearity::Conv2d:
    case Nonlinearity::Conv3d:
    case Nonlinearity::ConvTranspose1d:
    case Nonlinearity::ConvTranspose2d:
    case Nonlinearity::ConvTranspose3d:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::Relu:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyRelu: {
      const double slope = param.value_or(0.01);
      return std::sqrt(2.0 / (1.0 + slope * slope));
    }
    case Nonlinearity::Selu:
      return 3.0 / 4.0;
  }
  TANDEM_FAIL("init::calculate_gain: unknown nonlinearity");
}

std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor) {
  TANDEM_CHECK(tensor.dim() >= 2, "init::calculate_fan_in_and_fan_out: tensor of shape ",
               show(tensor.shape()), " has fewer than 2 dimensions");
  std::int64_t receptive = 1;
  for (std::int64_t d = 2; d < tensor.dim(); ++d) receptive *= tensor.size(d);
  return {tensor.size(1) * receptive, tensor.size(0) * receptive};
}

Tensor uniform_(const Tensor& tensor, double low, double high, Generator* generator) {
  TANDEM_CHECK(low <= high, "init::uniform_: low ", low, " is above high ", high);
  Generator& g = pick(generator);
  return fill_with(tensor, "uniform_", [&] { return low + (high - low) * g.uniform_double(); });
}

Tensor normal_(const Tensor& tensor, double mean, double std, Generator* generator) {
  TANDEM_CHECK(std >= 0, "init::normal_: negative standard deviation ", std);
  Generator& g = pick(generator);
  return fill_with(tensor, "normal_", [&] { return mean + std * static_cast<double>(g.normal()); });
}

Tensor constant_(const Tensor& tensor, double value) {
  return fill_with(tensor, "constant_", [value] { return value; });
}

Tensor zeros_(const Tensor& tensor) { return constant_(tensor, 0.0); }

Tensor ones_(const Tensor& tensor) { return constant_(tensor, 1.0); }

Tensor kaiming_uniform_(const Tensor& tensor, const KaimingOptions& options, Generator* generator) {
  if (tensor.defined() && tensor.numel() == 0) return tensor;
  const double bound = std::sqrt(3.0) * kaiming_std(tensor, options, "kaiming_uniform_");
  return uniform_(tensor, -bound, bound, generator);
}

Tensor kaiming_normal_(const Tensor& tensor, const KaimingOptions& options, Generator* generator) {
  if (tensor.defined() && tensor.numel() == 0) return tensor;
  return normal_(tensor, 0.0, kaiming_std(tensor, options, "kaiming_normal_"), generator);
}

Tensor xavier_uniform_(const Tensor& tensor, double gain, Generator* generator) {
  const double bound = std::sqrt(3.0) * xavier_std(tensor, gain, "xavier_uniform_");
  return uniform_(tensor, -bound, bound, generator);
}

Tensor xavier_normal_(const Tensor& tensor, double gain, Generator* generator) {
  return normal_(tensor, 0.0, xavier_std(tensor, gain, "xavier_normal_"), generator);
}

}  // namespace tandem::nn::init
