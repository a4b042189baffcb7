// Sequential: numbered registration, indexing and the chained forward.
#include "tandem/nn/modules/sequential.h"

namespace tandem::nn {

void Sequential::push_back(std::shared_ptr<Module> module) {
  TANDEM_CHECK(module != nullptr, "Sequential::push_back: null module");
  add_child(std::to_string(size()), std::move(module));
}

std::size_t Sequential::size() const { return named_children().size(); }

Module& Sequential::operator[](std::size_t index) const {
  const auto children = named_children();
  TANDEM_CHECK(index < children.size(), "Sequential: index ", index, " is out of range for ",
               children.size(), " modules");
  return *children[index].second;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& [name, child] : named_children()) y = child->forward(y);
  return y;
}

}  // namespace tandem::nn
