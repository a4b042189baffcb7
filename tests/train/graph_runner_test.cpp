// The CUDA-graph runner's refusals, which need no GPU: a model with Dropout or with a momentum=None
// BatchNorm2d is named as an obstacle (the named models have none), a CPU device is refused, and
// the trainer refuses --cuda-graphs with several devices or --accumulate. Its GPU behaviour is in
// tests/train/cuda/.
#include <gtest/gtest.h>

#include <memory>

#include "errors.h"
#include "tandem/tandem.h"
#include "tandem/train/config.h"
#include "tandem/train/graph_runner.h"
#include "tandem/train/models.h"
#include "tandem/train/trainer.h"

namespace tandem::train {
namespace {

const InputSpec kImages{{1, 28, 28}, 10};

TEST(GraphObstacle, TheNamedModelsHaveNone) {
  for (const ModelKind kind : {ModelKind::SeedCnn, ModelKind::Mlp, ModelKind::Cnn}) {
    EXPECT_FALSE(graph_obstacle(*make_model(kind, kImages)).has_value()) << model_kind_name(kind);
  }
  EXPECT_FALSE(graph_obstacle(*make_model(ModelKind::ResNet8, {{3, 32, 32}, 10})).has_value());
}

TEST(GraphObstacle, DropoutAndACumulativeBatchNormAreNamedWithTheirPlace) {
  const nn::Sequential with_dropout(nn::Linear(4, 4), nn::ReLU(), nn::Dropout(0.25));
  const auto dropout = graph_obstacle(with_dropout);
  ASSERT_TRUE(dropout.has_value());
  testing::expect_contains(*dropout, "Dropout(p=0.250000) at '2'");

  const nn::Sequential cumulative(
      nn::Sequential(nn::BatchNorm2d({.num_features = 3, .momentum = std::nullopt})));
  nn::Sequential outer;
  outer.push_back(cumulative);
  const auto bn = graph_obstacle(outer);
  ASSERT_TRUE(bn.has_value());
  testing::expect_contains(*bn, "BatchNorm2d with momentum=None at '0.0'");

  EXPECT_FALSE(graph_obstacle(nn::Sequential(nn::Dropout(0.0), nn::ReLU())).has_value());
}

TEST(CudaGraphRunnerChecks, ACpuDeviceIsRefused) {
  auto model = make_model(ModelKind::SeedCnn, kImages);
  testing::expect_contains(testing::error_of([&] {
                             CudaGraphRunner runner(model, kCPU, nn::CrossEntropyLoss(),
                                                    Precision::Float32);
                           }),
                           "--cuda-graphs: graphs replay GPU work, but the device is cpu");
}

TEST(CudaGraphRunnerChecks, TheTrainerRefusesSeveralDevicesAndAccumulation) {
  auto model = make_model(ModelKind::SeedCnn, kImages);
  RunnerOptions options{.cuda_graphs = true};
  testing::expect_contains(
      testing::error_of([&] {
        (void)make_step_runner(model, parse_devices("cpu:2"), nn::CrossEntropyLoss(),
                               [] { return make_model(ModelKind::SeedCnn, kImages); }, options);
      }),
      "--cuda-graphs: graphs replay one GPU's step, but --devices gives cpu:0,cpu:1");
  TrainConfig c;
  c.cuda_graphs = true;
  c.accumulate = 2;
  testing::expect_contains(testing::error_of([&] { validate(c); }),
                           "--cuda-graphs: a graph replays one whole step, but --accumulate is 2");
}

}  // namespace
}  // namespace tandem::train
