// Shared by the DataParallel tests: two small models (the seed CNN at 1x8x8 and one with batch
// norm), fixed random batches, and training loops on one device and through DataParallel that
// record every loss and the final state dict. Shapes: x (N, 1, 8, 8), y (N) int64 in [0, 10).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem::testing {

struct SeedNet : nn::Module {  // the seed CNN, small: 1x8x8 -> 10
  nn::Conv2d conv1 = register_module("conv1", nn::Conv2d(1, 4, 3, 1, 1));
  nn::Conv2d conv2 = register_module("conv2", nn::Conv2d(4, 8, 3, 1, 1));
  nn::Linear fc = register_module("fc", nn::Linear(8 * 8 * 8, 10));
  Tensor forward(const Tensor& x) override {
    Tensor y = conv2(conv1(x));
    return fc(y.view({y.size(0), -1}));
  }
};

struct BnNet : nn::Module {  // conv -> batch norm -> relu, twice, then a linear layer
  nn::Conv2d conv1 = register_module("conv1", nn::Conv2d(1, 4, 3, 1, 1));
  nn::BatchNorm2d bn1 = register_module("bn1", nn::BatchNorm2d(4));
  nn::Conv2d conv2 = register_module("conv2", nn::Conv2d(4, 8, 3, 1, 1));
  nn::BatchNorm2d bn2 = register_module("bn2", nn::BatchNorm2d(8));
  nn::Linear fc = register_module("fc", nn::Linear(8 * 8 * 8, 10));
  Tensor forward(const Tensor& x) override {
    Tensor y = relu(bn2(conv2(relu(bn1(conv1(x))))));
    return fc(y.view({y.size(0), -1}));
  }
};

struct Batch {
  Tensor x;  // (N, 1, 8, 8)
  Tensor y;  // (N)
};

inline std::vector<Batch> make_batches(int count, std::int64_t size, std::uint64_t seed) {
  Generator g(seed);
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(
        {randn({size, 1, 8, 8}, {}, &g), randint(0, 10, {size}, {.dtype = DType::Int64}, &g)});
  }
  return out;
}

// A deep copy of a state dict in host memory (state_dict() returns the live tensors).
inline nn::StateDict snapshot(const nn::Module& m) {
  nn::StateDict out;
  for (const auto& [name, t] : m.state_dict()) {
    out.emplace_back(name, copy_to(contiguous_copy(t), kCPU));
  }
  return out;
}

template <typename Net>
std::shared_ptr<Net> model_from(const nn::StateDict& init) {
  auto m = std::make_shared<Net>();
  m->load_state_dict(init);
  return m;
}

struct TrainingRun {
  std::vector<double> losses;
  nn::StateDict state;
  std::string reduction;  // DataParallel::reduction(): "host" or "nccl"
};

constexpr optim::SGDOptions kSgd{.lr = 0.05, .momentum = 0.9};

inline Tensor cross_entropy_loss(const Tensor& out, const Tensor& y) {
  return nn::CrossEntropyLoss()(out, y);
}

// Plain training on one device: the reference.
template <typename Net>
TrainingRun train_single(const nn::StateDict& init, const std::vector<Batch>& batches) {
  auto model = model_from<Net>(init);
  optim::SGD opt(model->parameters(), kSgd);
  TrainingRun run;
  for (const Batch& b : batches) {
    opt.zero_grad();
    Tensor loss = cross_entropy_loss(model->forward(b.x), b.y);
    loss.backward();
    opt.step();
    run.losses.push_back(loss.item());
  }
  run.state = snapshot(*model);
  return run;
}

// Trains `model` (DataParallel's master) through `dp` on `batches`, with a fresh SGD (kSgd).
inline TrainingRun train_through(nn::DataParallel& dp, const nn::Module& model,
                                 const std::vector<Batch>& batches) {
  optim::SGD opt(model.parameters(), kSgd);
  TrainingRun run;
  for (const Batch& b : batches) {
    opt.zero_grad();
    nn::StepResult r = dp.forward_backward(b.x, b.y, cross_entropy_loss);
    EXPECT_TRUE(r.synchronized);
    dp.step(opt);
    run.losses.push_back(r.loss);
  }
  run.state = snapshot(model);
  run.reduction = dp.reduction();
  return run;
}

// The model starts on the first device (its GPU, or the host for a CPU replica).
template <typename Net>
TrainingRun train_dp(const nn::StateDict& init, const std::vector<Batch>& batches,
                     std::vector<Device> devices, nn::DataParallelOptions options = {}) {
  auto model = model_from<Net>(init);
  if (!devices.front().is_cpu()) model->to(devices.front());
  // One oneDNN thread per replica unless a test asks otherwise: the suite shares 2 cores.
  if (options.threads_per_replica == 0) options.threads_per_replica = 1;
  nn::DataParallel dp(model, std::move(devices), std::move(options));
  return train_through(dp, *model, batches);
}

// Each batch as two micro-steps of half its rows (accumulate = 2) on `devices`, the model starting
// on the first: the same update as one device on the whole batch.
template <typename Net>
TrainingRun train_dp_accumulated(const nn::StateDict& init, const std::vector<Batch>& batches,
                                 std::vector<Device> devices,
                                 nn::DataParallelOptions options = {}) {
  auto model = model_from<Net>(init);
  if (!devices.front().is_cpu()) model->to(devices.front());
  options.accumulate = 2;
  if (options.threads_per_replica == 0) options.threads_per_replica = 1;
  nn::DataParallel dp(model, std::move(devices), std::move(options));
  optim::SGD opt(model->parameters(), kSgd);
  TrainingRun run;
  for (const Batch& b : batches) {
    const std::int64_t half = b.x.size(0) / 2;
    opt.zero_grad();
    const nn::StepResult first = dp.forward_backward(
        b.x.narrow(0, 0, half), b.y.narrow(0, 0, half), cross_entropy_loss);
    EXPECT_FALSE(first.synchronized);
    const nn::StepResult second =
        dp.forward_backward(b.x.narrow(0, half, b.x.size(0) - half),
                            b.y.narrow(0, half, b.x.size(0) - half), cross_entropy_loss);
    EXPECT_TRUE(second.synchronized);
    dp.step(opt);
  }
  run.state = snapshot(*model);
  run.reduction = dp.reduction();
  return run;
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = contiguous_copy(a), cb = contiguous_copy(b);
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

// Same keys in the same order, every tensor within tolerance (or bitwise when rtol < 0).
inline ::testing::AssertionResult states_match(const nn::StateDict& a, const nn::StateDict& b,
                                               double rtol, double atol) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "state sizes differ";
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first) {
      return ::testing::AssertionFailure() << a[i].first << " vs " << b[i].first;
    }
    if (rtol < 0) {
      if (!bitwise_equal(a[i].second, b[i].second)) {
        return ::testing::AssertionFailure() << a[i].first << " differs bitwise";
      }
      continue;
    }
    Tensor x = a[i].second, y = b[i].second;
    if (x.dtype() == DType::Int64) {
      if (x.to_vector<std::int64_t>() != y.to_vector<std::int64_t>()) {
        return ::testing::AssertionFailure() << a[i].first << " differs";
      }
      continue;
    }
    auto close = allclose(x, y, rtol, atol);
    if (!close) return ::testing::AssertionFailure() << a[i].first << ": " << close.message();
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult losses_match(const std::vector<double>& a,
                                               const std::vector<double>& b, double rtol) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "loss counts differ";
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::abs(a[i] - b[i]) > rtol * std::abs(b[i])) {
      return ::testing::AssertionFailure() << "step " << i << ": loss " << a[i] << " vs " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tandem::testing
