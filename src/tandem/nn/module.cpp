// Module registration, recursive listings, train/eval, device moves and state dicts.
#include "tandem/nn/module.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "tandem/autograd/grad_mode.h"
#include "tandem/ops/ops.h"

namespace tandem::nn {

Module::Module() : state_(std::make_shared<State>()) {}

Tensor Module::forward(const Tensor&) {
  TANDEM_FAIL(type_name(), ": this module has no single-input forward()");
}

namespace {
void check_name(const std::string& name, const char* what) {
  TANDEM_CHECK(!name.empty() && name.find('.') == std::string::npos, "register_", what,
               ": invalid name '", name, "' (must be non-empty and contain no '.')");
}
}  // namespace

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_name(name, "module");
  for (auto& [n, c] : state_->children) {
    TANDEM_CHECK(n != name, "register_module: '", name, "' is already registered");
  }
  state_->children.emplace_back(name, std::move(child));
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_name(name, "parameter");
  for (auto& [n, t] : state_->parameters) {
    TANDEM_CHECK(n != name, "register_parameter: '", name, "' is already registered");
  }
  if (tensor.defined() && requires_grad) tensor.set_requires_grad(true);
  state_->parameters.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
  check_name(name, "buffer");
  for (auto& [n, t] : state_->buffers) {
    TANDEM_CHECK(n != name, "register_buffer: '", name, "' is already registered");
  }
  state_->buffers.emplace_back(name, tensor);
  return tensor;
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  for (auto& [n, t] : state_->parameters) {
    if (t.defined()) out.emplace_back(n, t);
  }
  if (recurse) {
    for (auto& [cn, c] : state_->children) {
      for (auto& [n, t] : c->named_parameters(true)) out.emplace_back(cn + "." + n, t);
    }
  }
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  for (auto& [n, t] : state_->buffers) {
    if (t.defined()) out.emplace_back(n, t);
  }
  if (recurse) {
    for (auto& [cn, c] : state_->children) {
      for (auto& [n, t] : c->named_buffers(true)) out.emplace_back(cn + "." + n, t);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return state_->children;
}

std::int64_t Module::parameter_count() const {
  std::int64_t n = 0;
  for (auto& t : parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  state_->training = on;
  for (auto& [n, c] : state_->children) c->train(on);
}

bool Module::is_training() const { return state_->training; }

void move_in_place(const Tensor& t, Device device) {
  if (!t.defined() || t.device() == device) return;
  Tensor moved = copy_to(t, device);
  TensorImpl* impl = t.impl();
  impl->storage = moved.storage();
  impl->strides = moved.strides();
  impl->offset = moved.offset();
  if (Tensor g = t.grad(); g.defined()) move_in_place(g, device);
}

void cast_in_place(const Tensor& t, DType dtype) {
  if (!t.defined() || t.dtype() == dtype || !is_floating(t.dtype())) return;
  Tensor cast = ops::cast(t, dtype);
  TensorImpl* impl = t.impl();
  impl->storage = cast.storage();
  impl->strides = cast.strides();
  impl->offset = cast.offset();
  impl->dtype = dtype;
  t.set_grad(Tensor());
}

void Module::to(Device device) {
  for (auto& [n, t] : named_parameters()) move_in_place(t, device);
  for (auto& [n, t] : named_buffers()) move_in_place(t, device);
}

void Module::to(DType dtype) {
  for (auto& [n, t] : named_parameters()) cast_in_place(t, dtype);
  for (auto& [n, t] : named_buffers()) cast_in_place(t, dtype);
}

void Module::zero_grad() {
  for (auto& t : parameters()) t.set_grad(Tensor());
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [n, t] : state_->parameters) {
    if (t.defined()) out.emplace_back(n, t);
  }
  for (auto& [n, t] : state_->buffers) {
    if (t.defined()) out.emplace_back(n, t);
  }
  for (auto& [cn, c] : state_->children) {
    for (auto& [n, t] : c->state_dict()) out.emplace_back(cn + "." + n, t);
  }
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  std::map<std::string, const Tensor*> given;
  for (auto& [n, t] : state) given[n] = &t;
  const StateDict own = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  for (auto& [n, t] : own) {
    auto it = given.find(n);
    if (it == given.end()) {
      missing.push_back(n);
    } else if (it->second->shape() != t.shape()) {
      mismatched.push_back(n + ": checkpoint " + to_string(it->second->shape()) + ", model " +
                           to_string(t.shape()));
    }
  }
  for (const auto& entry : state) {  // not a structured binding: clang 14 cannot capture one
    const std::string& n = entry.first;
    if (std::none_of(own.begin(), own.end(), [&](const auto& p) { return p.first == n; })) {
      unexpected.push_back(n);
    }
  }
  const bool bad = !mismatched.empty() || (strict && (!missing.empty() || !unexpected.empty()));
  if (bad) {
    std::ostringstream msg;
    msg << "load_state_dict: state dict does not match the " << type_name() << " model";
    auto list = [&](const char* what, const std::vector<std::string>& v) {
      if (v.empty()) return;
      msg << "; " << what << ": ";
      for (std::size_t i = 0; i < v.size(); ++i) msg << (i ? ", " : "") << v[i];
    };
    list("missing keys", missing);
    list("unexpected keys", unexpected);
    list("shape differences", mismatched);
    TANDEM_FAIL(msg.str());
  }
  NoGradGuard no_grad;
  for (auto& [n, t] : own) {
    auto it = given.find(n);
    if (it == given.end()) continue;
    const Tensor& src = *it->second;
    Tensor staged = src.device() == t.device() ? src : copy_to(src, t.device());
    if (staged.dtype() != t.dtype()) staged = ops::cast(staged, t.dtype());
    copy_into(t, staged);
  }
}

}  // namespace tandem::nn
