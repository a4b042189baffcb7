// record(): the one way a differentiable function puts itself on the tape. When grad mode is on
// and any input requires grad, it creates a FunctionNode with the given backward, wires its
// edges to the inputs and marks the outputs as produced by it.
//
//   Tensor y = ops::relu(x);
//   record("relu", {x}, {y}, [y = data_only(y)](auto& g, const Node&) {
//     return std::vector<Tensor>{ops::relu_backward(g[0], y)};
//   });
#pragma once

#include <initializer_list>

#include "tandem/autograd/grad_mode.h"
#include "tandem/autograd/node.h"

namespace tandem::autograd {

bool any_requires_grad(std::initializer_list<const Tensor*> inputs);

// Returns the node (null when nothing was recorded).
std::shared_ptr<Node> record(const char* name, std::initializer_list<Tensor> inputs,
                             std::initializer_list<Tensor> outputs, FunctionNode::Backward backward);
std::shared_ptr<Node> record(const char* name, const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& outputs, FunctionNode::Backward backward);

}  // namespace tandem::autograd
