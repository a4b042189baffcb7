// Tests of tandem::nn::init: gains and fans as torch.nn.init, and the sample statistics of each
// distribution (bounds, mean, variance) on large tensors, including PyTorch's default Linear and
// Conv2d initialisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

namespace init = nn::init;

struct Stats {
  double min, max, mean, var;
};

Stats stats(const Tensor& t) {
  const std::vector<double> v = t.to_vector<double>();
  Stats s{v[0], v[0], 0.0, 0.0};
  for (double x : v) {
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    s.mean += x;
  }
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.var += (x - s.mean) * (x - s.mean);
  s.var /= static_cast<double>(v.size() - 1);
  return s;
}

// Checks that t looks like U(-bound, bound): inside the bounds, reaching close to both, with the
// mean within 5 standard errors of 0 and the variance within 2% of bound^2 / 3.
void expect_uniform(const Tensor& t, double bound) {
  const Stats s = stats(t);
  const auto n = static_cast<double>(t.numel());
  EXPECT_GE(s.min, -bound);
  EXPECT_LE(s.max, bound);
  EXPECT_LT(s.min, -0.99 * bound);
  EXPECT_GT(s.max, 0.99 * bound);
  EXPECT_NEAR(s.mean, 0.0, 5.0 * bound / std::sqrt(3.0 * n));
  EXPECT_NEAR(s.var, bound * bound / 3.0, 0.02 * bound * bound / 3.0);
}

void expect_normal(const Tensor& t, double mean, double std) {
  const Stats s = stats(t);
  const auto n = static_cast<double>(t.numel());
  EXPECT_NEAR(s.mean, mean, 5.0 * std / std::sqrt(n));
  EXPECT_NEAR(std::sqrt(s.var), std, 0.01 * std);
  EXPECT_LT(s.min, mean - 3.5 * std);  // tails exist
  EXPECT_GT(s.max, mean + 3.5 * std);
}

TEST(Init, GainsMatchTorch) {
  // torch.nn.init.calculate_gain('leaky_relu'), ('leaky_relu', 0.2), ('tanh'), ('selu')
  //   -> 1.4141428569978354 1.3867504905630728 1.6666666666666667 0.75
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::LeakyRelu), 1.4141428569978354);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::LeakyRelu, 0.2), 1.3867504905630728);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Tanh), 1.6666666666666667);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Selu), 0.75);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Relu), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Conv2d), 1.0);
}

TEST(Init, FansOfLinearAndConvWeights) {
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(empty({10, 20})),
            (std::pair<std::int64_t, std::int64_t>{20, 10}));
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(empty({32, 16, 3, 5})),
            (std::pair<std::int64_t, std::int64_t>{16 * 15, 32 * 15}));
  EXPECT_THROW(init::calculate_fan_in_and_fan_out(empty({7})), Error);
  EXPECT_THROW(init::kaiming_uniform_(empty({7})), Error);
}

TEST(Init, LinearDefaultIsKaimingUniformWithASqrt5) {
  manual_seed(11);
  nn::Linear fc(1000, 500);
  // kaiming_uniform_(a=sqrt(5)): gain sqrt(2 / 6), bound = sqrt(3) gain / sqrt(fan_in)
  // = 1 / sqrt(1000); bias ~ U(-1 / sqrt(1000), 1 / sqrt(1000)).
  expect_uniform(fc.weight, 1.0 / std::sqrt(1000.0));
  const Stats b = stats(fc.bias);
  EXPECT_GE(b.min, -1.0 / std::sqrt(1000.0));
  EXPECT_LE(b.max, 1.0 / std::sqrt(1000.0));
  EXPECT_EQ(fc.weight.dtype(), DType::Float32);
  EXPECT_TRUE(fc.weight.requires_grad());
}

TEST(Init, Conv2dDefaultUsesFanInOfChannelsTimesKernel) {
  manual_seed(12);
  nn::Conv2d conv(64, 128, 3);
  expect_uniform(conv.weight, 1.0 / std::sqrt(64.0 * 9.0));
  const Stats b = stats(conv.bias);
  EXPECT_GE(b.min, -1.0 / 24.0);
  EXPECT_LE(b.max, 1.0 / 24.0);
}

TEST(Init, UniformNormalConstant) {
  Generator g(3);
  Tensor t = empty({400, 500});
  expect_uniform(init::uniform_(t, -2.0, 2.0, &g), 2.0);
  Tensor shifted = init::uniform_(empty({100000}, {.dtype = DType::Float64}), 1.0, 3.0, &g);
  const Stats s = stats(shifted);
  EXPECT_GE(s.min, 1.0);
  EXPECT_LT(s.max, 3.0);
  EXPECT_NEAR(s.mean, 2.0, 0.01);
  expect_normal(init::normal_(t, 0.5, 2.0, &g), 0.5, 2.0);
  EXPECT_TRUE(testing::allclose(init::constant_(empty({2, 2}), 0.25), {0.25, 0.25, 0.25, 0.25}));
  EXPECT_TRUE(testing::allclose(init::zeros_(ones({3})), {0, 0, 0}));
  EXPECT_TRUE(testing::allclose(init::ones_(zeros({3}, {.dtype = DType::Float64})), {1, 1, 1}));
}

TEST(Init, KaimingAndXavier) {
  Generator g(4);
  Tensor w = empty({256, 128, 3, 3});  // fan_in 1152, fan_out 2304
  // Defaults a = 0, fan_in, leaky_relu: gain sqrt(2), bound sqrt(3) sqrt(2) / sqrt(fan_in).
  expect_uniform(init::kaiming_uniform_(w, {}, &g), std::sqrt(6.0 / 1152.0));
  expect_normal(
      init::kaiming_normal_(
          w, {.mode = init::FanMode::FanOut, .nonlinearity = init::Nonlinearity::Relu}, &g),
      0.0, std::sqrt(2.0) / std::sqrt(2304.0));
  expect_uniform(init::xavier_uniform_(w, 2.0, &g), 2.0 * std::sqrt(6.0 / (1152.0 + 2304.0)));
  expect_normal(init::xavier_normal_(w, 1.0, &g), 0.0, std::sqrt(2.0 / (1152.0 + 2304.0)));
}

TEST(Init, FillsInPlaceWithoutTapeAndIsSeeded) {
  Tensor w = zeros({50, 40}, {.requires_grad = true});
  const Tensor alias = make_view(w, w.shape(), w.strides(), w.offset());  // shares the storage
  Generator g1(99), g2(99);
  init::kaiming_uniform_(w, {}, &g1);
  EXPECT_TRUE(w.is_leaf());
  EXPECT_EQ(w.to_vector<double>(), alias.to_vector<double>());
  Tensor other = zeros({50, 40});
  init::kaiming_uniform_(other, {}, &g2);
  EXPECT_EQ(w.to_vector<double>(), other.to_vector<double>());
  manual_seed(5);
  nn::Linear a(7, 3);
  manual_seed(5);
  nn::Linear b(7, 3);
  EXPECT_EQ(a.weight.to_vector<double>(), b.weight.to_vector<double>());
  EXPECT_EQ(a.bias.to_vector<double>(), b.bias.to_vector<double>());
}

TEST(Init, NonContiguousTensorIsFilledThroughItsView) {
  Tensor base = zeros({4, 6}, {.dtype = DType::Float64});
  Tensor view = base.transpose(0, 1);  // (6, 4), not contiguous
  init::constant_(view, 3.0);
  for (double v : base.to_vector<double>()) EXPECT_EQ(v, 3.0);
}

}  // namespace
}  // namespace tandem
