// The backward engine: runs the recorded graph from the roots in reverse creation order, summing
// gradients that meet at a node, and frees saved tensors as it goes unless retain_graph is set.
#pragma once

#include <vector>

#include "tandem/tensor/tensor.h"

namespace tandem::autograd {

// roots[i] receives grad_roots[i] (an undefined entry means ones, allowed for scalars only).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                  bool retain_graph);

}  // namespace tandem::autograd
