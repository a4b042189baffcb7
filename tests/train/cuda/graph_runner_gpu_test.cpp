// CudaGraphRunner on cuda:0 against the eager one-GPU runner on the same initial weights and
// batches: the losses, correct counts and final weights of SGD training are the same (the graph
// replays the very kernels the eager step queues, in the same order), also with batch norm (its
// running statistics and batch count too), under bf16 autocast, and across a change of batch
// shape (each shape warms up, is captured, then replayed). A target out of range is reported at
// a replay; a model that waits for the GPU in its forward cannot be captured, and the runner says
// so once and trains eagerly with the same results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "errors.h"
#include "gpu_skip.h"
#include "tandem/tandem.h"
#include "tandem/train/graph_runner.h"
#include "tandem/train/models.h"
#include "tandem/train/trainer.h"

namespace tandem::train {
namespace {

const Device kGpu0(DeviceType::CUDA, 0);

struct TrainingRun {
  std::vector<double> losses;
  std::vector<std::int64_t> correct;
  nn::StateDict state;  // on the host
};

std::vector<data::Batch> batches_of(const InputSpec& input, const std::vector<std::int64_t>& rows,
                                    std::uint64_t seed) {
  Generator g(seed);
  std::vector<data::Batch> out;
  for (const std::int64_t n : rows) {
    Shape shape{n};
    shape.insert(shape.end(), input.sample_shape.begin(), input.sample_shape.end());
    out.push_back({randn(shape, {}, &g),
                   randint(0, input.classes, {n}, {.dtype = DType::Int64}, &g)});
  }
  return out;
}

nn::StateDict host_state(const nn::Module& model) {
  nn::StateDict out;
  for (const auto& [name, t] : model.state_dict()) out.emplace_back(name, copy_to(t, kCPU));
  return out;
}

// SGD with momentum over `batches` through `runner` (made for `model`, already on the GPU).
TrainingRun train(nn::Module& model, StepRunner& runner, const std::vector<data::Batch>& batches) {
  optim::SGD sgd(model.parameters(), {.lr = 0.05, .momentum = 0.9});
  TrainingRun run;
  for (const data::Batch& b : batches) {
    sgd.zero_grad();
    StepResult r = runner.forward_backward(b);
    runner.optimizer_step(sgd, r);
    run.losses.push_back(r.loss);
    run.correct.push_back(r.correct);
  }
  run.state = host_state(model);
  return run;
}

std::shared_ptr<nn::Module> model_on_gpu(ModelKind kind, const InputSpec& input) {
  manual_seed(11);
  auto model = make_model(kind, input);
  model->to(kGpu0);
  return model;
}

void expect_same_run(const TrainingRun& graphed, const TrainingRun& eager) {
  ASSERT_EQ(graphed.losses.size(), eager.losses.size());
  for (std::size_t i = 0; i < eager.losses.size(); ++i) {
    EXPECT_NEAR(graphed.losses[i], eager.losses[i], 1e-6 * (1 + std::abs(eager.losses[i])))
        << "step " << i + 1;
    EXPECT_EQ(graphed.correct[i], eager.correct[i]) << "step " << i + 1;
  }
  ASSERT_EQ(graphed.state.size(), eager.state.size());
  for (std::size_t i = 0; i < eager.state.size(); ++i) {
    const auto& [name, want] = eager.state[i];
    const Tensor got = graphed.state[i].second;
    ASSERT_EQ(got.shape(), want.shape()) << name;
    const Tensor a = contiguous_copy(convert_dtype(got, DType::Float64));
    const Tensor b = contiguous_copy(convert_dtype(want, DType::Float64));
    double worst = 0;
    for (std::int64_t k = 0; k < a.numel(); ++k) {
      worst = std::max(worst, std::abs(a.data<double>()[k] - b.data<double>()[k]));
    }
    EXPECT_LE(worst, 1e-5) << name;
  }
}

// Eager and graphed training of `kind` on the same batches; returns the graph runner's counts.
void expect_graphs_train_as_eager(ModelKind kind, const InputSpec& input,
                                  const std::vector<std::int64_t>& rows, Precision precision,
                                  std::size_t graphs, std::int64_t replays) {
  const std::vector<data::Batch> batches = batches_of(input, rows, 5);
  auto eager_model = model_on_gpu(kind, input);
  SingleDeviceRunner eager(eager_model, kGpu0, nn::CrossEntropyLoss(), 1, precision);
  const TrainingRun want = train(*eager_model, eager, batches);

  auto graph_model = model_on_gpu(kind, input);
  std::vector<std::string> notes;
  CudaGraphRunner graphed(graph_model, kGpu0, nn::CrossEntropyLoss(), precision,
                          [&](const std::string& n) { notes.push_back(n); });
  const TrainingRun got = train(*graph_model, graphed, batches);
  EXPECT_TRUE(notes.empty()) << notes.front();
  EXPECT_EQ(graphed.graphs(), graphs);
  EXPECT_EQ(graphed.replays(), replays);
  expect_same_run(got, want);
}

TEST(CudaGraphRunner, SeedCnnStepsFromGraphsEqualEagerStepsAcrossABatchShapeChange) {
  TANDEM_REQUIRE_GPU();
  // 32: warm-up, capture + replay, then replays; 20 likewise from its first appearance.
  expect_graphs_train_as_eager(ModelKind::SeedCnn, {{1, 28, 28}, 10},
                               {32, 32, 32, 32, 20, 32, 20, 20}, Precision::Float32, 2, 6);
}

TEST(CudaGraphRunner, BatchNormStatisticsAndCountAdvanceAtEachReplay) {
  TANDEM_REQUIRE_GPU();
  expect_graphs_train_as_eager(ModelKind::ResNet8, {{3, 32, 32}, 10}, {16, 16, 16, 16, 16},
                               Precision::Float32, 1, 4);
}

TEST(CudaGraphRunner, Bf16AutocastStepsFromGraphsEqualEagerOnes) {
  TANDEM_REQUIRE_GPU();
  expect_graphs_train_as_eager(ModelKind::Cnn, {{1, 28, 28}, 10}, {64, 64, 64, 64},
                               Precision::BFloat16, 1, 3);
}

TEST(CudaGraphRunner, ATargetOutOfRangeIsReportedAtAReplay) {
  TANDEM_REQUIRE_GPU();
  const InputSpec input{{1, 28, 28}, 10};
  auto model = model_on_gpu(ModelKind::SeedCnn, input);
  CudaGraphRunner runner(model, kGpu0, nn::CrossEntropyLoss(), Precision::Float32);
  optim::SGD sgd(model->parameters(), {.lr = 0.01});
  for (const data::Batch& b : batches_of(input, {8, 8, 8}, 3)) {
    sgd.zero_grad();
    runner.forward_backward(b);
    sgd.step();
  }
  ASSERT_EQ(runner.replays(), 2);
  data::Batch bad = batches_of(input, {8}, 4).front();
  bad.target.data<std::int64_t>()[5] = 10;
  sgd.zero_grad();
  testing::expect_contains(testing::error_of([&] { runner.forward_backward(bad); }),
                           "target 10 at index 5 is out of range for 10 classes");
}

// The seed CNN behind a forward that reads its input on the host: a wait for the GPU.
struct HostReading : nn::Module {
  std::shared_ptr<nn::Module> inner;
  explicit HostReading(std::shared_ptr<nn::Module> m) : inner(std::move(m)) {
    add_child("inner", inner);
  }
  Tensor forward(const Tensor& x) override {
    (void)copy_to(x, kCPU);
    return (*inner)(x);
  }
};

TEST(CudaGraphRunner, AModelThatWaitsForTheGpuTrainsEagerlyAfterOneNote) {
  TANDEM_REQUIRE_GPU();
  const InputSpec input{{1, 28, 28}, 10};
  const std::vector<data::Batch> batches = batches_of(input, {16, 16, 16, 16}, 8);
  auto eager_model = std::make_shared<HostReading>(model_on_gpu(ModelKind::SeedCnn, input));
  SingleDeviceRunner eager(eager_model, kGpu0, nn::CrossEntropyLoss());
  const TrainingRun want = train(*eager_model, eager, batches);

  auto model = std::make_shared<HostReading>(model_on_gpu(ModelKind::SeedCnn, input));
  std::vector<std::string> notes;
  CudaGraphRunner graphed(model, kGpu0, nn::CrossEntropyLoss(), Precision::Float32,
                          [&](const std::string& n) { notes.push_back(n); });
  const TrainingRun got = train(*model, graphed, batches);
  ASSERT_EQ(notes.size(), 1u);
  testing::expect_contains(notes.front(), "CUDA graphs off");
  EXPECT_FALSE(graphed.off_reason().empty());
  EXPECT_EQ(graphed.replays(), 0);
  expect_same_run(got, want);
}

}  // namespace
}  // namespace tandem::train
