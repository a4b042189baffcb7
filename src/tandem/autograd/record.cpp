// Wiring recorded operations into the graph.
#include "tandem/autograd/record.h"

namespace tandem::autograd {

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs) {
    if (t->defined() && t->requires_grad()) return true;
  }
  return false;
}

std::shared_ptr<Node> record(const char* name, const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& outputs, FunctionNode::Backward backward) {
  if (!grad_enabled()) return nullptr;
  bool needed = false;
  for (const Tensor& t : inputs) needed = needed || (t.defined() && t.requires_grad());
  if (!needed) return nullptr;
  auto node = std::make_shared<FunctionNode>(name, std::move(backward));
  auto& edges = node->mutable_next_edges();
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(gradient_edge(t));
  node->set_num_outputs(static_cast<std::uint32_t>(outputs.size()));
  std::uint32_t nr = 0;
  for (const Tensor& out : outputs) {
    AutogradMeta& meta = out.autograd_meta();
    meta.requires_grad = true;
    meta.grad_fn = node;
    meta.output_nr = nr++;
  }
  return node;
}

std::shared_ptr<Node> record(const char* name, std::initializer_list<Tensor> inputs,
                             std::initializer_list<Tensor> outputs, FunctionNode::Backward backward) {
  return record(name, std::vector<Tensor>(inputs), std::vector<Tensor>(outputs),
                std::move(backward));
}

}  // namespace tandem::autograd
