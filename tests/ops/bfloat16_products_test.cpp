// Tests of the bfloat16 products on the CPU (ops/cpu/bfloat16_products.h): conv2d, matmul and
// linear, forward and both backwards, against float64 references on the same bfloat16 operands
// (the result is that reference rounded to bfloat16, so within half a bfloat16 ulp of it plus
// float32 accumulation error), and the errors for a bias and for mixed dtypes.
// x (N, C, H, W), w (K, C, R, S), y (N, K, P, Q); matrices a (M, K), b (K, N).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "errors.h"
#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::error_of;
using testing::expect_contains;

// A random tensor rounded to bfloat16 (the operand), and the same values in float64.
struct Operand {
  Tensor bf16, f64;
};
Operand operand(const Shape& shape, std::uint64_t seed) {
  const Tensor x = convert_dtype(data_only(testing::random_input(shape, seed)), DType::BFloat16);
  return {x, convert_dtype(x, DType::Float64)};
}

// got (bfloat16) is the float64 reference rounded to bfloat16: within one bfloat16 ulp (2^-7
// relative, covering the float32 accumulation's own error) of each element, plus a floor for
// elements that cancel to nearly zero.
void expect_rounded_reference(const Tensor& got, const Tensor& reference) {
  ASSERT_EQ(got.dtype(), DType::BFloat16);
  ASSERT_EQ(got.shape(), reference.shape());
  EXPECT_TRUE(testing::allclose(convert_dtype(got, DType::Float64), reference, 1.0 / 128, 1e-5));
}

TEST(Bfloat16Products, Conv2dForwardAndBackwards) {
  const Conv2dParams p{.stride = {2, 1}, .padding = {1, 1}};
  const Operand x = operand({2, 3, 7, 6}, 1), w = operand({4, 3, 3, 3}, 2);
  const Tensor y = ops::conv2d(x.bf16, w.bf16, Tensor(), p);
  expect_rounded_reference(y, ops::conv2d(x.f64, w.f64, Tensor(), p));

  const Operand g = operand(y.shape(), 3);
  expect_rounded_reference(ops::conv2d_backward_input(g.bf16, w.bf16, x.bf16.shape(), p),
                           ops::conv2d_backward_input(g.f64, w.f64, x.f64.shape(), p));
  Tensor gw, gw64;
  ops::conv2d_backward_weights(g.bf16, x.bf16, w.bf16.shape(), p, &gw, nullptr);
  ops::conv2d_backward_weights(g.f64, x.f64, w.f64.shape(), p, &gw64, nullptr);
  expect_rounded_reference(gw, gw64);
}

TEST(Bfloat16Products, MatmulAllTranspositions) {
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      SCOPED_TRACE(std::string("trans_a ") + (ta ? "1" : "0") + " trans_b " + (tb ? "1" : "0"));
      const Operand a = operand(ta ? Shape{9, 5} : Shape{5, 9}, 4);
      const Operand b = operand(tb ? Shape{3, 9} : Shape{9, 3}, 5);
      expect_rounded_reference(ops::matmul(a.bf16, b.bf16, ta, tb),
                               ops::matmul(a.f64, b.f64, ta, tb));
    }
  }
}

TEST(Bfloat16Products, LinearForwardAndBackwards) {
  const Operand x = operand({6, 40}, 6), w = operand({5, 40}, 7);
  expect_rounded_reference(ops::linear(x.bf16, w.bf16, Tensor()),
                           ops::linear(x.f64, w.f64, Tensor()));
  const Operand g = operand({6, 5}, 8);
  expect_rounded_reference(ops::linear_backward_input(g.bf16, w.bf16),
                           ops::linear_backward_input(g.f64, w.f64));
  Tensor gw, gw64;
  ops::linear_backward_weights(g.bf16, x.bf16, &gw, nullptr);
  ops::linear_backward_weights(g.f64, x.f64, &gw64, nullptr);
  expect_rounded_reference(gw, gw64);
}

TEST(Bfloat16Products, ABiasIsRefusedWithTheReason) {
  const Operand x = operand({1, 2, 4, 4}, 9), w = operand({3, 2, 3, 3}, 10);
  const Operand b = operand({3}, 11);
  expect_contains(error_of([&] { (void)ops::conv2d(x.bf16, w.bf16, b.bf16, {}); }),
                  "conv2d: a bfloat16 product takes no bias");
  const Operand v = operand({2, 4}, 12), m = operand({3, 4}, 13), g = operand({2, 3}, 14);
  expect_contains(error_of([&] { (void)ops::linear(v.bf16, m.bf16, b.bf16); }),
                  "linear: a bfloat16 product takes no bias");
  Tensor gw, gb;
  expect_contains(error_of([&] { ops::linear_backward_weights(g.bf16, v.bf16, &gw, &gb); }),
                  "as autocast does");
}

TEST(Bfloat16Products, MixedDtypesAreRefused) {
  const Operand a = operand({2, 3}, 15);
  const Tensor b = convert_dtype(a.bf16, DType::Float32);
  expect_contains(error_of([&] { (void)ops::matmul(a.bf16, b, false, true); }),
                  "matmul: dtypes differ (bfloat16 and float32)");
}

}  // namespace
}  // namespace tandem
