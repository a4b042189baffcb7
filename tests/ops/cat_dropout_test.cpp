// Tests of cat (values on dims 0 and 1, strided inputs, gradients as slices, shape errors) and
// dropout (reproducible masks from a fixed generator, gradient equal to the mask, identity when
// not training or p == 0, probability checks).
#include <gtest/gtest.h>

#include <cmath>

#include "errors.h"
#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::allclose;
using testing::error_of;
using testing::gradcheck;
using testing::random_input;

TEST(Cat, ValuesAlongDims0And1) {
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector(std::vector<float>{5, 6}, {1, 2});
  Tensor c = from_vector(std::vector<float>{7, 8, 9, 10, 11, 12}, {2, 3});
  Tensor y0 = cat({a, b}, 0);
  EXPECT_EQ(y0.shape(), (Shape{3, 2}));
  EXPECT_TRUE(allclose(y0, {1, 2, 3, 4, 5, 6}));
  Tensor y1 = cat({a, c}, 1);
  EXPECT_EQ(y1.shape(), (Shape{2, 5}));
  EXPECT_TRUE(allclose(y1, {1, 2, 7, 8, 9, 3, 4, 10, 11, 12}));
  EXPECT_TRUE(allclose(cat({a, c}, -1), y1));
}

TEST(Cat, StridedAndEmptyInputs) {
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, {.dtype = DType::Float64});
  Tensor at = a.t();  // (3, 2), non-contiguous: [[1, 4], [2, 5], [3, 6]]
  Tensor empty_rows = zeros({0, 2}, {.dtype = DType::Float64});
  Tensor y = cat({at, empty_rows, at.slice(0, 2, 3)}, 0);
  EXPECT_EQ(y.shape(), (Shape{4, 2}));
  EXPECT_TRUE(allclose(y, {1, 4, 2, 5, 3, 6, 3, 6}));
}

TEST(Cat, GradcheckOnDims0And1) {
  auto a = random_input({2, 3}, 71), b = random_input({1, 3}, 72), c = random_input({2, 2}, 73);
  EXPECT_TRUE(gradcheck([](const auto& in) { return cat({in[0], in[1]}, 0); }, {a, b}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return cat({in[0], in[1], in[0]}, 1); }, {a, c}));
}

TEST(Cat, GradientIsTheSliceOfEachInput) {
  Tensor a = ones({2, 2}, {.dtype = DType::Float64, .requires_grad = true});
  Tensor b = ones({2, 1}, {.dtype = DType::Float64});  // needs no gradient
  Tensor c = ones({2, 3}, {.dtype = DType::Float64, .requires_grad = true});
  Tensor y = cat({a, b, c}, 1);
  y.backward(arange(0, 12, 1, {.dtype = DType::Float64}).view({2, 6}));
  EXPECT_TRUE(allclose(a.grad(), {0, 1, 6, 7}));
  EXPECT_FALSE(b.grad().defined());
  EXPECT_TRUE(allclose(c.grad(), {3, 4, 5, 9, 10, 11}));
}

TEST(Cat, MismatchNamesTheShapes) {
  EXPECT_NE(error_of([] {
              cat({zeros({2, 3}), zeros({2, 4})}, 0);
            })
                .find("cat: tensor 1 of shape (2, 4) does not match tensor 0 of shape (2, 3) in "
                      "every dimension except 0"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              cat({zeros({2, 3}), zeros({2, 3, 1})}, 1);
            }).find("cat: tensor 1 of shape (2, 3, 1) does not match tensor 0 of shape (2, 3)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              cat({zeros({2}), zeros({2}, {.dtype = DType::Float64})}, 0);
            }).find("cat: tensor 1 is float64 but tensor 0 is float32"),
            std::string::npos);
  EXPECT_THROW(cat({}, 0), Error);
  EXPECT_THROW(cat({zeros({2, 3})}, 2), Error);
}

TEST(Dropout, MaskIsReproducibleAndScaled) {
  const double p = 0.3;
  Generator g1(7), g2(7);
  Tensor m1 = ops::dropout_mask({100, 100}, p, DType::Float32, kCPU, g1);
  Tensor m2 = ops::dropout_mask({100, 100}, p, DType::Float32, kCPU, g2);
  EXPECT_EQ(m1.to_vector<float>(), m2.to_vector<float>());
  EXPECT_EQ(g1.state(), g2.state());
  std::int64_t kept = 0;
  for (float v : m1.to_vector<float>()) {
    EXPECT_TRUE(v == 0.0f || v == static_cast<float>(1 / (1 - p))) << v;
    kept += v != 0.0f;
  }
  // 10000 Bernoulli(0.7) draws from this fixed seed: the kept fraction is near 0.7.
  EXPECT_NEAR(static_cast<double>(kept) / 10000.0, 0.7, 0.03);
  // The next draw from the same generator gives a different mask.
  Tensor m3 = ops::dropout_mask({100, 100}, p, DType::Float32, kCPU, g1);
  EXPECT_NE(m1.to_vector<float>(), m3.to_vector<float>());
  // float64 masks draw the same stream.
  Generator g3(7);
  EXPECT_TRUE(allclose(ops::dropout_mask({100, 100}, p, DType::Float64, kCPU, g3), m1, 0, 1e-6));
}

TEST(Dropout, GradientEqualsTheMask) {
  Generator g(9), again(9);
  Tensor x = random_input({6, 7}, 81);
  Tensor y = dropout(x, 0.4, /*training=*/true, &g);
  Tensor mask = ops::dropout_mask({6, 7}, 0.4, DType::Float64, kCPU, again);
  EXPECT_TRUE(allclose(y, mul(x.detach(), mask), 0, 0));
  y.backward(ones({6, 7}, {.dtype = DType::Float64}));
  EXPECT_TRUE(allclose(x.grad(), mask, 0, 0));
  // With a generator reset before each call the function is deterministic, so it gradchecks.
  EXPECT_TRUE(gradcheck(
      [](const auto& in) {
        Generator fixed(10);
        return dropout(in[0], 0.5, true, &fixed);
      },
      {x}));
}

TEST(Dropout, IdentityWhenNotTrainingOrZeroProbability) {
  Generator g(4);
  Tensor x = random_input({3, 3}, 82);
  EXPECT_TRUE(dropout(x, 0.5, /*training=*/false, &g).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, /*training=*/true, &g).is_same(x));
  EXPECT_EQ(g.state(), Generator(4).state());  // nothing drawn
}

TEST(Dropout, DefaultGeneratorFollowsManualSeed) {
  Tensor x = ones({50});
  manual_seed(123);
  Tensor a = dropout(x, 0.5, true);
  manual_seed(123);
  Tensor b = dropout(x, 0.5, true);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

TEST(Dropout, ProbabilityOutsideZeroOneIsAnError) {
  Tensor x = ones({4});
  EXPECT_NE(error_of([&] {
              dropout(x, 1.0, true);
            }).find("dropout: probability must be in [0, 1), got 1"),
            std::string::npos);
  EXPECT_THROW(dropout(x, -0.1, true), Error);
  Generator g(1);
  EXPECT_THROW(ops::dropout_mask({4}, 1.5, DType::Float32, kCPU, g), Error);
}

}  // namespace
}  // namespace tandem
