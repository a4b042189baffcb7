// Whole models trained on a GPU against the same models on the CPU: the seed CNN (conv, relu,
// max pool, linear), the MLP, and ResNet-8 (batch norm, adaptive pooling, residual adds), three
// steps each with SGD (momentum) or Adam from one initialisation. Checks that every op the models
// use dispatches to the CUDA kernels and that autograd and the optimizers' GPU steps agree with
// the CPU: the losses of each step and the final state dicts (weights and running statistics).
#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>

#include "parity.h"
#include "tandem/tandem.h"
#include "tandem/train/models.h"

namespace tandem {
namespace {

using testing::near_cpu;
using testing::random_cpu;

struct Case {
  std::string model;
  Shape sample;
  bool adam;
};

void PrintTo(const Case& c, std::ostream* out) { *out << c.model << (c.adam ? " adam" : " sgd"); }

Tensor labels(std::int64_t n, std::int64_t classes) {
  Tensor t = empty({n}, {.dtype = DType::Int64});
  for (std::int64_t i = 0; i < n; ++i) t.data<std::int64_t>()[i] = (i * 7 + 3) % classes;
  return t;
}

class CudaModelTraining : public ::testing::TestWithParam<Case> {};

TEST_P(CudaModelTraining, ThreeStepsOnTheGpuEqualThreeOnTheCpu) {
  TANDEM_REQUIRE_GPU();
  const Case& c = GetParam();
  const train::InputSpec input{.sample_shape = c.sample, .classes = 10};
  const auto kind = train::parse_model_kind(c.model);
  auto cpu_model = train::make_model(kind, input);
  auto gpu_model = train::make_model(kind, input);
  gpu_model->load_state_dict(cpu_model->state_dict());
  gpu_model->to(testing::kGpu);

  const auto optimizer_for = [&](nn::Module& m) -> std::unique_ptr<optim::Optimizer> {
    if (c.adam)
      return std::make_unique<optim::Adam>(m.parameters(), optim::AdamOptions{.lr = 1e-3});
    return std::make_unique<optim::SGD>(m.parameters(),
                                        optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  };
  auto cpu_opt = optimizer_for(*cpu_model);
  auto gpu_opt = optimizer_for(*gpu_model);
  nn::CrossEntropyLoss criterion;

  Shape batch_shape = c.sample;
  batch_shape.insert(batch_shape.begin(), 8);
  for (int step = 0; step < 3; ++step) {
    const Tensor x = random_cpu(batch_shape, 100 + static_cast<std::uint64_t>(step));
    const Tensor y = labels(8, 10);
    cpu_opt->zero_grad();
    gpu_opt->zero_grad();
    const Tensor cpu_loss = criterion(cpu_model->forward(x), y);
    const Tensor gpu_loss = criterion(gpu_model->forward(x.to(testing::kGpu)), y.to(testing::kGpu));
    EXPECT_TRUE(near_cpu(gpu_loss, cpu_loss, 1e-4, 1e-3)) << c.model << " step " << step;
    cpu_loss.backward();
    gpu_loss.backward();
    cpu_opt->step();
    gpu_opt->step();
  }
  const auto cpu_state = cpu_model->state_dict();
  const auto gpu_state = gpu_model->state_dict();
  ASSERT_EQ(cpu_state.size(), gpu_state.size());
  for (std::size_t i = 0; i < cpu_state.size(); ++i) {
    EXPECT_TRUE(near_cpu(gpu_state[i].second, cpu_state[i].second, 1e-4, 1e-3))
        << c.model << " " << cpu_state[i].first;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaModelTraining,
                         ::testing::Values(Case{"seed-cnn", {1, 28, 28}, false},
                                           Case{"mlp", {1, 28, 28}, true},
                                           Case{"resnet8", {3, 32, 32}, false}),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           std::string name =
                               param.param.model + (param.param.adam ? "_adam" : "_sgd");
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace tandem
