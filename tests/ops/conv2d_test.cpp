// Tests of 2-D convolution: hand-checked forwards, the float32 oneDNN path (forward and both
// backwards) against the float64 reference loops, float64 gradient checks over strides, padding,
// dilation, groups and bias, and the error messages for bad shapes and dtypes.
// x (N, C, H, W), w (K, C/groups, R, S), b (K), y (N, K, P, Q).
#include <string>

#include <gtest/gtest.h>

#include "errors.h"
#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::error_of;
using testing::expect_contains;
using testing::allclose;
using testing::gradcheck;
using testing::random_input;

Conv2dParams params(std::array<std::int64_t, 2> stride, std::array<std::int64_t, 2> padding,
                    std::array<std::int64_t, 2> dilation = {1, 1}, std::int64_t groups = 1) {
  return {.stride = stride, .padding = padding, .dilation = dilation, .groups = groups};
}

class ConvBothDtypes : public ::testing::TestWithParam<DType> {};

TEST_P(ConvBothDtypes, HandCheckedForward) {
  const TensorOptions opt{.dtype = GetParam()};
  // x = 1..9 as 3x3, w = [[1, 2], [3, 4]]: y[i][j] = x[i][j] + 2x[i][j+1] + 3x[i+1][j] + 4x[i+1][j+1].
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, opt);
  Tensor w = from_vector(std::vector<double>{1, 2, 3, 4}, {1, 1, 2, 2}, opt);
  Tensor b = from_vector(std::vector<double>{0.5}, {1}, opt);
  Tensor y = conv2d(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_TRUE(allclose(y, {37.5, 47.5, 67.5, 77.5}));
  // Padding 1, stride 2: the corner windows see one, two or four inputs.
  // y00 = 4*1, y01 = 3*2 + 4*3, y10 = 2*4 + 4*7, y11 = 1*5 + 2*6 + 3*8 + 4*9.
  Tensor y2 = conv2d(x, w, Tensor(), params({2, 2}, {1, 1}));
  EXPECT_EQ(y2.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_TRUE(allclose(y2, {4, 18, 36, 77}));
}

TEST_P(ConvBothDtypes, HandCheckedGroupsAndDilation) {
  const TensorOptions opt{.dtype = GetParam()};
  // Two groups of one channel; kernel (2, 1) dilated by 2 along the height:
  // channel 0 (1..16): x[h][w] - x[h+2][w] = -8; channel 1 (17..32): 2 x[h][w] + 0.5 x[h+2][w].
  std::vector<double> xs(32);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<double>(i + 1);
  Tensor x = from_vector(xs, {1, 2, 4, 4}, opt);
  Tensor w = from_vector(std::vector<double>{1, -1, 2, 0.5}, {2, 1, 2, 1}, opt);
  Tensor y = conv2d(x, w, Tensor(), params({1, 1}, {0, 0}, {2, 1}, 2));
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 4}));
  EXPECT_TRUE(allclose(y, {-8, -8, -8, -8, -8, -8, -8, -8,  //
                           46.5, 49, 51.5, 54, 56.5, 59, 61.5, 64}));
}

INSTANTIATE_TEST_SUITE_P(Conv2d, ConvBothDtypes,
                         ::testing::Values(DType::Float32, DType::Float64));

TEST(Conv2d, OutputShape) {
  EXPECT_EQ(ops::conv2d_output_shape({64, 1, 28, 28}, {16, 1, 3, 3}, params({1, 1}, {1, 1})),
            (Shape{64, 16, 28, 28}));
  EXPECT_EQ(ops::conv2d_output_shape({2, 4, 9, 8}, {6, 4, 3, 3}, params({2, 2}, {0, 0})),
            (Shape{2, 6, 4, 3}));
  EXPECT_EQ(ops::conv2d_output_shape({2, 4, 9, 8}, {6, 2, 3, 2}, params({1, 2}, {1, 0}, {2, 3}, 2)),
            (Shape{2, 6, 7, 3}));
}

struct Config {
  const char* name;
  Shape x, w;
  Conv2dParams p;
  bool bias;
};

// The oneDNN float32 kernels against the float64 reference loops on the same random inputs.
void expect_float32_matches_reference(const Config& c) {
  SCOPED_TRACE(c.name);
  Generator gen(7);
  Tensor x = randn(c.x, {}, &gen), w = randn(c.w, {}, &gen);
  Tensor b = c.bias ? randn({c.w[0]}, {}, &gen) : Tensor();
  auto f64 = [](const Tensor& t) { return t.defined() ? t.to(DType::Float64) : Tensor(); };
  Tensor y = ops::conv2d(x, w, b, c.p), y64 = ops::conv2d(f64(x), f64(w), f64(b), c.p);
  ASSERT_EQ(y.dtype(), DType::Float32);
  EXPECT_TRUE(allclose(y, y64, 1e-4, 1e-4));

  Tensor gy = randn(y.shape(), {}, &gen);
  EXPECT_TRUE(allclose(ops::conv2d_backward_input(gy, w, c.x, c.p),
                       ops::conv2d_backward_input(f64(gy), f64(w), c.x, c.p), 1e-4, 1e-4));
  Tensor gw, gb, gw64, gb64;
  ops::conv2d_backward_weights(gy, x, c.w, c.p, &gw, c.bias ? &gb : nullptr);
  ops::conv2d_backward_weights(f64(gy), f64(x), c.w, c.p, &gw64, c.bias ? &gb64 : nullptr);
  EXPECT_TRUE(allclose(gw, gw64, 1e-4, 1e-3));
  if (c.bias) {
    EXPECT_TRUE(allclose(gb, gb64, 1e-4, 1e-3));
  }
  // Running again reuses the cached primitives and gives the same numbers.
  EXPECT_TRUE(allclose(ops::conv2d(x, w, b, c.p), y, 0, 0));
}

const std::vector<Config>& configs() {
  static const std::vector<Config> all{
      {"3x3 pad 1", {2, 4, 9, 8}, {6, 4, 3, 3}, params({1, 1}, {1, 1}), true},
      {"stride 2", {2, 4, 9, 8}, {6, 4, 3, 3}, params({2, 2}, {0, 0}), true},
      {"stride (2, 1) pad (1, 0)", {2, 3, 7, 6}, {5, 3, 3, 2}, params({2, 1}, {1, 0}), true},
      {"dilation 2", {2, 4, 9, 8}, {6, 4, 3, 3}, params({1, 1}, {2, 2}, {2, 2}), true},
      {"groups 2", {2, 4, 7, 7}, {6, 2, 3, 3}, params({1, 1}, {1, 1}, {1, 1}, 2), true},
      {"depthwise", {2, 4, 7, 7}, {8, 1, 3, 3}, params({2, 2}, {1, 1}, {1, 1}, 4), false},
      {"no bias", {2, 4, 9, 8}, {6, 4, 3, 3}, params({1, 1}, {1, 1}), false},
      {"1x1", {3, 16, 5, 5}, {32, 16, 1, 1}, params({1, 1}, {0, 0}), true},
      {"seed conv1", {4, 1, 28, 28}, {16, 1, 3, 3}, params({1, 1}, {1, 1}), true},
      {"seed conv2", {4, 16, 28, 28}, {32, 16, 3, 3}, params({1, 1}, {1, 1}), true},
  };
  return all;
}

TEST(Conv2d, Float32MatchesFloat64Reference) {
  for (const Config& c : configs()) expect_float32_matches_reference(c);
}

TEST(Conv2d, NonContiguousOperands) {
  // A transposed view as input gives the same result as its contiguous copy.
  Generator gen(3);
  Tensor base = randn({2, 3, 6, 5}, {}, &gen), w = randn({4, 3, 3, 3}, {}, &gen);
  Tensor x = base.transpose(2, 3);  // (2, 3, 5, 6), not contiguous
  ASSERT_FALSE(x.is_contiguous());
  EXPECT_TRUE(allclose(ops::conv2d(x, w, Tensor(), {}), ops::conv2d(x.contiguous(), w, Tensor(), {}),
                       0, 0));
}

TEST(Conv2d, Gradcheck) {
  for (const Config& c : configs()) {
    if (c.x[1] > 4 || c.x[0] > 2) continue;  // the larger shapes are covered by the float32 test
    SCOPED_TRACE(c.name);
    Tensor x = random_input(c.x, 1), w = random_input(c.w, 2);
    if (c.bias) {
      Tensor b = random_input({c.w[0]}, 3);
      EXPECT_TRUE(gradcheck([&](const auto& in) { return conv2d(in[0], in[1], in[2], c.p); },
                            {x, w, b}));
    } else {
      EXPECT_TRUE(gradcheck([&](const auto& in) { return conv2d(in[0], in[1], Tensor(), c.p); },
                            {x, w}));
    }
  }
}

TEST(Conv2d, AutogradFloat32MatchesFloat64) {
  Generator gen(11);
  Tensor x = randn({2, 4, 8, 8}, {}, &gen), w = randn({6, 2, 3, 3}, {}, &gen);
  Tensor b = randn({6}, {}, &gen);
  const Conv2dParams p = params({2, 1}, {1, 1}, {1, 2}, 2);
  Tensor x64 = x.to(DType::Float64).set_requires_grad(true);
  Tensor w64 = w.to(DType::Float64).set_requires_grad(true);
  Tensor b64 = b.to(DType::Float64).set_requires_grad(true);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor y = conv2d(x, w, b, p), y64 = conv2d(x64, w64, b64, p);
  Tensor gy = randn(y.shape(), {}, &gen);
  y.backward(gy);
  y64.backward(gy.to(DType::Float64));
  EXPECT_TRUE(allclose(x.grad(), x64.grad(), 1e-4, 1e-4));
  EXPECT_TRUE(allclose(w.grad(), w64.grad(), 1e-4, 1e-4));
  EXPECT_TRUE(allclose(b.grad(), b64.grad(), 1e-4, 1e-4));
}

TEST(Conv2d, InputWithoutGradGetsNone) {
  // The first layer: only the parameters need gradients.
  Tensor x = random_input({2, 1, 5, 5}, 4).detach();
  Tensor w = random_input({3, 1, 3, 3}, 5), b = random_input({3}, 6);
  conv2d(x, w, b, params({1, 1}, {1, 1})).sum().backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_EQ(w.grad().shape(), (Shape{3, 1, 3, 3}));
  // d(sum y)/db = N * P * Q = 2 * 5 * 5.
  EXPECT_TRUE(allclose(b.grad(), {50, 50, 50}));
}

TEST(Conv2d, BiasOnlyGradient) {
  // Frozen weights, trainable bias: the bias gradient alone, from both dtypes.
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor x = ones({2, 2, 4, 4}, {.dtype = dtype});
    Tensor w = ones({3, 2, 3, 3}, {.dtype = dtype});
    Tensor b = zeros({3}, {.dtype = dtype, .requires_grad = true});
    conv2d(x, w, b, params({2, 2}, {0, 0})).sum().backward();  // y (2, 3, 1, 1)
    EXPECT_TRUE(allclose(b.grad(), {2, 2, 2}));
    EXPECT_FALSE(w.grad().defined());
  }
}

TEST(Conv2d, ChannelMismatchNamesTheShapes) {
  Tensor x = zeros({64, 3, 32, 32}), w = zeros({16, 1, 3, 3});
  expect_contains(error_of([&] { conv2d(x, w); }),
                  "conv2d: input (64, 3, 32, 32) has 3 channels, weight (16, 1, 3, 3) expects 1");
  Tensor wg = zeros({16, 2, 3, 3});
  expect_contains(error_of([&] { conv2d(x, wg, Tensor(), params({1, 1}, {0, 0}, {1, 1}, 2)); }),
                  "conv2d: input (64, 3, 32, 32) has 3 channels, weight (16, 2, 3, 3) expects 4 "
                  "(2 per group, 2 groups)");
}

TEST(Conv2d, BadShapesAndParamsAreErrors) {
  Tensor x = zeros({2, 4, 5, 5});
  expect_contains(error_of([&] { conv2d(zeros({4, 5, 5}), zeros({6, 4, 3, 3})); }),
                  "conv2d: expected input (N, C, H, W) and weight (K, C/groups, R, S), got input "
                  "(4, 5, 5) and weight (6, 4, 3, 3)");
  expect_contains(error_of([&] { conv2d(x, zeros({6, 4, 7, 3})); }),
                  "conv2d: input (2, 4, 5, 5) with padding (0, 0) is smaller than the kernel "
                  "(7, 3) with dilation (1, 1)");
  expect_contains(error_of([&] { conv2d(x, zeros({6, 4, 3, 3}), Tensor(),
                                        params({1, 1}, {0, 0}, {3, 3})); }),
                  "is smaller than the kernel (3, 3) with dilation (3, 3)");
  expect_contains(error_of([&] { conv2d(x, zeros({6, 4, 3, 3}), zeros({5})); }),
                  "conv2d: bias (5) does not match weight (6, 4, 3, 3) (6 output channels)");
  expect_contains(error_of([&] { conv2d(x, zeros({6, 2, 3, 3}), Tensor(),
                                        params({1, 1}, {0, 0}, {1, 1}, 4)); }),
                  "conv2d: weight (6, 2, 3, 3) has 6 output channels, not divisible by groups 4");
  expect_contains(error_of([&] { conv2d(x, zeros({6, 4, 3, 3}), Tensor(), params({0, 1}, {0, 0}));
                  }),
                  "conv2d: stride (0, 1) must be positive");
  expect_contains(error_of([&] { conv2d(x, zeros({6, 4, 3, 3}), Tensor(), params({1, 1}, {-1, 0}));
                  }),
                  "conv2d: padding (-1, 0) must not be negative");
}

TEST(Conv2d, DtypesAreChecked) {
  expect_contains(error_of([] {
                    conv2d(zeros({1, 1, 3, 3}), zeros({1, 1, 2, 2}, {.dtype = DType::Float64}));
                  }),
                  "conv2d: dtypes differ (float32 and float64)");
  expect_contains(error_of([] {
                    conv2d(zeros({1, 1, 3, 3}, {.dtype = DType::Int64}),
                           zeros({1, 1, 2, 2}, {.dtype = DType::Int64}));
                  }),
                  "conv2d: expected float32 or float64 tensors, got int64");
}

TEST(Conv2d, BackwardChecksGradOutShape) {
  Tensor w = zeros({6, 4, 3, 3}), g = zeros({2, 6, 4, 4});
  expect_contains(error_of([&] { ops::conv2d_backward_input(g, w, {2, 4, 5, 5}, {}); }),
                  "conv2d_backward_input: grad_out (2, 6, 4, 4) does not match the output "
                  "(2, 6, 3, 3) of input (2, 4, 5, 5) and weight (6, 4, 3, 3)");
  Tensor gw;
  expect_contains(error_of([&] {
                    ops::conv2d_backward_weights(g, zeros({2, 4, 5, 5}), {6, 4, 3, 3}, {}, &gw,
                                                 nullptr);
                  }),
                  "conv2d_backward_weights: grad_out (2, 6, 4, 4) does not match the output "
                  "(2, 6, 3, 3)");
}

}  // namespace
}  // namespace tandem
