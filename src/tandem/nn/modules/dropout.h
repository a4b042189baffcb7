// Dropout: while training, zeroes each element with probability p and scales the rest by
// 1 / (1 - p); in eval mode it is the identity, as torch.nn.Dropout.
#pragma once

#include <string>

#include "tandem/base/rng.h"
#include "tandem/nn/module.h"

namespace tandem::nn {

struct Dropout : Module {
  double p = 0.5;
  Generator* generator = nullptr;  // null: tandem::default_generator()

  explicit Dropout(double probability = 0.5, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
};

}  // namespace tandem::nn
