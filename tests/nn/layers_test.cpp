// Tests of module forwards: each module against its functional result, pooling and flatten
// shapes, BatchNorm2d and Dropout in train and eval mode, the loss modules against torch 1.13
// numbers, and gradient checks of whole Sequential models moved to float64.
//
// The torch numbers below come from /usr/bin/python3 (torch 1.13) with this input helper:
//   import math, torch
//   def inp(shape, scale=0.37):
//       n = math.prod(shape)
//       return torch.tensor([math.sin(scale * i) * (1 + 0.1 * (i % 5)) for i in range(n)],
//                           dtype=torch.float64).reshape(shape)
#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

namespace F = nn::functional;
using testing::allclose;
using testing::gradcheck;
using testing::random_input;

// The same values as the python inp() above.
Tensor inp(const Shape& shape, double scale = 0.37, DType dtype = DType::Float64) {
  std::vector<double> v(static_cast<std::size_t>(numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = std::sin(scale * static_cast<double>(i)) * (1 + 0.1 * static_cast<double>(i % 5));
  }
  return from_vector(v, shape, {.dtype = dtype});
}

TEST(Layers, LinearMatchesFunctionalForAnyLeadingDims) {
  nn::Linear fc(4, 3);
  Tensor x = randn({5, 4});
  EXPECT_TRUE(allclose(fc(x), F::linear(x, fc.weight, fc.bias), 0, 0));
  Tensor x3 = randn({2, 5, 4});
  Tensor y3 = fc(x3);
  EXPECT_EQ(y3.shape(), (Shape{2, 5, 3}));
  EXPECT_TRUE(
      allclose(y3.select(0, 1), F::linear(x3.select(0, 1).contiguous(), fc.weight, fc.bias)));
  EXPECT_EQ(fc(randn({4})).shape(), (Shape{3}));
  try {
    fc(randn({5, 7}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Linear(4, 3): expected input (*, 4), got (5, 7)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Layers, Conv2dMatchesFunctional) {
  nn::Conv2d conv({.in_channels = 4,
                   .out_channels = 6,
                   .kernel_size = {3, 2},
                   .stride = 2,
                   .padding = {1, 0},
                   .dilation = {1, 2},
                   .groups = 2});
  Tensor x = randn({2, 4, 7, 8});
  Tensor y = conv(x);
  EXPECT_EQ(y.shape(), (Shape{2, 6, 4, 3}));
  Tensor expected =
      F::conv2d(x, conv.weight, conv.bias,
                {.stride = {2, 2}, .padding = {1, 0}, .dilation = {1, 2}, .groups = 2});
  EXPECT_TRUE(allclose(y, expected, 0, 0));
  EXPECT_THROW(conv(randn({2, 3, 7, 8})), Error);
  EXPECT_THROW(conv(randn({4, 7, 8})), Error);
}

TEST(Layers, ActivationsAndFlatten) {
  Tensor x = inp({2, 3, 4, 5}, 0.9, DType::Float32);
  EXPECT_TRUE(allclose(nn::ReLU()(x), F::relu(x), 0, 0));
  EXPECT_TRUE(allclose(nn::GELU()(x), F::gelu(x), 0, 0));
  EXPECT_TRUE(allclose(nn::Sigmoid()(x), F::sigmoid(x), 0, 0));
  EXPECT_TRUE(allclose(nn::Tanh()(x), F::tanh(x), 0, 0));
  EXPECT_EQ(nn::Flatten()(x).shape(), (Shape{2, 60}));
  EXPECT_EQ(nn::Flatten(0)(x).shape(), (Shape{120}));
  EXPECT_EQ(nn::Flatten(1, 2)(x).shape(), (Shape{2, 12, 5}));
  EXPECT_EQ(nn::Flatten()(x).to_vector<double>(), x.to_vector<double>());
}

TEST(Layers, PoolingModules) {
  Tensor x = arange(0, 16).view({1, 1, 4, 4});
  EXPECT_TRUE(allclose(nn::MaxPool2d(2)(x), {5, 7, 13, 15}));
  EXPECT_TRUE(allclose(nn::AvgPool2d(2)(x), {2.5, 4.5, 10.5, 12.5}));
  EXPECT_TRUE(allclose(nn::AdaptiveAvgPool2d(1)(x), {7.5}));
  EXPECT_EQ(nn::AdaptiveAvgPool2d({2, 1})(x).shape(), (Shape{1, 1, 2, 1}));
  // Stride 1 and padding 1: (4 + 2 - 3) / 1 + 1 = 4.
  nn::MaxPool2d overlapping(3, 1, 1);
  EXPECT_EQ(overlapping(x).shape(), (Shape{1, 1, 4, 4}));
  EXPECT_TRUE(allclose(overlapping(x), F::max_pool2d(x, overlapping.params()), 0, 0));
  nn::AvgPool2d avg(
      {.kernel_size = 3, .stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false});
  EXPECT_TRUE(allclose(avg(x), F::avg_pool2d(x, avg.params()), 0, 0));
  EXPECT_EQ(nn::MaxPool2d(2).params().stride, (std::array<std::int64_t, 2>{2, 2}));
  EXPECT_THROW(nn::MaxPool2d(2)(arange(0, 16).view({4, 4})), Error);
}

TEST(Layers, BatchNorm2dTrainEvalAgainstTorch) {
  // bn = torch.nn.BatchNorm2d(3).double(); x = inp((2, 3, 2, 2))
  // y1 = bn(x); y2 = bn(x * 2 + 1); y1.flatten()[:6], bn.running_mean, bn.running_var
  // bn.eval(); bn(x).flatten()[:6]
  nn::BatchNorm2d bn(3);
  bn.to(DType::Float64);
  Tensor x = inp({2, 3, 2, 2});
  Tensor y1 = bn(x);
  bn(x * 2.0 + 1.0);
  EXPECT_TRUE(allclose(y1.flatten().slice(0, 0, 6),
                       {0.2730056226018368, 0.707999336244729, 1.1578562431021766,
                        1.546358075091413, 1.4540100095807027, 0.6477672458287991},
                       1e-9, 1e-12));
  EXPECT_TRUE(allclose(bn.running_mean,
                       {0.027602053241540952, 0.2778917073327526, 0.1992608161697517}, 1e-12,
                       1e-14));
  EXPECT_TRUE(
      allclose(bn.running_var, {1.2782698041130467, 0.9714852288790528, 1.134716934769345}, 1e-12));
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 2);
  bn.eval();
  Tensor ye = bn(x);
  EXPECT_TRUE(allclose(ye.flatten().slice(0, 0, 6),
                       {-0.024413408919662302, 0.32741157556474876, 0.6912579814124872,
                        1.005480110893626, 1.1326004352484442, 0.6933366375127512},
                       1e-9, 1e-12));
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 2);  // eval does not count
  const std::vector<double> mean_before = bn.running_mean.to_vector<double>();
  bn(x * 3.0);
  EXPECT_EQ(bn.running_mean.to_vector<double>(), mean_before);
}

TEST(Layers, BatchNorm2dCumulativeAverageAndNoRunningStats) {
  // bn2 = torch.nn.BatchNorm2d(3, momentum=None).double(); bn2(x); bn2(x * 2 + 1)
  // bn2.running_mean, bn2.running_var
  nn::BatchNorm2d cma({.num_features = 3, .momentum = std::nullopt});
  cma.to(DType::Float64);
  Tensor x = inp({2, 3, 2, 2});
  cma(x);
  cma(x * 2.0 + 1.0);
  EXPECT_TRUE(allclose(cma.running_mean,
                       {0.12552786159417734, 1.4201295206866513, 1.0134180146711294}, 1e-12));
  EXPECT_TRUE(allclose(cma.running_var,
                       {2.3891316536379934, 0.8239042289747585, 1.6567190549456376}, 1e-12));

  // Without running stats eval mode still normalises with the batch statistics.
  nn::BatchNorm2d batch_only({.num_features = 3, .affine = false, .track_running_stats = false});
  batch_only.to(DType::Float64);
  Tensor train_out = batch_only(x);
  batch_only.eval();
  EXPECT_TRUE(allclose(batch_only(x), train_out, 0, 0));
  EXPECT_TRUE(allclose(train_out.mean({0, 2, 3}), {0, 0, 0}, 0, 1e-12));
  EXPECT_THROW(cma(randn({2, 4, 2, 2}, {.dtype = DType::Float64})), Error);
  EXPECT_THROW(cma(randn({2, 3, 2}, {.dtype = DType::Float64})), Error);
}

TEST(Layers, DropoutTrainEval) {
  nn::Dropout drop(0.25);
  Tensor x = ones({100, 100});
  Tensor y = drop(x);
  std::size_t zeros_seen = 0;
  for (double v : y.to_vector<double>()) {
    if (v == 0.0) {
      ++zeros_seen;
    } else {
      EXPECT_FLOAT_EQ(v, 1.0 / 0.75);
    }
  }
  EXPECT_GT(zeros_seen, 2200u);  // 2500 expected; sd 43
  EXPECT_LT(zeros_seen, 2800u);
  drop.eval();
  EXPECT_TRUE(drop(x).is_same(x) || allclose(drop(x), x, 0, 0));
  nn::Dropout none(0.0);
  EXPECT_TRUE(allclose(none(x), x, 0, 0));
  Generator g1(8), g2(8);
  nn::Dropout a(0.5, &g1), b(0.5, &g2);
  EXPECT_EQ(a(x).to_vector<double>(), b(x).to_vector<double>());
}

TEST(Layers, LossModulesAgainstTorch) {
  // logits = inp((4, 5)); target = torch.tensor([1, 0, 4, 2])
  // CrossEntropyLoss()(logits, target), CrossEntropyLoss(label_smoothing=0.1,
  //   reduction='sum')(logits, target) -> 1.7601583850102192 7.0229425250736055
  Tensor logits = inp({4, 5});
  Tensor target = from_vector(std::vector<std::int64_t>{1, 0, 4, 2}, {4});
  EXPECT_NEAR(nn::CrossEntropyLoss()(logits, target).item(), 1.7601583850102192, 1e-12);
  nn::CrossEntropyLoss smoothed({.label_smoothing = 0.1, .reduction = Reduction::Sum});
  EXPECT_NEAR(smoothed(logits, target).item(), 7.0229425250736055, 1e-12);
  EXPECT_TRUE(allclose(smoothed(logits, target),
                       F::cross_entropy(logits, target, 0.1, Reduction::Sum), 0, 0));
  EXPECT_THROW(nn::CrossEntropyLoss({.label_smoothing = 1.5}), Error);
  EXPECT_THROW(nn::CrossEntropyLoss()(logits, from_vector(std::vector<std::int64_t>{1, 0}, {2})),
               Error);
  EXPECT_THROW(nn::CrossEntropyLoss()(logits, ones({4})), Error);

  // a = inp((3, 4)); b = inp((3, 4), 0.11)
  // MSELoss()(a, b), MSELoss(reduction='sum')(a, b) -> 0.8457583835093562 10.149100602112274
  Tensor a = inp({3, 4}), b = inp({3, 4}, 0.11);
  EXPECT_NEAR(nn::MSELoss()(a, b).item(), 0.8457583835093562, 1e-12);
  EXPECT_NEAR(nn::MSELoss(Reduction::Sum)(a, b).item(), 10.149100602112274, 1e-12);
  EXPECT_THROW(nn::MSELoss()(a, inp({4, 3})), Error);
}

TEST(Layers, GradcheckSequentialOfLinearLayersInFloat64) {
  manual_seed(21);
  nn::Sequential model(nn::Linear(4, 5), nn::GELU(), nn::Linear(5, 3), nn::Tanh());
  model.to(DType::Float64);
  for (const Tensor& p : model.parameters()) ASSERT_EQ(p.dtype(), DType::Float64);
  std::vector<Tensor> inputs{random_input({6, 4}, 1)};
  for (const Tensor& p : model.parameters()) inputs.push_back(p);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return model(in[0]); }, inputs));
}

TEST(Layers, GradcheckConvBatchNormModelInFloat64) {
  manual_seed(22);
  nn::Sequential model(nn::Conv2d(2, 3, 3, 1, 1), nn::BatchNorm2d(3), nn::GELU(), nn::AvgPool2d(2),
                       nn::Flatten(), nn::Linear(12, 2));
  model.to(DType::Float64);
  std::vector<Tensor> inputs{random_input({2, 2, 4, 4}, 2)};
  for (const Tensor& p : model.parameters()) inputs.push_back(p);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return model(in[0]); }, inputs));
  model.eval();  // running statistics: a plain affine map per channel
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return model(in[0]); }, inputs));
}

}  // namespace
}  // namespace tandem
