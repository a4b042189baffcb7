// Sequential: a chain of modules, each fed the previous one's output, as torch.nn.Sequential.
// Children are registered as "0", "1", ... so parameter names read "0.weight", "2.bias".
// Like every module it is a handle: copies share the children.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "tandem/nn/module.h"

namespace tandem::nn {

struct Sequential : Module {
  Sequential() = default;
  // Sequential(Conv2d(3, 16, 3), BatchNorm2d(16), ReLU()). A lone Sequential argument is a copy
  // (the handle), not a nesting; push_back nests one.
  // clang-format off
  template <typename... Ms>
    requires(sizeof...(Ms) > 0 && (std::is_base_of_v<Module, std::decay_t<Ms>> && ...) &&
             !(sizeof...(Ms) == 1 && (std::is_same_v<std::decay_t<Ms>, Sequential> && ...)))
  explicit Sequential(Ms&&... modules) {
    (push_back(std::forward<Ms>(modules)), ...);
  }
  // clang-format on

  // Appends a module (stored as a shared copy, like register_module) under the next index.
  // clang-format off
  template <typename M>
    requires std::is_base_of_v<Module, std::decay_t<M>>
  void push_back(M&& module) {
    push_back(std::shared_ptr<Module>(std::make_shared<std::decay_t<M>>(std::forward<M>(module))));
  }
  // clang-format on
  // Appends a module held elsewhere (the very object, not a copy).
  void push_back(std::shared_ptr<Module> module);

  std::size_t size() const;
  bool empty() const { return size() == 0; }
  Module& operator[](std::size_t index) const;
  // The child at `index` as its concrete type; an error naming both types if it is not one.
  template <typename M>
  M& at(std::size_t index) const {
    Module& m = (*this)[index];
    auto* typed = dynamic_cast<M*>(&m);
    TANDEM_CHECK(typed != nullptr, "Sequential: child ", index, " is a ", m.type_name(),
                 ", not the requested type");
    return *typed;
  }

  // Runs the children in order; an empty Sequential returns x.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
};

}  // namespace tandem::nn
