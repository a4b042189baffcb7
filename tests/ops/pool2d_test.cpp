// Tests of 2-D pooling: PyTorch's output-shape rules, hand-checked max / average / adaptive
// forwards (values and max indices), float32 against float64 forward and backward, float64
// gradient checks (padding, ceil_mode, count_include_pad, adaptive 5x7 -> 2x3), and errors.
// x (N, C, H, W) -> y (N, C, P, Q).
#include <cmath>
#include <limits>
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

Pool2dParams pool(std::int64_t kernel, std::int64_t stride, std::int64_t padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true) {
  return {.kernel = {kernel, kernel}, .stride = {stride, stride}, .padding = {padding, padding},
          .ceil_mode = ceil_mode, .count_include_pad = count_include_pad};
}

// 1..n*n as a (1, 1, n, n) tensor.
Tensor counting(std::int64_t n, DType dtype) {
  std::vector<double> v(static_cast<std::size_t>(n * n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i + 1);
  return from_vector(v, {1, 1, n, n}, {.dtype = dtype});
}

TEST(Pool2d, OutputShapeFollowsPyTorch) {
  auto out = [](std::int64_t in, const Pool2dParams& p) {
    return ops::pool2d_output_shape({1, 1, in, in}, p, "max_pool2d")[2];
  };
  EXPECT_EQ(out(6, pool(3, 2)), 2);
  EXPECT_EQ(out(6, pool(3, 2, 0, true)), 3);  // ceil: a partial last window
  EXPECT_EQ(out(5, pool(2, 2, 1)), 3);
  // ceil would give 4, but the 4th window would start at 5 - 1 + 1 = inside the right padding
  // only; PyTorch drops it.
  EXPECT_EQ(out(5, pool(2, 2, 1, true)), 3);
  EXPECT_EQ(out(28, pool(2, 2)), 14);
  const Pool2dParams asym{.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 0}};
  EXPECT_EQ(ops::pool2d_output_shape({2, 3, 7, 5}, asym, "avg_pool2d"), (Shape{2, 3, 4, 4}));
}

class PoolBothDtypes : public ::testing::TestWithParam<DType> {};

TEST_P(PoolBothDtypes, MaxValuesAndIndices) {
  const DType dt = GetParam();
  Tensor x = from_vector(std::vector<double>{1, 5, 2, 0,  //
                                             3, 4, 8, 1,  //
                                             0, 9, 6, 7,  //
                                             2, 1, 3, 3},
                         {1, 1, 4, 4}, {.dtype = dt});
  Tensor idx;
  Tensor y = ops::max_pool2d(x, pool(2, 2), &idx);
  EXPECT_TRUE(allclose(y, {5, 8, 9, 7}));
  EXPECT_EQ(idx.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 6, 9, 11}));
  // Kernel 3, stride 2, padding 1, ceil_mode: a 3x3 output; ties keep the first (row-major)
  // maximum, so the bottom-middle window {1, 3, 3} picks index 14, not 15.
  y = ops::max_pool2d(x, pool(3, 2, 1, true), &idx);
  EXPECT_TRUE(allclose(y, {5, 8, 1, 9, 9, 7, 2, 3, 3}));
  EXPECT_EQ(idx.to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{1, 6, 7, 9, 9, 11, 12, 14, 15}));
  // Backward routes each gradient to its index; the 9 chosen twice gets both.
  Tensor g = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, {.dtype = dt});
  Tensor gx = ops::max_pool2d_backward(g, idx, x.shape());
  EXPECT_TRUE(allclose(gx, {0, 1, 0, 0, 0, 0, 2, 3, 0, 9, 0, 6, 7, 0, 8, 9}));
}

TEST_P(PoolBothDtypes, MaxTiesNaNAndInfinityFollowPyTorchOnEveryPath) {
  // Ties keep the first maximum, a NaN wins (the last NaN's index), an all -inf window gives -inf
  // at its first element: on the whole-2x2-tile path, the general k x k tile path (k = 3) and the
  // clipped-window path (ceil_mode on 5 x 5).
  const DType dt = GetParam();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = from_vector(std::vector<double>{1, 3, 2, 2,  //
                                             3, 0, 2, 1,  //
                                             nan, 5, -inf, -inf,  //
                                             5, nan, -inf, -inf},
                         {1, 1, 4, 4}, {.dtype = dt});
  Tensor idx;
  std::vector<double> y = ops::max_pool2d(x, pool(2, 2), &idx).to_vector<double>();
  EXPECT_EQ(idx.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2, 13, 10}));
  EXPECT_EQ(y[0], 3);
  EXPECT_EQ(y[1], 2);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], -inf);

  // The same four tiles side by side (a row of 4 outputs: the 4-wide vector path for float32),
  // then one more tile (the scalar rest).
  Tensor wide = from_vector(std::vector<double>{1, 3, 2, 2, nan, 5, -inf, -inf, 7, 7,  //
                                                3, 0, 2, 1, 5, nan, -inf, -inf, 7, 8},
                            {1, 1, 2, 10}, {.dtype = dt});
  y = ops::max_pool2d(wide, pool(2, 2), &idx).to_vector<double>();
  EXPECT_EQ(idx.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2, 15, 6, 19}));
  EXPECT_EQ(y[0], 3);
  EXPECT_EQ(y[1], 2);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], -inf);
  EXPECT_EQ(y[4], 8);

  Tensor x6 = zeros({1, 1, 6, 6}, {.dtype = dt});
  Tensor x5 = zeros({1, 1, 5, 5}, {.dtype = dt});
  Tensor i6, i5;
  ops::max_pool2d(x6, pool(3, 3), &i6);  // all zeros: every window's first element
  EXPECT_EQ(i6.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 3, 18, 21}));
  ops::max_pool2d(x5, pool(2, 2, 0, true), &i5);  // a partial last row and column
  EXPECT_EQ(i5.to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{0, 2, 4, 10, 12, 14, 20, 22, 24}));
}

TEST_P(PoolBothDtypes, AverageCountIncludePad) {
  const DType dt = GetParam();
  Tensor x = counting(3, dt);  // 1..9
  // Kernel 2, stride 1, padding 1: corner windows hold one input; with padding counted they
  // divide by 4, without by 1.
  EXPECT_TRUE(allclose(ops::avg_pool2d(x, pool(2, 1, 1)),
                       {0.25, 0.75, 1.25, 0.75, 1.25, 3, 4, 2.25, 2.75, 6, 7, 3.75, 1.75, 3.75,
                        4.25, 2.25}));
  EXPECT_TRUE(allclose(ops::avg_pool2d(x, pool(2, 1, 1, false, false)),
                       {1, 1.5, 2.5, 3, 2.5, 3, 4, 4.5, 5.5, 6, 7, 7.5, 7, 7.5, 8.5, 9}));
}

TEST_P(PoolBothDtypes, AverageCeilModeDivisors) {
  const DType dt = GetParam();
  Tensor x = counting(6, dt);  // 1..36
  // Kernel 3, stride 2, ceil_mode: the last windows run past the input; the divisor counts only
  // the part inside the (padded) input: (29 + 30 + 35 + 36) / 4 = 32.5 at the corner.
  EXPECT_TRUE(allclose(ops::avg_pool2d(x, pool(3, 2, 0, true)),
                       {8, 10, 11.5, 20, 22, 23.5, 29, 31, 32.5}));
  // With padding 1 the corner (0, 0) window holds {1, 2, 7, 8}: 18 / 9 counting padding, 18 / 4
  // without; the last window [5, 8) is clipped to the padded input [.., 7): divisor 2 * 2 at the
  // far corner, 36 / 4 = 9.
  Tensor with_pad = ops::avg_pool2d(x, pool(3, 2, 1, true, true));
  Tensor without_pad = ops::avg_pool2d(x, pool(3, 2, 1, true, false));
  EXPECT_EQ(with_pad.shape(), (Shape{1, 1, 4, 4}));
  EXPECT_TRUE(allclose(with_pad, {2, 4, 16.0 / 3, 3, 9, 15, 17, 9, 17, 27, 29, 15, 10.5, 16.5,
                                  17.5, 9}));
  EXPECT_TRUE(allclose(without_pad, {4.5, 6, 8, 9, 13.5, 15, 17, 18, 25.5, 27, 29, 30, 31.5, 33,
                                     35, 36}));
}

TEST_P(PoolBothDtypes, AdaptiveAverage) {
  const DType dt = GetParam();
  std::vector<double> v(35);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  Tensor x = from_vector(v, {1, 1, 5, 7}, {.dtype = dt});  // x[h][w] = 7h + w
  // Rows [0, 3) and [2, 5); columns [0, 3), [2, 5), [4, 7): the means are 7 * mean(h) + mean(w).
  Tensor y = ops::adaptive_avg_pool2d(x, {2, 3});
  EXPECT_TRUE(allclose(y, {8, 10, 12, 22, 24, 26}));
  // Backward: each cell spreads g / 9 over its window; overlaps (row 2, columns 2 and 4) add up.
  Tensor gx = ops::adaptive_avg_pool2d_backward(ones({1, 1, 2, 3}, {.dtype = dt}), x.shape());
  const double n = 1.0 / 9;
  EXPECT_TRUE(allclose(gx, {n, n, 2 * n, n, 2 * n, n, n,  //
                            n, n, 2 * n, n, 2 * n, n, n,  //
                            2 * n, 2 * n, 4 * n, 2 * n, 4 * n, 2 * n, 2 * n,  //
                            n, n, 2 * n, n, 2 * n, n, n,  //
                            n, n, 2 * n, n, 2 * n, n, n}));
}

INSTANTIATE_TEST_SUITE_P(Pool2d, PoolBothDtypes, ::testing::Values(DType::Float32, DType::Float64));

TEST(Pool2d, Float32MatchesFloat64) {
  Generator gen(21);
  Tensor x = randn({2, 3, 9, 7}, {}, &gen), x64 = x.to(DType::Float64);
  const std::vector<Pool2dParams> all{pool(2, 2), pool(3, 2, 1), pool(3, 2, 1, true),
                                      pool(3, 2, 1, true, false), pool(2, 1, 1, false, false)};
  for (const Pool2dParams& p : all) {
    Tensor idx, idx64;
    Tensor y = ops::max_pool2d(x, p, &idx), y64 = ops::max_pool2d(x64, p, &idx64);
    EXPECT_TRUE(allclose(y, y64, 1e-6, 1e-6));
    EXPECT_EQ(idx.to_vector<std::int64_t>(), idx64.to_vector<std::int64_t>());
    Tensor gy = randn(y.shape(), {}, &gen);
    EXPECT_TRUE(allclose(ops::max_pool2d_backward(gy, idx, x.shape()),
                         ops::max_pool2d_backward(gy.to(DType::Float64), idx64, x.shape()), 1e-6,
                         1e-6));
    Tensor a = ops::avg_pool2d(x, p), a64 = ops::avg_pool2d(x64, p);
    EXPECT_TRUE(allclose(a, a64, 1e-5, 1e-6));
    EXPECT_TRUE(allclose(ops::avg_pool2d_backward(gy, x.shape(), p),
                         ops::avg_pool2d_backward(gy.to(DType::Float64), x.shape(), p), 1e-5,
                         1e-6));
  }
  Tensor ad = ops::adaptive_avg_pool2d(x, {4, 3}), ad64 = ops::adaptive_avg_pool2d(x64, {4, 3});
  EXPECT_TRUE(allclose(ad, ad64, 1e-5, 1e-6));
  Tensor gy = randn({2, 3, 4, 3}, {}, &gen);
  EXPECT_TRUE(allclose(ops::adaptive_avg_pool2d_backward(gy, x.shape()),
                       ops::adaptive_avg_pool2d_backward(gy.to(DType::Float64), x.shape()), 1e-5,
                       1e-6));
}

TEST(Pool2d, GradcheckMax) {
  Tensor x = random_input({2, 2, 7, 6}, 31);
  for (const Pool2dParams& p : {pool(2, 2), pool(3, 2, 1), pool(3, 2, 1, true), pool(2, 1)}) {
    EXPECT_TRUE(gradcheck([&](const auto& in) { return max_pool2d(in[0], p); }, {x}));
  }
}

TEST(Pool2d, GradcheckAverage) {
  Tensor x = random_input({2, 2, 7, 6}, 32);
  for (const Pool2dParams& p :
       {pool(2, 2), pool(3, 2, 1), pool(3, 2, 1, true), pool(3, 2, 1, true, false),
        pool(2, 1, 1, false, false), Pool2dParams{.kernel = {3, 2}, .stride = {1, 2},
                                                  .padding = {1, 1}, .ceil_mode = true}}) {
    EXPECT_TRUE(gradcheck([&](const auto& in) { return avg_pool2d(in[0], p); }, {x}));
  }
}

TEST(Pool2d, GradcheckAdaptive) {
  Tensor x = random_input({2, 3, 5, 7}, 33);
  EXPECT_TRUE(gradcheck([](const auto& in) { return adaptive_avg_pool2d(in[0], {2, 3}); }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return adaptive_avg_pool2d(in[0], {3, 7}); }, {x}));
  EXPECT_TRUE(gradcheck([](const auto& in) { return adaptive_avg_pool2d(in[0], {1, 1}); }, {x}));
}

TEST(Pool2d, MaxPoolWithoutGradKeepsNoIndices) {
  Tensor x = random_input({1, 1, 4, 4}, 34);
  {
    NoGradGuard no_grad;
    Tensor y = max_pool2d(x, pool(2, 2));
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  Tensor y = max_pool2d(x, pool(2, 2));
  y.sum().backward();
  // Each 2x2 window passes gradient 1 to exactly one input.
  EXPECT_DOUBLE_EQ(x.grad().sum().item(), 4.0);
}

TEST(Pool2d, ErrorsNameTheOpAndShapes) {
  expect_contains(error_of([] { max_pool2d(zeros({3, 4, 4}), pool(2, 2)); }),
                  "max_pool2d: expected input (N, C, H, W), got (3, 4, 4)");
  expect_contains(error_of([] { avg_pool2d(zeros({1, 1, 4, 4}), pool(2, 2, 2)); }),
                  "avg_pool2d: padding (2, 2) must be at most half the kernel (2, 2)");
  expect_contains(error_of([] { max_pool2d(zeros({1, 2, 2, 2}), pool(3, 1)); }),
                  "max_pool2d: input (1, 2, 2, 2) is too small for kernel (3, 3) with padding "
                  "(0, 0) (output would be (1, 2, 0, 0))");
  expect_contains(error_of([] { max_pool2d(zeros({1, 1, 4, 4}), pool(2, 0)); }),
                  "max_pool2d: stride (0, 0) must be positive");
  expect_contains(error_of([] { avg_pool2d(zeros({1, 1, 4, 4}, {.dtype = DType::Int64}),
                                           pool(2, 2)); }),
                  "avg_pool2d: expected a float32 or float64 tensor, got int64");
  expect_contains(error_of([] { adaptive_avg_pool2d(zeros({1, 1, 4, 4}), {0, 2}); }),
                  "adaptive_avg_pool2d: output size (0, 2) must be positive");
  expect_contains(error_of([] { adaptive_avg_pool2d(zeros({4, 4}), {2, 2}); }),
                  "adaptive_avg_pool2d: expected input (N, C, H, W), got (4, 4)");
  expect_contains(error_of([] {
                    ops::avg_pool2d_backward(zeros({1, 1, 3, 3}), {1, 1, 4, 4}, pool(2, 2));
                  }),
                  "avg_pool2d_backward: grad_out (1, 1, 3, 3) does not match the pooled output "
                  "(1, 1, 2, 2)");
  expect_contains(error_of([] {
                    ops::max_pool2d_backward(zeros({1, 1, 2, 2}), zeros({1, 1, 2, 2}),
                                             {1, 1, 4, 4});
                  }),
                  "max_pool2d_backward: indices must be int64 of grad_out's shape (1, 1, 2, 2)");
}

}  // namespace
}  // namespace tandem
