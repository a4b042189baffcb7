// Optimizer base: parameter groups, the per-parameter step driver, zero_grad, and the saved form
// of hyper-parameters and state.
#include "tandem/optim/optimizer.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include "tandem/autograd/grad_mode.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/ops.h"
#include "tandem/tensor/factories.h"

namespace tandem::optim {

// ---- SavedState ----

bool SavedState::has(std::string_view key) const {
  return std::any_of(scalars.begin(), scalars.end(), [&](const auto& s) { return s.first == key; });
}

double SavedState::scalar(std::string_view key) const {
  for (const auto& [k, v] : scalars) {
    if (k == key) return v;
  }
  TANDEM_FAIL("load_state_dict: the saved ", type.empty() ? "state" : type, " has no '", key,
              "' entry");
}

void SavedState::set(std::string key, double value) {
  for (auto& [k, v] : scalars) {
    if (k == key) {
      v = value;
      return;
    }
  }
  scalars.emplace_back(std::move(key), value);
}

Tensor* ParamState::find(std::string_view name) {
  for (auto& [n, t] : buffers) {
    if (n == name) return &t;
  }
  return nullptr;
}

// ---- Optimizer ----

Tensor& Optimizer::buffer(ParamState& state, const std::string& name, const Tensor& param,
                          bool* created) {
  if (created) *created = false;
  Tensor* found = state.find(name);
  if (found == nullptr) {
    state.buffers.emplace_back(
        name, zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()}));
    if (created) *created = true;
    return state.buffers.back().second;
  }
  if (found->device() != param.device()) *found = contiguous_copy(copy_to(*found, param.device()));
  if (found->dtype() != param.dtype()) *found = ops::cast(*found, param.dtype());
  if (!found->is_contiguous()) *found = contiguous_copy(*found);
  return *found;
}

void Optimizer::add_params(std::vector<Tensor> params) {
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& group : params_) {
    for (const Tensor& p : group) seen.insert(p.impl());
  }
  for (const Tensor& p : params) {
    TANDEM_CHECK(p.defined(), type_name(), ": a parameter group holds an undefined tensor");
    TANDEM_CHECK(p.is_leaf(), type_name(), ": can't optimize a non-leaf tensor of shape ",
                 show(p.shape()));
    TANDEM_CHECK(seen.insert(p.impl()).second, type_name(), ": a parameter of shape ",
                 show(p.shape()), " appears more than once in the parameter groups");
  }
  params_.push_back(std::move(params));
}

const std::vector<Tensor>& Optimizer::params(std::size_t group) const {
  TANDEM_CHECK(group < params_.size(), type_name(), ": no parameter group ", group, " (there are ",
               params_.size(), ")");
  return params_[group];
}

bool Optimizer::has_option(std::string_view name) const {
  const auto names = option_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

void Optimizer::unknown_option(std::string_view name) const {
  std::string known;
  for (const auto& n : option_names()) known += (known.empty() ? "" : ", ") + n;
  TANDEM_FAIL(type_name(), ": no option '", name, "' (options: ", known, ")");
}

const ParamState* Optimizer::state(const Tensor& param) const {
  auto it = state_.find(param.impl());
  return it == state_.end() ? nullptr : &it->second;
}

void Optimizer::step() { run_whole(prepare_step()); }

void Optimizer::run_whole(const std::vector<RangeUpdate>& updates) {
  ops::cuda::MultiTensorStep batch;  // the GPU ranges below add themselves to it
  for (const RangeUpdate& u : updates) u.run(0, u.numel);
  batch.flush();
}

std::vector<Optimizer::RangeUpdate> Optimizer::prepare_step() {
  NoGradGuard no_grad;
  std::vector<RangeUpdate> updates;
  for (std::size_t g = 0; g < params_.size(); ++g) {
    for (const Tensor& p : params_[g]) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      TANDEM_CHECK(p.dtype() == DType::Float32 || p.dtype() == DType::Float64, type_name(),
                   ": parameter of shape ", show(p.shape()), " is ", p.dtype(),
                   "; expected float32 or float64");
      TANDEM_CHECK(p.is_contiguous(), type_name(), ": parameter of shape ", show(p.shape()),
                   " is not contiguous");
      TANDEM_CHECK(grad.shape() == p.shape() && grad.dtype() == p.dtype(), type_name(),
                   ": gradient ", show(grad.shape()), " ", grad.dtype(), " does not match its ",
                   "parameter ", show(p.shape()), " ", p.dtype());
      // The update runs where the parameter is (CPU loops, or the CUDA kernels for a GPU).
      if (grad.device() != p.device()) grad = copy_to(grad, p.device());
      if (!grad.is_contiguous()) grad = contiguous_copy(grad);
      ElementRange range = prepare(g, p, grad, state_[p.impl()]);
      // The range function holds raw pointers: keep the (possibly copied) gradient alive with it.
      updates.push_back({.param = p,
                         .numel = p.numel(),
                         .run = [grad, range = std::move(range)](std::int64_t b,
                                                                  std::int64_t e) { range(b, e); }});
    }
  }
  return updates;
}

Tensor Optimizer::flat_range(const Tensor& t, std::int64_t begin, std::int64_t end) {
  return make_view(t, {end - begin}, {1}, t.offset() + begin);
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const auto& group : params_) {
    for (const Tensor& p : group) {
      if (set_to_none) {
        p.set_grad(Tensor());
      } else if (Tensor g = p.grad(); g.defined()) {
        ops::fill_(g, 0.0);
      }
    }
  }
}

SavedState Optimizer::state_dict() const {
  SavedState out;
  out.type = type_name();
  const auto names = option_names();
  const auto buffers = buffer_names();
  for (std::size_t g = 0; g < params_.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    out.scalars.emplace_back(prefix + "params", static_cast<double>(params_[g].size()));
    for (const auto& n : names) out.scalars.emplace_back(prefix + n, option(g, n));
  }
  std::size_t index = 0;
  for (const auto& group : params_) {
    for (const Tensor& p : group) {
      const std::string prefix = "state." + std::to_string(index++) + ".";
      auto it = state_.find(p.impl());
      if (it == state_.end()) continue;
      const ParamState& s = it->second;
      if (counts_steps()) out.scalars.emplace_back(prefix + "step", static_cast<double>(s.step));
      for (const auto& name : buffers) {  // a fixed order, whatever the creation order was
        for (const auto& [n, t] : s.buffers) {
          if (n == name) out.tensors.emplace_back(prefix + n, contiguous_copy(t));
        }
      }
    }
  }
  return out;
}

void Optimizer::load_state_dict(const SavedState& saved) {
  TANDEM_CHECK(saved.type == type_name(), type_name(),
               "::load_state_dict: the saved state is of a ",
               saved.type.empty() ? "nameless" : saved.type, " optimizer");
  // Group layout first: same number of groups, same sizes.
  std::size_t groups = 0;
  while (saved.has("param_groups." + std::to_string(groups) + ".params")) ++groups;
  TANDEM_CHECK(groups == params_.size(), type_name(), "::load_state_dict: the saved state has ",
               groups, " parameter groups, the optimizer ", params_.size());
  for (std::size_t g = 0; g < groups; ++g) {
    const auto n =
        static_cast<std::size_t>(saved.scalar("param_groups." + std::to_string(g) + ".params"));
    TANDEM_CHECK(n == params_[g].size(), type_name(), "::load_state_dict: saved group ", g, " has ",
                 n, " parameters, the optimizer's ", params_[g].size());
  }
  // Per-parameter state, checked completely before anything changes.
  const auto buffers = buffer_names();
  std::map<std::string, const Tensor*> tensors;
  for (const auto& [k, t] : saved.tensors) tensors[k] = &t;
  std::unordered_map<const TensorImpl*, ParamState> loaded;
  std::size_t index = 0;
  std::size_t used = 0;
  for (const auto& group : params_) {
    for (const Tensor& p : group) {
      const std::string prefix = "state." + std::to_string(index++) + ".";
      ParamState s;
      bool any = false;
      if (counts_steps() && saved.has(prefix + "step")) {
        s.step = static_cast<std::int64_t>(saved.scalar(prefix + "step"));
        any = true;
      }
      for (const auto& name : buffers) {
        auto it = tensors.find(prefix + name);
        if (it == tensors.end()) continue;
        const Tensor& t = *it->second;
        TANDEM_CHECK(t.shape() == p.shape(), type_name(), "::load_state_dict: ", it->first,
                     " has shape ", show(t.shape()), " but its parameter ", show(p.shape()));
        Tensor staged = contiguous_copy(copy_to(t, p.device()));  // never aliases the saved one
        if (staged.dtype() != p.dtype()) staged = ops::cast(staged, p.dtype());
        s.buffers.emplace_back(name, staged);
        ++used;
        any = true;
      }
      if (any) loaded.emplace(p.impl(), std::move(s));
    }
  }
  TANDEM_CHECK(used == saved.tensors.size(), type_name(),
               "::load_state_dict: ", saved.tensors.size() - used,
               " saved tensors match no parameter or buffer name");
  std::vector<std::vector<double>> hyper(groups);
  const auto names = option_names();
  for (std::size_t g = 0; g < groups; ++g) {
    for (const auto& n : names) {
      hyper[g].push_back(saved.scalar("param_groups." + std::to_string(g) + "." + n));
    }
  }
  // Everything is checked: now the hyper-parameters and the state change.
  for (std::size_t g = 0; g < groups; ++g) {
    for (std::size_t k = 0; k < names.size(); ++k) set_option(g, names[k], hyper[g][k]);
  }
  state_ = std::move(loaded);
}

}  // namespace tandem::optim
