// Loss modules: CrossEntropyLoss (logits (N, L), int64 targets (N)) and MSELoss, as torch.nn's,
// called as criterion(input, target) and returning a 0-d tensor.
#pragma once

#include <string>

#include "tandem/autograd/functions.h"
#include "tandem/nn/module.h"

namespace tandem::nn {

struct CrossEntropyLossOptions {
  double label_smoothing = 0.0;  // in [0, 1]
  Reduction reduction = Reduction::Mean;
};

struct CrossEntropyLoss : Module {
  CrossEntropyLossOptions options;

  CrossEntropyLoss() = default;
  explicit CrossEntropyLoss(const CrossEntropyLossOptions& options);
  // logits (N, L), target (N) int64 in [0, L) -> ()
  Tensor operator()(const Tensor& logits, const Tensor& target) const;
  std::string type_name() const override { return "CrossEntropyLoss"; }
};

struct MSELoss : Module {
  Reduction reduction = Reduction::Mean;

  MSELoss() = default;
  explicit MSELoss(Reduction r) : reduction(r) {}
  // input and target of the same shape -> ()
  Tensor operator()(const Tensor& input, const Tensor& target) const;
  std::string type_name() const override { return "MSELoss"; }
};

}  // namespace tandem::nn
