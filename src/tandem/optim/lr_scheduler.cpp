// Learning-rate schedules: torch 1.13's _LRScheduler stepping and each schedule's get_lr, line
// for line, plus the saved form of their counters and settings.
#include "tandem/optim/lr_scheduler.h"

#include <cmath>
#include <numbers>

namespace tandem::optim {
namespace {

std::string key(const char* name, std::size_t index) {
  return std::string(name) + "." + std::to_string(index);
}

}  // namespace

// ---- LRScheduler ----

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  TANDEM_CHECK(optimizer.group_count() > 0, "LRScheduler: the optimizer has no parameter groups");
  for (std::size_t g = 0; g < optimizer.group_count(); ++g) base_lrs_.push_back(optimizer.lr(g));
}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

void LRScheduler::step() {
  TANDEM_CHECK(optimizer_.group_count() == groups(), type_name(), ": the optimizer has ",
               optimizer_.group_count(), " parameter groups, the scheduler was made for ",
               groups());
  step_count_ += 1;
  last_epoch_ += 1;
  const std::vector<double> lrs = get_lr();
  for (std::size_t g = 0; g < lrs.size(); ++g) optimizer_.set_lr(g, lrs[g]);
  last_lr_.clear();
  for (std::size_t g = 0; g < groups(); ++g) last_lr_.push_back(optimizer_.lr(g));
}

SavedState LRScheduler::state_dict() const {
  SavedState out;
  out.type = type_name();
  out.scalars.emplace_back("last_epoch", static_cast<double>(last_epoch_));
  out.scalars.emplace_back("step_count", static_cast<double>(step_count_));
  for (std::size_t g = 0; g < base_lrs_.size(); ++g) {
    out.scalars.emplace_back(key("base_lrs", g), base_lrs_[g]);
  }
  for (std::size_t g = 0; g < last_lr_.size(); ++g) {
    out.scalars.emplace_back(key("last_lr", g), last_lr_[g]);
  }
  save_settings(out);
  return out;
}

void LRScheduler::load_state_dict(const SavedState& state) {
  TANDEM_CHECK(state.type == type_name(), type_name(),
               "::load_state_dict: the saved state is of a ",
               state.type.empty() ? "nameless" : state.type, " scheduler");
  TANDEM_CHECK(state.has(key("base_lrs", groups() - 1)) && !state.has(key("base_lrs", groups())),
               type_name(), "::load_state_dict: the saved state is not for ", groups(),
               " parameter groups");
  load_settings(state);
  last_epoch_ = static_cast<std::int64_t>(state.scalar("last_epoch"));
  step_count_ = static_cast<std::int64_t>(state.scalar("step_count"));
  for (std::size_t g = 0; g < groups(); ++g) {
    base_lrs_[g] = state.scalar(key("base_lrs", g));
    if (state.has(key("last_lr", g))) {
      last_lr_.resize(groups());
      last_lr_[g] = state.scalar(key("last_lr", g));
    }
  }
}

// ---- StepLR ----

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  TANDEM_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs;
  const bool decay = last_epoch_ != 0 && last_epoch_ % step_size_ == 0;
  for (std::size_t g = 0; g < groups(); ++g) {
    lrs.push_back(decay ? group_lr(g) * gamma_ : group_lr(g));
  }
  return lrs;
}

void StepLR::save_settings(SavedState& out) const {
  out.set("step_size", static_cast<double>(step_size_));
  out.set("gamma", gamma_);
}

void StepLR::load_settings(const SavedState& in) {
  step_size_ = static_cast<std::int64_t>(in.scalar("step_size"));
  gamma_ = in.scalar("gamma");
}

// ---- CosineAnnealingLR ----

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  TANDEM_CHECK(t_max > 0, "CosineAnnealingLR: T_max must be positive, got ", t_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  constexpr double kPi = std::numbers::pi;
  const auto e = static_cast<double>(last_epoch_);
  const auto t = static_cast<double>(t_max_);
  std::vector<double> lrs;
  for (std::size_t g = 0; g < groups(); ++g) {
    const double lr = group_lr(g), base = base_lrs_[g];
    if (last_epoch_ == 0) {
      lrs.push_back(lr);
    } else if (step_count_ == 1 && last_epoch_ > 0) {
      lrs.push_back(eta_min_ + (base - eta_min_) * (1 + std::cos(e * kPi / t)) / 2);
    } else if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0) {
      lrs.push_back(lr + (base - eta_min_) * (1 - std::cos(kPi / t)) / 2);
    } else {
      lrs.push_back((1 + std::cos(kPi * e / t)) / (1 + std::cos(kPi * (e - 1) / t)) *
                        (lr - eta_min_) +
                    eta_min_);
    }
  }
  return lrs;
}

void CosineAnnealingLR::save_settings(SavedState& out) const {
  out.set("T_max", static_cast<double>(t_max_));
  out.set("eta_min", eta_min_);
}

void CosineAnnealingLR::load_settings(const SavedState& in) {
  t_max_ = static_cast<std::int64_t>(in.scalar("T_max"));
  eta_min_ = in.scalar("eta_min");
}

// ---- LinearWarmup ----

LinearWarmup::LinearWarmup(Optimizer& optimizer, const LinearWarmupOptions& options)
    : LRScheduler(optimizer), options_(options) {
  TANDEM_CHECK(options.start_factor > 0.0 && options.start_factor <= 1.0,
               "LinearWarmup: start_factor must be in (0, 1], got ", options.start_factor);
  TANDEM_CHECK(options.end_factor >= 0.0 && options.end_factor <= 1.0,
               "LinearWarmup: end_factor must be in [0, 1], got ", options.end_factor);
  TANDEM_CHECK(options.total_iters > 0, "LinearWarmup: total_iters must be positive, got ",
               options.total_iters);
  initial_step();
}

std::vector<double> LinearWarmup::get_lr() {
  const double s = options_.start_factor, f = options_.end_factor;
  const auto n = static_cast<double>(options_.total_iters);
  std::vector<double> lrs;
  for (std::size_t g = 0; g < groups(); ++g) {
    const double lr = group_lr(g);
    if (last_epoch_ == 0) {
      lrs.push_back(lr * s);
    } else if (last_epoch_ > options_.total_iters) {
      lrs.push_back(lr);
    } else {
      lrs.push_back(lr *
                    (1.0 + (f - s) / (n * s + static_cast<double>(last_epoch_ - 1) * (f - s))));
    }
  }
  return lrs;
}

void LinearWarmup::save_settings(SavedState& out) const {
  out.set("start_factor", options_.start_factor);
  out.set("end_factor", options_.end_factor);
  out.set("total_iters", static_cast<double>(options_.total_iters));
}

void LinearWarmup::load_settings(const SavedState& in) {
  options_.start_factor = in.scalar("start_factor");
  options_.end_factor = in.scalar("end_factor");
  options_.total_iters = static_cast<std::int64_t>(in.scalar("total_iters"));
}

// ---- OneCycleLR ----

OneCycleLR::OneCycleLR(Optimizer& optimizer, const OneCycleLROptions& options)
    : LRScheduler(optimizer), options_(options) {
  const OneCycleLROptions& o = options_;
  if (o.total_steps > 0) {
    total_steps_ = o.total_steps;
  } else {
    TANDEM_CHECK(o.total_steps == 0 && o.epochs > 0 && o.steps_per_epoch > 0,
                 "OneCycleLR: give a positive total_steps or positive epochs and steps_per_epoch ",
                 "(total_steps=", o.total_steps, ", epochs=", o.epochs,
                 ", steps_per_epoch=", o.steps_per_epoch, ")");
    total_steps_ = o.epochs * o.steps_per_epoch;
  }
  TANDEM_CHECK(o.pct_start >= 0.0 && o.pct_start <= 1.0,
               "OneCycleLR: pct_start must be in [0, 1], got ", o.pct_start);
  TANDEM_CHECK(o.max_lr.size() == 1 || o.max_lr.size() == groups(), "OneCycleLR: expected 1 or ",
               groups(), " values for max_lr, got ", o.max_lr.size());
  build_phases();
  for (std::size_t g = 0; g < groups(); ++g) {
    const double max_lr = o.max_lr.size() == 1 ? o.max_lr[0] : o.max_lr[g];
    const double initial = max_lr / o.div_factor;
    lrs_.push_back({initial, max_lr, initial / o.final_div_factor});
    base_lrs_[g] = initial;
  }
  if (o.cycle_momentum) {
    if (optimizer.has_option("momentum")) {
      momentum_option_ = "momentum";
    } else if (optimizer.has_option("beta1")) {
      momentum_option_ = "beta1";
    } else {
      TANDEM_FAIL("OneCycleLR: ", optimizer.type_name(),
                  " has no momentum to cycle; set cycle_momentum = false");
    }
    for (std::size_t g = 0; g < groups(); ++g) {
      momenta_.push_back({o.max_momentum, o.base_momentum});
      optimizer.set_option(g, momentum_option_, o.max_momentum);
    }
  }
  initial_step();
}

void OneCycleLR::build_phases() {
  const double total = static_cast<double>(total_steps_);
  const double pct = options_.pct_start;
  if (options_.three_phase) {
    phases_ = {
        {pct * total - 1, 0, 1, 0, 1}, {2 * pct * total - 2, 1, 0, 1, 0}, {total - 1, 0, 2, 0, 0}};
  } else {
    phases_ = {{pct * total - 1, 0, 1, 0, 1}, {total - 1, 1, 2, 1, 0}};
  }
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (options_.anneal_strategy == AnnealStrategy::Linear) return (end - start) * pct + start;
  const double cos_out = std::cos(std::numbers::pi * pct) + 1;
  return end + (start - end) / 2.0 * cos_out;
}

std::vector<double> OneCycleLR::get_lr() {
  TANDEM_CHECK(last_epoch_ <= total_steps_, "OneCycleLR: tried to step ", last_epoch_ + 1,
               " times; the specified number of total steps is ", total_steps_);
  const auto step_num = static_cast<double>(last_epoch_);
  std::vector<double> lrs;
  for (std::size_t g = 0; g < groups(); ++g) {
    double start_step = 0, lr = 0, momentum = 0;
    for (std::size_t i = 0; i < phases_.size(); ++i) {
      const Phase& p = phases_[i];
      if (step_num <= p.end_step || i + 1 == phases_.size()) {
        const double pct = (step_num - start_step) / (p.end_step - start_step);
        lr = anneal(lrs_[g][p.start_lr], lrs_[g][p.end_lr], pct);
        if (!momentum_option_.empty()) {
          momentum = anneal(momenta_[g][p.start_momentum], momenta_[g][p.end_momentum], pct);
        }
        break;
      }
      start_step = p.end_step;
    }
    lrs.push_back(lr);
    if (!momentum_option_.empty()) optimizer_.set_option(g, momentum_option_, momentum);
  }
  return lrs;
}

void OneCycleLR::save_settings(SavedState& out) const {
  const OneCycleLROptions& o = options_;
  out.set("total_steps", static_cast<double>(total_steps_));
  out.set("pct_start", o.pct_start);
  out.set("anneal_strategy", o.anneal_strategy == AnnealStrategy::Cos ? 0.0 : 1.0);
  out.set("cycle_momentum", momentum_option_.empty() ? 0.0 : 1.0);
  out.set("use_beta1", momentum_option_ == "beta1" ? 1.0 : 0.0);
  out.set("three_phase", o.three_phase ? 1.0 : 0.0);
  for (std::size_t g = 0; g < groups(); ++g) {
    out.set(key("initial_lr", g), lrs_[g][0]);
    out.set(key("max_lr", g), lrs_[g][1]);
    out.set(key("min_lr", g), lrs_[g][2]);
    if (!momentum_option_.empty()) {
      out.set(key("max_momentum", g), momenta_[g][0]);
      out.set(key("base_momentum", g), momenta_[g][1]);
    }
  }
}

void OneCycleLR::load_settings(const SavedState& in) {
  total_steps_ = static_cast<std::int64_t>(in.scalar("total_steps"));
  options_.pct_start = in.scalar("pct_start");
  options_.anneal_strategy =
      in.scalar("anneal_strategy") == 0.0 ? AnnealStrategy::Cos : AnnealStrategy::Linear;
  options_.three_phase = in.scalar("three_phase") != 0.0;
  momentum_option_.clear();
  if (in.scalar("cycle_momentum") != 0.0) {
    momentum_option_ = in.scalar("use_beta1") != 0.0 ? "beta1" : "momentum";
    TANDEM_CHECK(optimizer_.has_option(momentum_option_), "OneCycleLR::load_state_dict: the saved ",
                 "schedule cycles '", momentum_option_, "', which ", optimizer_.type_name(),
                 " does not have");
  }
  options_.cycle_momentum = !momentum_option_.empty();
  lrs_.assign(groups(), {});
  momenta_.assign(momentum_option_.empty() ? 0 : groups(), {});
  for (std::size_t g = 0; g < groups(); ++g) {
    lrs_[g] = {in.scalar(key("initial_lr", g)), in.scalar(key("max_lr", g)),
               in.scalar(key("min_lr", g))};
    if (!momentum_option_.empty()) {
      momenta_[g] = {in.scalar(key("max_momentum", g)), in.scalar(key("base_momentum", g))};
    }
  }
  build_phases();
}

}  // namespace tandem::optim
