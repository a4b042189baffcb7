// Node: one recorded operation on the tape. apply() maps the gradients of its outputs to the
// gradients of its inputs; next_edges() says where those go. FunctionNode holds the backward as
// a lambda written beside its forward (autograd/functions/*.cpp); AccumulateGrad ends the graph
// at a leaf, adds into .grad and fires the leaf's gradient-ready hooks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/tensor/tensor.h"

namespace tandem::autograd {

class Node;

struct Edge {
  std::shared_ptr<Node> node;  // null: this input needs no gradient
  std::uint32_t input_nr = 0;  // which gradient slot of `node`
};

class Node {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  virtual std::string name() const = 0;
  // grad_outputs: one per forward output (undefined when that output received no gradient).
  // Returns one gradient per input edge (undefined where none is needed).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  // Frees saved tensors once backward has used them (unless the graph is retained).
  virtual void release_saved() {}

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  bool needs_input_grad(std::size_t i) const {
    return i < next_edges_.size() && next_edges_[i].node != nullptr;
  }
  std::uint32_t num_outputs() const { return num_outputs_; }
  void set_num_outputs(std::uint32_t n) { num_outputs_ = n; }
  // Creation order on this thread: backward runs later-created nodes first.
  std::uint64_t sequence_nr() const { return sequence_nr_; }

 private:
  std::vector<Edge> next_edges_;
  std::uint32_t num_outputs_ = 1;
  std::uint64_t sequence_nr_;
};

// A node whose backward is a lambda. The lambda owns the saved tensors (store them through
// data_only() so outputs do not keep themselves alive through their own node).
class FunctionNode final : public Node {
 public:
  using Backward = std::function<std::vector<Tensor>(std::vector<Tensor>& grads, const Node& self)>;
  FunctionNode(std::string name, Backward backward)
      : name_(std::move(name)), backward_(std::move(backward)) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  void release_saved() override { backward_ = nullptr; }

 private:
  std::string name_;
  Backward backward_;
};

// The end of the graph for a leaf tensor that requires grad.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf) : leaf_(std::move(leaf)) {}
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

// Where the gradient of `t` must be sent: its grad_fn, its leaf accumulator, or nowhere.
Edge gradient_edge(const Tensor& t);

}  // namespace tandem::autograd
