// The one-GPU step runner with CUDA graphs (--cuda-graphs). The first global batch of each shape
// runs eagerly: it fills cuDNN's algorithm cache and the caching allocator. The second is captured
// into a graph (device/cuda/graph.h) of the whole forward, loss, correct-prediction count and
// backward, reading static input buffers; from then on a batch of that shape is copied into the
// buffers and the graph replayed with one launch, and the gradients it writes become the
// parameters' .grad (the optimizer's fused update stays eager). An epoch's short last batch has a
// shape of its own. If a capture fails, the runner reports why once (`note`) and trains eagerly
// from then on, losing nothing: a capture runs no kernel.
//
// A replay's forward and backward are one launch, so its time is counted as forward time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tandem/train/trainer.h"

namespace tandem::train {

// Why `model` cannot train from a graph, or nullopt: a Dropout with p > 0 (a replay would repeat
// its random mask), or a BatchNorm2d with momentum=None (its factor is read on the host).
std::optional<std::string> graph_obstacle(const nn::Module& model);

class CudaGraphRunner final : public StepRunner {
 public:
  // `device` must be a GPU and `model` free of graph obstacles (both checked).
  CudaGraphRunner(std::shared_ptr<nn::Module> model, Device device, nn::CrossEntropyLoss criterion,
                  Precision precision, std::function<void(const std::string&)> note = nullptr);
  ~CudaGraphRunner() override;
  StepResult forward_backward(const data::Batch& batch) override;

  std::size_t graphs() const { return graphs_.size(); }  // captured so far
  std::int64_t replays() const { return replays_; }
  const std::string& off_reason() const { return off_reason_; }  // empty while graphs are on

 private:
  struct Graph;
  Graph* capture(const data::Batch& batch);  // nullptr when the capture failed (graphs now off)
  StepResult replay(Graph& graph, const data::Batch& batch);

  std::shared_ptr<nn::Module> model_;
  std::vector<Tensor> params_;
  Device device_;
  nn::CrossEntropyLoss criterion_;
  Precision precision_;
  std::function<void(const std::string&)> note_;
  SingleDeviceRunner eager_;
  std::set<std::string> warmed_;  // batch shapes run eagerly once
  std::map<std::string, std::unique_ptr<Graph>> graphs_;
  std::int64_t replays_ = 0;
  std::string off_reason_;
};

}  // namespace tandem::train
