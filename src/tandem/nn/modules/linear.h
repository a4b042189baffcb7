// Linear: y = x W^T + b over the last dimension, as torch.nn.Linear, initialised as PyTorch does.
// x (*, D_in), weight (D_out, D_in), bias (D_out) -> y (*, D_out).
#pragma once

#include <cstdint>
#include <string>

#include "tandem/nn/module.h"

namespace tandem::nn {

struct Linear : Module {
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
  Tensor weight;  // (out_features, in_features)
  Tensor bias;    // (out_features), undefined when constructed with bias = false

  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true);

  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }
  // weight ~ kaiming_uniform_(a = sqrt(5)), bias ~ U(-1/sqrt(in_features), 1/sqrt(in_features)).
  void reset_parameters();
};

}  // namespace tandem::nn
