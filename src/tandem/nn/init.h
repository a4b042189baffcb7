// Parameter initialisation in place, as torch.nn.init: uniform_, normal_, constant_, zeros_, ones_,
// kaiming_* and xavier_* with torch's fan and gain rules. Each fills the tensor's existing storage
// (every handle sees the new values), records nothing on the tape, and returns the tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "tandem/base/rng.h"
#include "tandem/tensor/tensor.h"

namespace tandem::nn::init {

enum class FanMode : std::uint8_t { FanIn, FanOut };
enum class Nonlinearity : std::uint8_t {
  Linear,
  Conv1d,
  Conv2d,
  Conv3d,
  ConvTranspose1d,
  ConvTranspose2d,
  ConvTranspose3d,
  Sigmoid,
  Tanh,
  Relu,
  LeakyRelu,
  Selu
};

// torch.nn.init.calculate_gain; `param` is LeakyRelu's negative slope (0.01 when not given).
double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param = std::nullopt);
// (fan_in, fan_out) of a weight of shape (out, in, *kernel): fan_in = in * prod(kernel),
// fan_out = out * prod(kernel). Needs at least two dimensions.
std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

// `generator` defaults to tandem::default_generator().
Tensor uniform_(const Tensor& tensor, double low = 0.0, double high = 1.0,
                Generator* generator = nullptr);
Tensor normal_(const Tensor& tensor, double mean = 0.0, double std = 1.0,
               Generator* generator = nullptr);
Tensor constant_(const Tensor& tensor, double value);
Tensor zeros_(const Tensor& tensor);
Tensor ones_(const Tensor& tensor);

// He et al. (2015). std = gain(nonlinearity, a) / sqrt(fan); the uniform bound is sqrt(3) * std.
struct KaimingOptions {
  double a = 0.0;  // negative slope of the leaky ReLU that follows (LeakyRelu only)
  FanMode mode = FanMode::FanIn;
  Nonlinearity nonlinearity = Nonlinearity::LeakyRelu;
};
Tensor kaiming_uniform_(const Tensor& tensor, const KaimingOptions& options = {},
                        Generator* generator = nullptr);
Tensor kaiming_normal_(const Tensor& tensor, const KaimingOptions& options = {},
                       Generator* generator = nullptr);

// Glorot & Bengio (2010). std = gain * sqrt(2 / (fan_in + fan_out)); the uniform bound is
// sqrt(3) * std.
Tensor xavier_uniform_(const Tensor& tensor, double gain = 1.0, Generator* generator = nullptr);
Tensor xavier_normal_(const Tensor& tensor, double gain = 1.0, Generator* generator = nullptr);

}  // namespace tandem::nn::init
