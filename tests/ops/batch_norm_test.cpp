// Tests of batch normalisation: PyTorch numbers, running-stat updates by hand, the float32
// (oneDNN) path against the float64 reference loops, gradient checks in training and evaluation
// mode, and the shape errors. Shapes: x (N, C, H, W) or (N, C); per-channel tensors (C).
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

const TensorOptions kF64{.dtype = DType::Float64};

// sin(i * step) for i = 0, 1, ... in the given shape (the inputs of the PyTorch snippets).
Tensor sin_ramp(const Shape& shape, double step, DType dtype = DType::Float64) {
  std::vector<double> v(static_cast<std::size_t>(numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<double>(i) * step);
  return from_vector(v, shape, {.dtype = dtype});
}

Tensor cos_ramp(const Shape& shape, double step, DType dtype = DType::Float64) {
  std::vector<double> v(static_cast<std::size_t>(numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::cos(static_cast<double>(i) * step);
  return from_vector(v, shape, {.dtype = dtype});
}

TEST(BatchNorm, TrainingMatchesPyTorch) {
  // Produced once with PyTorch 1.13 (/usr/bin/python3); some literals rounded to 10 decimals:
  //   d = torch.float64
  //   x = (torch.arange(24, dtype=d) * 0.37).sin().reshape(2, 3, 2, 2).requires_grad_()
  //   w = torch.tensor([0.5, 1.0, 2.0], dtype=d, requires_grad=True)
  //   b = torch.tensor([0.1, -0.2, 0.3], dtype=d, requires_grad=True)
  //   rm = torch.zeros(3, dtype=d); rv = torch.ones(3, dtype=d)
  //   y = torch.nn.functional.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)
  //   (y * (torch.arange(24, dtype=d) * 0.5).cos().reshape(2, 3, 2, 2)).sum().backward()
  //   print(y.flatten()[:6].tolist(), rm.tolist(), rv.tolist())
  //   print(x.grad.flatten()[:6].tolist(), w.grad.tolist(), b.grad.tolist())
  const std::vector<double> y_head{0.2364650482, 0.4849662172, 0.6998339187,
                                   0.8519868174, 0.9254385817, 0.8473592097};
  const std::vector<double> rm_after{-0.019858203297172763, 0.04970740130300288,
                                     0.028872304945257988};
  const std::vector<double> rv_after{0.9605007545679766, 0.9224486911359564, 0.9524511532106601};
  const std::vector<double> gx_head{0.2434331136,  0.2155953557, 0.0324862313,
                                    -0.2557340148, 1.0878517859, 0.1920634733};
  const std::vector<double> gw{-1.3184376037219034, -1.2322345315472936, -2.1184383209226634};
  const std::vector<double> gb{5.525917553982936, -5.799553990559811, -0.6989854608712938};

  for (DType dtype : {DType::Float64, DType::Float32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double tol = dtype == DType::Float64 ? 1e-9 : 2e-5;
    Tensor x = sin_ramp({2, 3, 2, 2}, 0.37, dtype).set_requires_grad(true);
    Tensor w = from_vector(std::vector<double>{0.5, 1.0, 2.0}, {3}, {.dtype = dtype});
    Tensor b = from_vector(std::vector<double>{0.1, -0.2, 0.3}, {3}, {.dtype = dtype});
    w.set_requires_grad(true);
    b.set_requires_grad(true);
    Tensor rm = zeros({3}, {.dtype = dtype}), rv = ones({3}, {.dtype = dtype});
    Tensor y = batch_norm(x, rm, rv, w, b, /*training=*/true, 0.1, 1e-5);
    (y * cos_ramp({2, 3, 2, 2}, 0.5, dtype)).sum().backward();
    EXPECT_TRUE(allclose(y.flatten().slice(0, 0, 6), y_head, tol, tol));
    EXPECT_TRUE(allclose(rm, rm_after, tol, tol));
    EXPECT_TRUE(allclose(rv, rv_after, tol, tol));
    EXPECT_TRUE(allclose(x.grad().flatten().slice(0, 0, 6), gx_head, tol, tol));
    EXPECT_TRUE(allclose(w.grad(), gw, tol, tol));
    EXPECT_TRUE(allclose(b.grad(), gb, tol, tol));
  }
}

TEST(BatchNorm, RunningStatsFollowMomentumRuleWithUnbiasedVariance) {
  // One channel, x = [1, 2, 3, 6]: batch mean 3, biased variance 14/4 = 3.5, unbiased 14/3.
  // With running_mean 1, running_var 2 and momentum 0.5:
  //   running_mean = 0.5 * 1 + 0.5 * 3 = 2,  running_var = 0.5 * 2 + 0.5 * 14/3 = 10/3;
  // the output is normalised with the biased variance: y = (x - 3) / sqrt(3.5 + eps).
  for (DType dtype : {DType::Float64, DType::Float32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double eps = 1e-5;
    Tensor x = from_vector(std::vector<double>{1, 2, 3, 6}, {4, 1}, {.dtype = dtype});
    Tensor rm = full({1}, 1.0, {.dtype = dtype}), rv = full({1}, 2.0, {.dtype = dtype});
    Tensor save_mean, save_invstd;
    Tensor y =
        ops::batch_norm_train(x, Tensor(), Tensor(), rm, rv, 0.5, eps, &save_mean, &save_invstd);
    const double s = 1.0 / std::sqrt(3.5 + eps);
    EXPECT_TRUE(allclose(y, {-2 * s, -1 * s, 0, 3 * s}, 1e-6, 1e-6));
    EXPECT_TRUE(allclose(rm, {2.0}, 1e-6, 1e-6));
    EXPECT_TRUE(allclose(rv, {10.0 / 3.0}, 1e-6, 1e-6));
    EXPECT_TRUE(allclose(save_mean, {3.0}, 1e-6, 1e-6));
    EXPECT_TRUE(allclose(save_invstd, {s}, 1e-6, 1e-6));
    // A second step moves the running stats again from where they are.
    ops::batch_norm_train(x, Tensor(), Tensor(), rm, rv, 0.5, eps, nullptr, nullptr);
    EXPECT_TRUE(allclose(rm, {2.5}, 1e-6, 1e-6));
    EXPECT_TRUE(allclose(rv, {0.5 * 10.0 / 3.0 + 0.5 * 14.0 / 3.0}, 1e-6, 1e-6));
  }
}

TEST(BatchNorm, EvalUsesRunningStatsAndLeavesThemAlone) {
  // Two channels: y = (x - running_mean) / sqrt(running_var + eps) * w + b.
  for (DType dtype : {DType::Float64, DType::Float32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double eps = 1e-3;
    Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2},
                           {.dtype = dtype});  // (N=2, C=2, L=2)
    Tensor rm = from_vector(std::vector<double>{1, -1}, {2}, {.dtype = dtype});
    Tensor rv = from_vector(std::vector<double>{4, 0.25}, {2}, {.dtype = dtype});
    Tensor w = from_vector(std::vector<double>{2, 3}, {2}, {.dtype = dtype});
    Tensor b = from_vector(std::vector<double>{0.5, -0.5}, {2}, {.dtype = dtype});
    Tensor y = batch_norm(x, rm, rv, w, b, /*training=*/false, 0.1, eps);
    const double s0 = 2 / std::sqrt(4 + eps), s1 = 3 / std::sqrt(0.25 + eps);
    EXPECT_TRUE(allclose(y,
                         {0 * s0 + 0.5, 1 * s0 + 0.5, 4 * s1 - 0.5, 5 * s1 - 0.5, 4 * s0 + 0.5,
                          5 * s0 + 0.5, 8 * s1 - 0.5, 9 * s1 - 0.5},
                         1e-6, 1e-5));
    EXPECT_TRUE(allclose(rm, {1, -1}));
    EXPECT_TRUE(allclose(rv, {4, 0.25}));
    // Without weight and bias.
    Tensor y_plain = batch_norm(x, rm, rv, Tensor(), Tensor(), false, 0.1, eps);
    EXPECT_NEAR(y_plain.at({1, 1, 1}), 9 / std::sqrt(0.25 + eps), 1e-5);
  }
}

// Runs one training step (or an evaluation) in float32 and float64 from the same numbers and
// compares outputs, running stats and all gradients.
void expect_float32_matches_float64(const Shape& shape, bool with_weight, bool with_bias,
                                    bool training) {
  SCOPED_TRACE(to_string(shape) + (with_weight ? " weight" : "") + (with_bias ? " bias" : "") +
               (training ? " training" : " eval"));
  Generator g(17);
  const std::int64_t c = shape[1];
  Tensor x = randn(shape, {}, &g) * 2.0 + 0.5;
  Tensor w = with_weight ? rand(Shape{c}, {}, &g) + 0.5 : Tensor();
  Tensor b = with_bias ? randn(Shape{c}, {}, &g) : Tensor();
  Tensor rm = randn(Shape{c}, {}, &g), rv = rand(Shape{c}, {}, &g) + 0.5;
  Tensor gy = randn(shape, {}, &g);
  auto to64 = [](const Tensor& t) {
    return t.defined() ? t.detach().to(DType::Float64) : Tensor();
  };
  Tensor x64 = to64(x), w64 = to64(w), b64 = to64(b), rm64 = to64(rm), rv64 = to64(rv);
  for (Tensor* t : {&x, &w, &b, &x64, &w64, &b64}) {
    if (t->defined()) t->set_requires_grad(true);
  }
  Tensor y = batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
  Tensor y64 = batch_norm(x64, rm64, rv64, w64, b64, training, 0.1, 1e-5);
  EXPECT_TRUE(allclose(y, y64, 1e-4, 1e-4));
  EXPECT_TRUE(allclose(rm, rm64, 1e-5, 1e-5));
  EXPECT_TRUE(allclose(rv, rv64, 1e-5, 1e-5));
  y.backward(gy);
  y64.backward(gy.to(DType::Float64));
  EXPECT_TRUE(allclose(x.grad(), x64.grad(), 1e-4, 1e-4));
  if (with_weight) {
    EXPECT_TRUE(allclose(w.grad(), w64.grad(), 1e-4, 1e-4));
  }
  if (with_bias) {
    EXPECT_TRUE(allclose(b.grad(), b64.grad(), 1e-4, 1e-4));
  }
}

TEST(BatchNorm, Float32MatchesFloat64Reference) {
  for (bool training : {true, false}) {
    expect_float32_matches_float64({4, 3, 5, 5}, true, true, training);
    expect_float32_matches_float64({4, 3, 5, 5}, false, false, training);
    expect_float32_matches_float64({4, 3, 5, 5}, true, false, training);
    expect_float32_matches_float64({16, 6}, true, true, training);
    expect_float32_matches_float64({16, 6}, false, false, training);
  }
}

TEST(BatchNorm, BackwardKernelFloat32MatchesFloat64) {
  // The kernel directly, with every combination of requested weight / bias gradients.
  Generator g(5);
  Tensor x = randn({3, 4, 2, 3}, {}, &g), w = rand(Shape{4}, {}, &g) + 0.5;
  Tensor gy = randn({3, 4, 2, 3}, {}, &g);
  Tensor mean, invstd, mean64, invstd64;
  ops::batch_norm_train(x, w, Tensor(), Tensor(), Tensor(), 0.1, 1e-5, &mean, &invstd);
  Tensor x64 = x.to(DType::Float64), w64 = w.to(DType::Float64), gy64 = gy.to(DType::Float64);
  ops::batch_norm_train(x64, w64, Tensor(), Tensor(), Tensor(), 0.1, 1e-5, &mean64, &invstd64);
  EXPECT_TRUE(allclose(mean, mean64, 1e-5, 1e-6));
  EXPECT_TRUE(allclose(invstd, invstd64, 1e-5, 1e-6));
  for (bool want_w : {false, true}) {
    for (bool want_b : {false, true}) {
      Tensor gw, gb, gw64, gb64;
      Tensor gx = ops::batch_norm_backward(gy, x, w, mean, invstd, want_w ? &gw : nullptr,
                                           want_b ? &gb : nullptr);
      Tensor gx64 = ops::batch_norm_backward(gy64, x64, w64, mean64, invstd64,
                                             want_w ? &gw64 : nullptr, want_b ? &gb64 : nullptr);
      EXPECT_TRUE(allclose(gx, gx64, 1e-4, 1e-4));
      EXPECT_EQ(gw.defined(), want_w);
      EXPECT_EQ(gb.defined(), want_b);
      if (want_w) {
        EXPECT_TRUE(allclose(gw, gw64, 1e-4, 1e-4));
      }
      if (want_b) {
        EXPECT_TRUE(allclose(gb, gb64, 1e-4, 1e-4));
      }
    }
  }
}

TEST(BatchNorm, GradcheckTraining) {
  auto run = [](bool affine) {
    return [affine](const std::vector<Tensor>& in) {
      const std::int64_t c = in[0].size(1);
      Tensor rm = zeros({c}, kF64), rv = ones({c}, kF64);
      return batch_norm(in[0], rm, rv, affine ? in[1] : Tensor(), affine ? in[2] : Tensor(),
                        /*training=*/true, 0.1, 1e-5);
    };
  };
  auto x4 = random_input({3, 2, 2, 3}, 21), x2 = random_input({5, 3}, 22);
  auto w2 = random_input({2}, 23), b2 = random_input({2}, 24);
  auto w3 = random_input({3}, 25), b3 = random_input({3}, 26);
  EXPECT_TRUE(gradcheck(run(true), {x4, w2, b2}));
  EXPECT_TRUE(gradcheck(run(false), {x4}));
  EXPECT_TRUE(gradcheck(run(true), {x2, w3, b3}));
  EXPECT_TRUE(gradcheck(run(false), {x2}));
}

TEST(BatchNorm, GradcheckEval) {
  auto x = random_input({3, 2, 2, 2}, 31), w = random_input({2}, 32), b = random_input({2}, 33);
  Tensor rm = from_vector(std::vector<double>{0.3, -0.2}, {2}, kF64);
  Tensor rv = from_vector(std::vector<double>{0.7, 1.6}, {2}, kF64);
  EXPECT_TRUE(gradcheck(
      [&](const auto& in) { return batch_norm(in[0], rm, rv, in[1], in[2], false, 0.1, 1e-5); },
      {x, w, b}));
  EXPECT_TRUE(gradcheck(
      [&](const auto& in) { return batch_norm(in[0], rm, rv, Tensor(), Tensor(), false); }, {x}));
  auto x2 = random_input({4, 2}, 34);
  EXPECT_TRUE(gradcheck(
      [&](const auto& in) { return batch_norm(in[0], rm, rv, in[1], in[2], false); }, {x2, w, b}));
}

TEST(BatchNorm, ShapeErrorsNameTheShapes) {
  Tensor x = zeros({4, 3, 2, 2}), rm = zeros({3}), rv = ones({3});
  EXPECT_NE(error_of([&] { batch_norm(x, rm, rv, ones({5}), Tensor(), true); })
                .find("batch_norm: weight of shape (5) does not match input (4, 3, 2, 2) with 3 "
                      "channels"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              batch_norm(x, zeros({2}), rv, Tensor(), Tensor(), false);
            }).find("running_mean of shape (2) does not match input (4, 3, 2, 2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              batch_norm(zeros({5}), zeros({5}), ones({5}), Tensor(), Tensor(), true);
            }).find("batch_norm: expected input (N, C) or (N, C, H, W), got (5)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              batch_norm(zeros({1, 3}), rm, rv, Tensor(), Tensor(), true);
            }).find("expected more than 1 value per channel when training, got input (1, 3)"),
            std::string::npos);
  // In evaluation a single sample is fine.
  EXPECT_TRUE(
      allclose(batch_norm(ones({1, 3}), rm, rv, Tensor(), Tensor(), false),
               {1 / std::sqrt(1 + 1e-5), 1 / std::sqrt(1 + 1e-5), 1 / std::sqrt(1 + 1e-5)}));
}

}  // namespace
}  // namespace tandem
