// Flatten: merges dimensions start_dim..end_dim into one, as torch.nn.Flatten (defaults keep the
// batch dimension: (N, C, H, W) -> (N, C*H*W)).
#pragma once

#include <cstdint>
#include <string>

#include "tandem/nn/module.h"

namespace tandem::nn {

struct Flatten : Module {
  std::int64_t start_dim = 1;
  std::int64_t end_dim = -1;

  explicit Flatten(std::int64_t start = 1, std::int64_t end = -1)
      : start_dim(start), end_dim(end) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Flatten"; }
};

}  // namespace tandem::nn
