// SGD with momentum, dampening, Nesterov momentum, L2 weight decay and maximize, updating exactly
// as torch.optim.SGD in PyTorch 1.13 (the first momentum step copies the gradient into the buffer).
#pragma once

#include <string>
#include <vector>

#include "tandem/optim/optimizer.h"

namespace tandem::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2 penalty added to the gradient
  bool nesterov = false;      // needs momentum > 0 and dampening == 0
  bool maximize = false;
};

// Per element, with g the gradient (negated if maximize) and b the momentum buffer:
//   g += weight_decay * p
//   b = g on the first step, else b = momentum * b + (1 - dampening) * g
//   g = nesterov ? g + momentum * b : b          (only when momentum != 0)
//   p -= lr * g
class SGD : public Optimizer {
 public:
  explicit SGD(std::vector<Tensor> params, const SGDOptions& options = {});
  explicit SGD(std::vector<ParamGroup<SGDOptions>> groups);

  void add_param_group(ParamGroup<SGDOptions> group);
  SGDOptions& options(std::size_t group = 0);
  const SGDOptions& options(std::size_t group = 0) const;

  std::string type_name() const override { return "SGD"; }
  // lr, momentum, dampening, weight_decay, nesterov, maximize
  std::vector<std::string> option_names() const override;
  double option(std::size_t group, std::string_view name) const override;
  void set_option(std::size_t group, std::string_view name, double value) override;

 protected:
  ElementRange prepare(std::size_t group, const Tensor& param, const Tensor& grad,
                       ParamState& state) override;
  std::vector<std::string> buffer_names() const override { return {"momentum_buffer"}; }
  bool counts_steps() const override { return false; }

 private:
  std::vector<SGDOptions> options_;
};

}  // namespace tandem::optim
