// Learning-rate schedules, as torch.optim.lr_scheduler in PyTorch 1.13: StepLR, CosineAnnealingLR,
// LinearWarmup (torch's LinearLR) and OneCycleLR. Constructing a scheduler performs torch's
// initial step (epoch 0); call step() after each optimizer.step() (or epoch). The recursive
// ("chainable") formulas are torch's own, so sequences agree with torch to the last bits.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tandem/optim/optimizer.h"

namespace tandem::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual std::string type_name() const = 0;

  // Advances the epoch counter and writes the new rates into the optimizer's groups.
  void step();
  // The rates (one per parameter group) the last step() set.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  std::int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }

  // Saved form (see SavedState; scalars only): "last_epoch", "step_count", "base_lrs.<g>",
  // "last_lr.<g>" and the schedule's own settings by torch's names. Loading restores all of them
  // but leaves the optimizer's rates alone (the optimizer's own state_dict holds those).
  SavedState state_dict() const;
  void load_state_dict(const SavedState& state);

 protected:
  // base_lrs are the groups' rates at construction.
  explicit LRScheduler(Optimizer& optimizer);
  // Torch's _initial_step: the last line of every derived constructor.
  void initial_step();
  // The rates for last_epoch_ (already advanced), from the optimizer's current rates.
  virtual std::vector<double> get_lr() = 0;
  virtual void save_settings(SavedState& /*out*/) const {}
  virtual void load_settings(const SavedState& /*in*/) {}
  double group_lr(std::size_t group) const { return optimizer_.lr(group); }
  std::size_t groups() const { return base_lrs_.size(); }

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  std::int64_t last_epoch_ = -1;
  std::int64_t step_count_ = 0;
};

// lr = base_lr * gamma^(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);
  std::string type_name() const override { return "StepLR"; }

 protected:
  std::vector<double> get_lr() override;
  void save_settings(SavedState& out) const override;
  void load_settings(const SavedState& in) override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2, continuing as a cosine
// wave past T_max (torch's behaviour).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min = 0.0);
  std::string type_name() const override { return "CosineAnnealingLR"; }

 protected:
  std::vector<double> get_lr() override;
  void save_settings(SavedState& out) const override;
  void load_settings(const SavedState& in) override;

 private:
  std::int64_t t_max_;
  double eta_min_;
};

// Linear warm-up: the rate is multiplied by a factor going linearly from start_factor (epoch 0)
// to end_factor (epoch total_iters), then constant; torch's LinearLR with its defaults.
struct LinearWarmupOptions {
  double start_factor = 1.0 / 3.0;  // in (0, 1]
  double end_factor = 1.0;          // in [0, 1]
  std::int64_t total_iters = 5;
};

class LinearWarmup : public LRScheduler {
 public:
  explicit LinearWarmup(Optimizer& optimizer, const LinearWarmupOptions& options = {});
  std::string type_name() const override { return "LinearWarmup"; }

 protected:
  std::vector<double> get_lr() override;
  void save_settings(SavedState& out) const override;
  void load_settings(const SavedState& in) override;

 private:
  LinearWarmupOptions options_;
};
using LinearLR = LinearWarmup;

enum class AnnealStrategy : std::uint8_t { Cos, Linear };

// Smith's 1cycle: from max_lr / div_factor up to max_lr over pct_start of the steps, then down to
// max_lr / (div_factor * final_div_factor); with cycle_momentum the optimizer's momentum (SGD) or
// beta1 (Adam, AdamW) moves the opposite way between max_momentum and base_momentum.
struct OneCycleLROptions {
  std::vector<double> max_lr;    // one value for every group, or one per group
  std::int64_t total_steps = 0;  // or 0 and epochs * steps_per_epoch
  std::int64_t epochs = 0;
  std::int64_t steps_per_epoch = 0;
  double pct_start = 0.3;
  AnnealStrategy anneal_strategy = AnnealStrategy::Cos;
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;  // the third phase anneals from max_lr / div_factor to the minimum
};

class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, const OneCycleLROptions& options);
  std::string type_name() const override { return "OneCycleLR"; }
  std::int64_t total_steps() const { return total_steps_; }

 protected:
  std::vector<double> get_lr() override;
  void save_settings(SavedState& out) const override;
  void load_settings(const SavedState& in) override;

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr;              // 0 initial_lr, 1 max_lr, 2 min_lr
    int start_momentum, end_momentum;  // 0 max_momentum, 1 base_momentum
  };
  void build_phases();
  double anneal(double start, double end, double pct) const;

  OneCycleLROptions options_;
  std::int64_t total_steps_ = 0;
  std::vector<Phase> phases_;
  // Per group: {initial_lr, max_lr, min_lr} and {max_momentum, base_momentum}.
  std::vector<std::array<double, 3>> lrs_;
  std::vector<std::array<double, 2>> momenta_;
  std::string momentum_option_;  // "momentum" or "beta1"; empty without cycle_momentum
};

}  // namespace tandem::optim
