// Tests of the losses: cross_entropy against PyTorch numbers (label smoothing 0 and 0.1, mean and
// sum), float32 (oneDNN log_softmax) against float64, gradient checks, target validation; and
// mse_loss by hand and by gradient check. Shapes: logits (N, L), target (N) int64.
#include <gtest/gtest.h>

#include <cmath>

#include "errors.h"
#include "gradcheck.h"
#include "snippet_logits.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::allclose;
using testing::error_of;
using testing::gradcheck;
using testing::random_input;
using testing::snippet_logits;

TEST(CrossEntropy, MatchesPyTorch) {
  // Produced once with PyTorch 1.13 (/usr/bin/python3), printed rounded to 10 decimals:
  //   F = torch.nn.functional
  //   x = ((torch.arange(12, dtype=torch.float64) * 0.7 + 0.3).sin() * 2).reshape(3, 4)
  //   x.requires_grad_(); t = torch.tensor([3, 0, 2])
  //   for s in (0.0, 0.1):
  //     for red in ("mean", "sum"):
  //       x.grad = None
  //       loss = F.cross_entropy(x, t, label_smoothing=s, reduction=red); loss.backward()
  //       print(s, red, loss.item(), x.grad[0].tolist())
  struct Case {
    double smoothing;
    Reduction reduction;
    double loss;
    std::vector<double> grad_row0;
  };
  const std::vector<Case> cases{
      {0.0,
       Reduction::Mean,
       1.0036079257,
       {0.0328665658, 0.0979402363, 0.1322567501, -0.2630635522}},
      {0.0,
       Reduction::Sum,
       3.0108237772,
       {0.0985996973, 0.2938207089, 0.3967702504, -0.7891906566}},
      {0.1,
       Reduction::Mean,
       1.0722680109,
       {0.0245332324, 0.089606903, 0.1239234168, -0.2380635522}},
      {0.1,
       Reduction::Sum,
       3.2168040326,
       {0.0735996973, 0.2688207089, 0.3717702504, -0.7141906566}},
  };
  const Tensor target = from_vector(std::vector<std::int64_t>{3, 0, 2}, {3});
  for (DType dtype : {DType::Float64, DType::Float32}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " smoothing " + std::to_string(c.smoothing) +
                   (c.reduction == Reduction::Mean ? " mean" : " sum"));
      // float32 log-probabilities come from oneDNN, accurate to about 5e-6 each (softmax.cpp).
      const double tol = dtype == DType::Float64 ? 1e-9 : 2e-6;
      const double loss_tol = dtype == DType::Float64 ? 1e-9 : 2e-5;
      Tensor x = snippet_logits(dtype).set_requires_grad(true);
      Tensor loss = cross_entropy(x, target, c.smoothing, c.reduction);
      EXPECT_EQ(loss.dim(), 0);
      EXPECT_NEAR(loss.item(), c.loss, loss_tol);
      loss.backward();
      EXPECT_TRUE(allclose(x.grad().select(0, 0), c.grad_row0, tol, tol));
    }
  }
}

TEST(CrossEntropy, SmoothingIsTheDocumentedMixture) {
  // loss = (1 - s) * nll + s * mean over samples of -mean_l log p_l (mean reduction).
  Generator g(3);
  Tensor x = randn({5, 7}, {.dtype = DType::Float64}, &g);
  Tensor target = randint(0, 7, {5}, {.dtype = DType::Int64}, &g);
  const double s = 0.25;
  Tensor lp = log_softmax(x, 1);
  double nll = 0, uniform = 0;
  for (std::int64_t i = 0; i < 5; ++i) {
    nll -= lp.at({i, static_cast<std::int64_t>(target.at({i}))});
    uniform -= lp.select(0, i).sum().item() / 7;
  }
  EXPECT_NEAR(cross_entropy(x, target, s).item(), ((1 - s) * nll + s * uniform) / 5, 1e-12);
  EXPECT_NEAR(cross_entropy(x, target, s, Reduction::Sum).item(), (1 - s) * nll + s * uniform,
              1e-12);
}

TEST(CrossEntropy, Float32MatchesFloat64Reference) {
  Generator g(8);
  Tensor x = randn({8, 10}, {}, &g) * 2.0;
  Tensor target = randint(0, 10, {8}, {.dtype = DType::Int64}, &g);
  for (double s : {0.0, 0.1}) {
    for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
      Tensor x32 = x.detach().set_requires_grad(true);
      Tensor x64 = x.detach().to(DType::Float64).set_requires_grad(true);
      Tensor l32 = cross_entropy(x32, target, s, r), l64 = cross_entropy(x64, target, s, r);
      EXPECT_NEAR(l32.item(), l64.item(), 1e-5 * std::abs(l64.item()));
      (l32 * 1.5).backward();
      (l64 * 1.5).backward();
      EXPECT_TRUE(allclose(x32.grad(), x64.grad(), 1e-5, 1e-6));
    }
  }
}

TEST(CrossEntropy, Gradcheck) {
  auto x = random_input({4, 5}, 51);
  const Tensor target = from_vector(std::vector<std::int64_t>{4, 0, 2, 2}, {4});
  for (double s : {0.0, 0.1}) {
    for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
      EXPECT_TRUE(
          gradcheck([&](const auto& in) { return cross_entropy(in[0], target, s, r); }, {x}));
    }
  }
}

TEST(CrossEntropy, OutOfRangeLabelNamesValueAndIndex) {
  Tensor x = zeros({3, 4});
  EXPECT_NE(error_of([&] {
              cross_entropy(x, from_vector(std::vector<std::int64_t>{0, 5, 1}, {3}));
            }).find("cross_entropy: target 5 at index 1 is out of range for 4 classes"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              cross_entropy(x, from_vector(std::vector<std::int64_t>{0, 1, -1}, {3}));
            }).find("target -1 at index 2 is out of range"),
            std::string::npos);
}

TEST(CrossEntropy, WrongTargetDtypeOrShapeIsAnError) {
  Tensor x = zeros({3, 4});
  EXPECT_NE(error_of([&] {
              cross_entropy(x, zeros({3}));
            }).find("cross_entropy: expected an int64 target of class indices, got float32"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              cross_entropy(x, from_vector(std::vector<std::int64_t>{0, 1}, {2}));
            }).find("cross_entropy: target (2) does not match logits (3, 4)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              cross_entropy(zeros({3}), from_vector(std::vector<std::int64_t>{0}, {1}));
            }).find("cross_entropy: expected logits (N, L), got (3)"),
            std::string::npos);
  EXPECT_THROW(cross_entropy(x, from_vector(std::vector<std::int64_t>{0, 1, 2}, {3}), 1.5), Error);
}

TEST(MseLoss, ValuesByHand) {
  // input [1, 2, 3], target [0, 2, 5]: squared errors [1, 0, 4]; d mean / d input = 2 (x - t) / 3.
  Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3}, {.dtype = DType::Float64});
  x.set_requires_grad(true);
  Tensor t = from_vector(std::vector<double>{0, 2, 5}, {3}, {.dtype = DType::Float64});
  Tensor loss = mse_loss(x, t);
  EXPECT_DOUBLE_EQ(loss.item(), 5.0 / 3.0);
  loss.backward();
  EXPECT_TRUE(allclose(x.grad(), {2.0 / 3.0, 0.0, -4.0 / 3.0}));
  EXPECT_DOUBLE_EQ(mse_loss(x, t, Reduction::Sum).item(), 5.0);
}

TEST(MseLoss, Gradcheck) {
  auto x = random_input({3, 4}, 61), t = random_input({3, 4}, 62);
  EXPECT_TRUE(gradcheck([](const auto& in) { return mse_loss(in[0], in[1]); }, {x, t}));
  EXPECT_TRUE(
      gradcheck([](const auto& in) { return mse_loss(in[0], in[1], Reduction::Sum); }, {x, t}));
}

TEST(MseLoss, ShapeMismatchNamesTheShapes) {
  EXPECT_NE(error_of([] {
              mse_loss(zeros({3, 4}), zeros({4, 3}));
            }).find("mse_loss: input (3, 4) and target (4, 3) differ in shape"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem
