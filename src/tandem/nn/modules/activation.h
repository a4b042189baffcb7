// Elementwise activation modules: ReLU, GELU (exact erf form, torch's default), Sigmoid, Tanh.
// They hold no parameters; the shape of the input is kept.
#pragma once

#include <string>

#include "tandem/nn/module.h"

namespace tandem::nn {

struct ReLU : Module {
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};

struct GELU : Module {
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GELU"; }
};

struct Sigmoid : Module {
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sigmoid"; }
};

struct Tanh : Module {
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Tanh"; }
};

}  // namespace tandem::nn
