// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay), with bias
// correction and optional AMSGrad, updating exactly as torch.optim.Adam / AdamW in PyTorch 1.13.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "tandem/optim/optimizer.h"

namespace tandem::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
};

// AdamW's options: the same fields, with torch's AdamW default weight_decay of 0.01.
struct AdamWOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
  AdamOptions as_adam() const { return {lr, betas, eps, weight_decay, amsgrad, maximize}; }
};

// Per element at step t, with g the gradient (negated if maximize):
//   Adam:  g += weight_decay * p          AdamW:  p *= 1 - lr * weight_decay
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;  vmax = max(vmax, v) (amsgrad)
//   p -= lr / (1 - beta1^t) * m / (sqrt(v or vmax) / sqrt(1 - beta2^t) + eps)
class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<Tensor> params, const AdamOptions& options = {});
  explicit Adam(std::vector<ParamGroup<AdamOptions>> groups);

  void add_param_group(ParamGroup<AdamOptions> group);
  AdamOptions& options(std::size_t group = 0);
  const AdamOptions& options(std::size_t group = 0) const;

  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  // lr, beta1, beta2, eps, weight_decay, amsgrad, maximize
  std::vector<std::string> option_names() const override;
  double option(std::size_t group, std::string_view name) const override;
  void set_option(std::size_t group, std::string_view name, double value) override;

 protected:
  explicit Adam(bool decoupled) : decoupled_(decoupled) {}
  ElementRange prepare(std::size_t group, const Tensor& param, const Tensor& grad,
                       ParamState& state) override;
  std::vector<std::string> buffer_names() const override {
    return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  }
  bool counts_steps() const override { return true; }

 private:
  bool decoupled_ = false;
  std::vector<AdamOptions> options_;
};

class AdamW : public Adam {
 public:
  explicit AdamW(std::vector<Tensor> params, const AdamWOptions& options = {});
  explicit AdamW(std::vector<ParamGroup<AdamWOptions>> groups);
  void add_param_group(ParamGroup<AdamWOptions> group);
};

}  // namespace tandem::optim
