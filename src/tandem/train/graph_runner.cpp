// CudaGraphRunner: warm-up, capture on static buffers, replay, and the eager fallback.
#include "tandem/train/graph_runner.h"

#include <chrono>
#include <sstream>
#include <utility>

#include "tandem/autograd/autocast.h"
#include "tandem/autograd/grad_mode.h"
#include "tandem/device/cuda/graph.h"
#include "tandem/device/cuda/memory.h"
#include "tandem/nn/modules/batchnorm.h"
#include "tandem/nn/modules/dropout.h"
#include "tandem/tensor/factories.h"
#include "tandem/train/evaluate.h"

namespace tandem::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The batch's shapes and dtypes: one graph per key.
std::string key_of(const data::Batch& batch) {
  std::ostringstream key;
  key << show(batch.data.shape()) << dtype_name(batch.data.dtype()) << " "
      << show(batch.target.shape()) << dtype_name(batch.target.dtype());
  return key.str();
}

void find_obstacle(const nn::Module& module, const std::string& name,
                   std::optional<std::string>& found) {
  if (found) return;
  const std::string where = name.empty() ? "the model" : "'" + name + "'";
  if (const auto* d = dynamic_cast<const nn::Dropout*>(&module); d && d->p > 0) {
    found = "Dropout(p=" + std::to_string(d->p) + ") at " + where +
            ": a graph would replay the same random mask every step";
    return;
  }
  if (const auto* bn = dynamic_cast<const nn::BatchNorm2d*>(&module);
      bn && bn->options.track_running_stats && !bn->options.momentum) {
    found = "BatchNorm2d with momentum=None at " + where +
            ": its averaging factor is read on the host every step";
    return;
  }
  for (const auto& [child, m] : module.named_children()) {
    find_obstacle(*m, name.empty() ? child : name + "." + child, found);
  }
}

}  // namespace

std::optional<std::string> graph_obstacle(const nn::Module& model) {
  std::optional<std::string> found;
  find_obstacle(model, "", found);
  return found;
}

struct CudaGraphRunner::Graph {
  Tensor data, target;        // static inputs on the device, (B, ...) and (B)
  Tensor loss, correct;       // static outputs: () float32 mean loss, () float64 count
  std::vector<Tensor> grads;  // per parameter, as the backward left it (undefined: none)
  std::unique_ptr<cuda::CapturedGraph> graph;
};

CudaGraphRunner::CudaGraphRunner(std::shared_ptr<nn::Module> model, Device device,
                                 nn::CrossEntropyLoss criterion, Precision precision,
                                 std::function<void(const std::string&)> note)
    : model_(std::move(model)),
      params_(model_->parameters()),
      device_(device),
      criterion_(std::move(criterion)),
      precision_(precision),
      note_(std::move(note)),
      eager_(model_, device, criterion_, 1, precision) {
  TANDEM_CHECK(device_.is_cuda(), "--cuda-graphs: graphs replay GPU work, but the device is ",
               device_);
  if (const auto obstacle = graph_obstacle(*model_)) {
    TANDEM_FAIL("--cuda-graphs: the model cannot train from a graph: ", *obstacle,
                "; run without --cuda-graphs");
  }
}

CudaGraphRunner::~CudaGraphRunner() {
  // The parameters may still point at a graph's gradient buffers; those stay valid on their own.
  graphs_.clear();
}

StepResult CudaGraphRunner::forward_backward(const data::Batch& batch) {
  if (!off_reason_.empty()) return eager_.forward_backward(batch);
  const std::string key = key_of(batch);
  if (const auto it = graphs_.find(key); it != graphs_.end()) return replay(*it->second, batch);
  if (warmed_.insert(key).second) return eager_.forward_backward(batch);
  Graph* graph = capture(batch);
  return graph != nullptr ? replay(*graph, batch) : eager_.forward_backward(batch);
}

CudaGraphRunner::Graph* CudaGraphRunner::capture(const data::Batch& batch) {
  for (const Tensor& p : params_) {
    TANDEM_CHECK(!p.grad().defined(), "--cuda-graphs: a parameter has a gradient before the step; "
                 "a graph writes each step's gradients afresh (zero_grad with set_to_none)");
  }
  auto g = std::make_unique<Graph>();
  g->data = empty(batch.data.shape(), {.dtype = batch.data.dtype(), .device = device_});
  g->target = empty(batch.target.shape(), {.dtype = batch.target.dtype(), .device = device_});
  try {
    g->graph = cuda::CapturedGraph::capture(device_.index, [&] {
      const AutocastGuard autocast(precision_);
      const Tensor logits = (*model_)(g->data);
      const Tensor loss = criterion_(logits, g->target);
      g->correct = correct_count(logits, g->target);
      loss.backward();
      g->loss = loss.detach();
    });
  } catch (const Error& e) {
    for (const Tensor& p : params_) p.set_grad(Tensor());  // unwritten buffers
    off_reason_ = e.what();
    if (note_) note_("CUDA graphs off, training eagerly from here: " + off_reason_);
    return nullptr;
  }
  for (const Tensor& p : params_) {
    g->grads.push_back(p.grad());
    p.set_grad(Tensor());  // set again by each replay
  }
  return graphs_.emplace(key_of(batch), std::move(g)).first->second.get();
}

StepResult CudaGraphRunner::replay(Graph& g, const data::Batch& batch) {
  const auto start = Clock::now();
  cuda::reset_peak_memory(device_.index);
  // Queued on the compute stream before the replay; the host batch is staged, so it is free now.
  copy_into(g.data, batch.data.is_contiguous() ? batch.data : contiguous_copy(batch.data));
  copy_into(g.target, batch.target.is_contiguous() ? batch.target : contiguous_copy(batch.target));
  g.graph->replay();
  ++replays_;
  {
    const NoGradGuard no_grad;
    for (std::size_t i = 0; i < params_.size(); ++i) params_[i].set_grad(g.grads[i]);
  }
  StepResult r;
  r.samples = batch.target.size(0);
  r.loss = g.loss.to(kCPU).item();  // waits for the replay; its deferred checks speak here
  r.correct = static_cast<std::int64_t>(g.correct.to(kCPU).item());
  const double seconds = seconds_since(start);
  r.devices.push_back({.device = device_.str(), .samples = r.samples, .seconds = seconds,
                       .forward_s = seconds,
                       .peak_bytes = static_cast<std::int64_t>(
                           cuda::memory_stats(device_.index).peak_in_use)});
  return r;
}

}  // namespace tandem::train
