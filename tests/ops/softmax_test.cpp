// Tests of softmax and log_softmax: PyTorch numbers, stability with large logits, the float32
// (oneDNN) path against the float64 reference loops along every dim, and gradient checks.
// Shapes: x (A, B, C) in the cross-dtype tests, (3, 4) in the PyTorch comparison.
#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "snippet_logits.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::allclose;
using testing::gradcheck;
using testing::random_input;
using testing::snippet_logits;

TEST(Softmax, MatchesPyTorch) {
  // Produced once with PyTorch 1.13 (/usr/bin/python3), printed rounded to 10 decimals:
  //   F = torch.nn.functional
  //   x = ((torch.arange(12, dtype=torch.float64) * 0.7 + 0.3).sin() * 2).reshape(3, 4)
  //   F.softmax(x, 0).flatten()[:4], F.log_softmax(x, 1).flatten()[:4]
  for (DType dtype : {DType::Float64, DType::Float32}) {
    SCOPED_TRACE(dtype_name(dtype));
    // oneDNN's float32 log_softmax carries about 5e-6 absolute error (see softmax.cpp).
    const double tol = dtype == DType::Float64 ? 1e-9 : 1e-6;
    const double log_tol = dtype == DType::Float64 ? 1e-9 : 1e-5;
    Tensor x = snippet_logits(dtype);
    EXPECT_TRUE(allclose(softmax(x, 0).select(0, 0),
                         {0.5365001893, 0.7136929994, 0.5638856877, 0.3427335161}, tol, tol));
    EXPECT_TRUE(allclose(log_softmax(x, 1).select(0, 0),
                         {-2.3166870876, -1.2247855313, -0.9243978801, -1.5568011399}, 0, log_tol));
  }
}

TEST(Softmax, LargeLogitsAreStable) {
  // softmax([1000, 1001, 1002]) = softmax([0, 1, 2]) = [e^0, e^1, e^2] / (1 + e + e^2).
  const double z = 1 + std::exp(1.0) + std::exp(2.0);
  for (DType dtype : {DType::Float64, DType::Float32}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor x = from_vector(std::vector<double>{1000, 1001, 1002, -1000, -1001, -1002}, {2, 3},
                           {.dtype = dtype});
    EXPECT_TRUE(allclose(
        softmax(x, 1),
        {1 / z, std::exp(1.0) / z, std::exp(2.0) / z, std::exp(2.0) / z, std::exp(1.0) / z, 1 / z},
        1e-6, 1e-7));
    EXPECT_TRUE(allclose(log_softmax(x, -1).select(0, 0),
                         {-std::log(z), 1 - std::log(z), 2 - std::log(z)}, 0, 1e-5));
  }
}

TEST(Softmax, Float32MatchesFloat64AlongEveryDim) {
  Generator g(11);
  Tensor x = randn({3, 4, 5}, {}, &g) * 3.0;
  Tensor gy = randn({3, 4, 5}, {}, &g);
  for (std::int64_t dim : {0, 1, 2, -1}) {
    for (bool log : {false, true}) {
      SCOPED_TRACE(std::string(log ? "log_softmax" : "softmax") + " dim " + std::to_string(dim));
      Tensor x32 = x.detach().set_requires_grad(true);
      Tensor x64 = x.detach().to(DType::Float64).set_requires_grad(true);
      Tensor y32 = log ? log_softmax(x32, dim) : softmax(x32, dim);
      Tensor y64 = log ? log_softmax(x64, dim) : softmax(x64, dim);
      // softmax to float32 rounding; oneDNN's log_softmax to about 5e-6 absolute.
      EXPECT_TRUE(allclose(y32, y64, 1e-5, log ? 1e-5 : 1e-6));
      y32.backward(gy);
      y64.backward(gy.to(DType::Float64));
      EXPECT_TRUE(allclose(x32.grad(), x64.grad(), 1e-5, 1e-6));
    }
  }
}

TEST(Softmax, ProbabilitiesSumToOneOnStridedInput) {
  // A transposed (non-contiguous) input: softmax over its dim 1 sums to one per row.
  Generator g(12);
  Tensor x = randn({5, 4}, {.dtype = DType::Float64}, &g).t();  // (4, 5), strided
  Tensor y = softmax(x, 1);
  EXPECT_TRUE(allclose(y.sum({1}), {1, 1, 1, 1}, 1e-12, 1e-12));
  EXPECT_NEAR(y.at({2, 3}), std::exp(x.at({2, 3})) / exp(x.select(0, 2)).sum().item(), 1e-12);
}

TEST(Softmax, Gradcheck) {
  auto x = random_input({3, 4, 2}, 41);
  for (std::int64_t dim : {0, 1, -1}) {
    SCOPED_TRACE(dim);
    EXPECT_TRUE(gradcheck([dim](const auto& in) { return softmax(in[0], dim); }, {x}));
    EXPECT_TRUE(gradcheck([dim](const auto& in) { return log_softmax(in[0], dim); }, {x}));
  }
}

TEST(Softmax, BadDimIsAnError) {
  EXPECT_THROW(softmax(zeros({2, 3}), 2), Error);
  EXPECT_THROW(log_softmax(zeros({2, 3}), -3), Error);
  EXPECT_THROW(ops::softmax_backward(zeros({2, 3}), zeros({3, 2}), 1), Error);
}

}  // namespace
}  // namespace tandem
