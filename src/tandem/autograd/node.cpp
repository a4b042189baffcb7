// Node sequence numbers, FunctionNode dispatch, and leaf gradient accumulation.
#include "tandem/autograd/node.h"

#include "tandem/autograd/grad_mode.h"
#include "tandem/ops/ops.h"

namespace tandem::autograd {

namespace {
thread_local std::uint64_t g_next_sequence_nr = 0;
}

Node::Node() : sequence_nr_(g_next_sequence_nr++) {}

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grad_outputs) {
  TANDEM_CHECK(backward_ != nullptr, "backward: ", name_, " was already run and its saved "
               "tensors freed; pass retain_graph=true to run backward twice");
  return backward_(grad_outputs, *this);
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grad_outputs) {
  Tensor& g = grad_outputs[0];
  if (!g.defined()) return {};
  TANDEM_CHECK(g.shape() == leaf_.shape(), "backward: gradient of shape ", show(g.shape()),
               " for a leaf of shape ", show(leaf_.shape()));
  AutogradMeta& meta = leaf_.autograd_meta();
  if (!meta.grad) {
    // Steal the incoming buffer when nobody else holds it; otherwise keep a private copy, since
    // .grad is accumulated in place by later backward passes.
    if (g.impl_ptr().use_count() == 1 && g.is_contiguous() && g.offset() == 0 &&
        g.storage().use_count() == 1) {
      meta.grad = data_only(g).impl_ptr();
    } else {
      meta.grad = contiguous_copy(g).impl_ptr();
    }
  } else {
    ops::add_(Tensor(meta.grad), g);
  }
  for (const auto& hook : meta.grad_ready_hooks) hook(leaf_);
  return {};
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  AutogradMeta& meta = t.autograd_meta();
  if (meta.grad_fn) return {meta.grad_fn, meta.output_nr};
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    meta.grad_accumulator = acc;
  }
  return {acc, 0};
}

}  // namespace tandem::autograd
