// Backward over the graph: dependency counting, then a max-heap on sequence number so the most
// recently created ready node runs first (this also fires parameter gradient hooks in reverse
// order of use, which the data-parallel reducer relies on).
#include "tandem/autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "tandem/autograd/grad_mode.h"
#include "tandem/autograd/node.h"
#include "tandem/ops/ops.h"
#include "tandem/tensor/factories.h"

namespace tandem::autograd {
namespace {

struct Later {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

void accumulate(Tensor& slot, Tensor&& g) {
  if (!g.defined()) return;
  if (!slot.defined()) {
    slot = std::move(g);
  } else {
    slot = ops::binary(ops::BinaryOp::Add, slot, g);
  }
}

}  // namespace

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                  bool retain_graph) {
  TANDEM_CHECK(roots.size() == grad_roots.size(), "backward: ", roots.size(), " roots but ",
               grad_roots.size(), " gradients");
  // Backward itself records nothing (no higher-order gradients).
  NoGradGuard no_grad;

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::unordered_map<Node*, int> dependencies;
  std::vector<std::shared_ptr<Node>> root_nodes;

  for (std::size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    TANDEM_CHECK(root.requires_grad(), "backward: tensor of shape ", show(root.shape()),
                 " does not require grad and has no grad_fn");
    Tensor g = grad_roots[i];
    if (!g.defined()) {
      TANDEM_CHECK(root.numel() == 1, "backward: a gradient must be given for a non-scalar "
                   "tensor of shape ", show(root.shape()));
      // Filled where the root lives (on a GPU: a kernel, no copy from the host to wait for).
      g = empty(root.shape(), {.dtype = root.dtype(), .device = root.device()});
      ops::fill_(g, 1.0);
    } else {
      TANDEM_CHECK(g.shape() == root.shape(), "backward: gradient of shape ", show(g.shape()),
                   " for a tensor of shape ", show(root.shape()));
    }
    Edge edge = gradient_edge(root);
    auto& slots = buffers[edge.node.get()];
    slots.resize(edge.node->num_outputs());
    accumulate(slots[edge.input_nr], std::move(g));
    root_nodes.push_back(edge.node);
  }

  // Count, for every reachable node, how many edges point at it.
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  for (auto& n : root_nodes) {
    if (!seen[n.get()]) {
      seen[n.get()] = true;
      stack.push_back(n.get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.node) continue;
      ++dependencies[e.node.get()];
      if (!seen[e.node.get()]) {
        seen[e.node.get()] = true;
        stack.push_back(e.node.get());
      }
    }
  }

  std::priority_queue<Node*, std::vector<Node*>, Later> ready;
  for (auto& n : root_nodes) {
    if (dependencies[n.get()] == 0 && seen[n.get()]) {
      seen[n.get()] = false;  // queued once
      ready.push(n.get());
    }
  }
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    grads.resize(n->num_outputs());
    bool any = false;
    for (const Tensor& g : grads) any = any || g.defined();
    std::vector<Tensor> input_grads;
    if (any) input_grads = n->apply(std::move(grads));
    if (!retain_graph) n->release_saved();
    const auto& edges = n->next_edges();
    for (std::size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.node) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        auto& slots = buffers[e.node.get()];
        slots.resize(e.node->num_outputs());
        accumulate(slots[e.input_nr], std::move(input_grads[i]));
      }
      if (--dependencies[e.node.get()] == 0) ready.push(e.node.get());
    }
  }
}

}  // namespace tandem::autograd
