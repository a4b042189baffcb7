// Module: parameters, buffers and child modules registered by name; the names are PyTorch's
// (`conv1.weight`, `layers.0.bias`) and are the checkpoint keys. A module object is a cheap handle:
// copies share the registered tensors and the train/eval flag, so
//   Conv2d conv1 = register_module("conv1", Conv2d(3, 16, 3, 1, 1));
// leaves the member and the registered child the same module.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tandem/tensor/tensor.h"

namespace tandem::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = NamedTensors;  // ordered, as torch's state_dict()

class Module {
 public:
  Module();
  virtual ~Module() = default;
  Module(const Module&) = default;
  Module& operator=(const Module&) = default;

  // The module's computation on one input. Modules with other signatures define their own
  // operator(); calling this on them is an error naming the module.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  // "Conv2d", "Linear", ... (for printing and errors).
  virtual std::string type_name() const { return "Module"; }

  // Registration. register_module stores a copy (sharing state) and returns the module.
  template <typename M>
  M register_module(const std::string& name, M module) {
    static_assert(std::is_base_of_v<Module, M>, "register_module: not a Module");
    add_child(name, std::make_shared<M>(module));
    return module;
  }
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor tensor);

  // Recursive listings in PyTorch's order: own entries first, then each child in registration
  // order with "child." prefixed.
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::int64_t parameter_count() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const;

  // Moves every parameter and buffer (and gradient) in place: the Tensor handles stay the same
  // objects, so an optimizer made before to() still updates the model, as in PyTorch.
  void to(Device device);
  void to(DType dtype);  // floating parameters and buffers only
  void zero_grad();      // drops gradients (set_to_none semantics)

  // Parameters then buffers, recursively (torch's state_dict order and names).
  StateDict state_dict() const;
  // Copies values in. strict: the key sets must match exactly; a mismatch error lists missing
  // keys, unexpected keys and shape differences.
  void load_state_dict(const StateDict& state, bool strict = true);

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> child);

 private:
  struct State {
    NamedTensors parameters;
    NamedTensors buffers;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children;
    bool training = true;
  };
  std::shared_ptr<State> state_;
};

// Moves a tensor's data to `device` in place (every handle of it sees the move).
void move_in_place(const Tensor& t, Device device);
void cast_in_place(const Tensor& t, DType dtype);

}  // namespace tandem::nn
