// Tests of bfloat16 autocast (autograd/autocast.h): the guard nests and is per thread; under it
// conv2d, linear and matmul on float32 run the bfloat16 kernels on rounded casts of their operands
// and return float32 (bit for bit what the casts and the bfloat16 kernels give by hand), biases are
// added in float32, gradients reach float32 leaves as float32; float64 and guard-less calls are
// untouched. x (N, C, H, W), w (K, C, R, S), b (K); linear x (N, D_in), w (D_out, D_in).
#include <gtest/gtest.h>

#include <thread>

#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::allclose;

Tensor leaf(const Shape& shape, std::uint64_t seed) {
  Tensor t = convert_dtype(data_only(testing::random_input(shape, seed)), DType::Float32);
  t.set_requires_grad(true);
  return t;
}

Tensor bf16(const Tensor& t) { return convert_dtype(data_only(t), DType::BFloat16); }
Tensor f32(const Tensor& t) { return convert_dtype(t, DType::Float32); }

// Bitwise equality of two float32 tensors of one shape.
::testing::AssertionResult identical(const Tensor& a, const Tensor& b) {
  return allclose(a, b, 0.0, 0.0);
}

TEST(Autocast, GuardNestsAndRestores) {
  EXPECT_EQ(autocast_precision(), Precision::Float32);
  {
    const AutocastGuard outer(Precision::BFloat16);
    EXPECT_EQ(autocast_precision(), Precision::BFloat16);
    {
      const AutocastGuard inner(Precision::Float32);
      EXPECT_EQ(autocast_precision(), Precision::Float32);
    }
    EXPECT_EQ(autocast_precision(), Precision::BFloat16);
  }
  EXPECT_EQ(autocast_precision(), Precision::Float32);
  EXPECT_EQ(precision_name(Precision::BFloat16), "bf16");
  EXPECT_EQ(precision_name(Precision::Float32), "fp32");
}

TEST(Autocast, IsPerThread) {
  const AutocastGuard bf(Precision::BFloat16);
  Precision seen = Precision::BFloat16;
  std::thread other([&] { seen = autocast_precision(); });
  other.join();
  EXPECT_EQ(seen, Precision::Float32);
}

TEST(Autocast, Conv2dRunsInBfloat16AndAddsTheBiasInFloat32) {
  const Conv2dParams p{.padding = {1, 1}};
  Tensor x = leaf({2, 3, 5, 5}, 1), w = leaf({4, 3, 3, 3}, 2), b = leaf({4}, 3);
  Tensor y;
  {
    const AutocastGuard bf(Precision::BFloat16);
    y = conv2d(x, w, b, p);
  }
  ASSERT_EQ(y.dtype(), DType::Float32);
  const Tensor product = ops::conv2d(bf16(x), bf16(w), Tensor(), p);
  const Tensor expected = ops::binary(ops::BinaryOp::Add, f32(product), b.view({1, 4, 1, 1}));
  EXPECT_TRUE(identical(y, expected));

  const Tensor g = data_only(leaf(y.shape(), 4));
  y.backward(g);
  ASSERT_EQ(x.grad().dtype(), DType::Float32);
  ASSERT_EQ(w.grad().dtype(), DType::Float32);
  ASSERT_EQ(b.grad().dtype(), DType::Float32);
  EXPECT_TRUE(identical(x.grad(), f32(ops::conv2d_backward_input(bf16(g), bf16(w), x.shape(), p))));
  Tensor gw;
  ops::conv2d_backward_weights(bf16(g), bf16(x), w.shape(), p, &gw, nullptr);
  EXPECT_TRUE(identical(w.grad(), f32(gw)));
  EXPECT_TRUE(allclose(b.grad(), ops::sum(g, {0, 2, 3}, false)));  // summed in float32
  // The float32 result is near but not that: bfloat16 keeps 8 significant bits.
  const Tensor full = ops::conv2d(data_only(x), data_only(w), data_only(b), p);
  EXPECT_FALSE(identical(y, full));
  EXPECT_TRUE(allclose(y, full, 0.0, 0.1));
}

TEST(Autocast, LinearAndMatmul) {
  Tensor x = leaf({6, 10}, 5), w = leaf({3, 10}, 6), b = leaf({3}, 7);
  Tensor a = leaf({4, 6}, 8), m = leaf({6, 2}, 9);
  Tensor y, z;
  {
    const AutocastGuard bf(Precision::BFloat16);
    y = linear(x, w, b);
    z = matmul(a, m);
  }
  ASSERT_EQ(y.dtype(), DType::Float32);
  ASSERT_EQ(z.dtype(), DType::Float32);
  EXPECT_TRUE(identical(
      y, ops::binary(ops::BinaryOp::Add, f32(ops::linear(bf16(x), bf16(w), Tensor())), b)));
  EXPECT_TRUE(identical(z, f32(ops::matmul(bf16(a), bf16(m)))));

  const Tensor g = data_only(leaf(y.shape(), 10));
  y.backward(g);
  EXPECT_TRUE(identical(x.grad(), f32(ops::linear_backward_input(bf16(g), bf16(w)))));
  Tensor gw;
  ops::linear_backward_weights(bf16(g), bf16(x), &gw, nullptr);
  EXPECT_TRUE(identical(w.grad(), f32(gw)));
  EXPECT_TRUE(allclose(b.grad(), ops::sum(g, {0}, false)));
  const Tensor gz = data_only(leaf(z.shape(), 11));
  z.backward(gz);
  EXPECT_TRUE(identical(a.grad(), f32(ops::matmul(bf16(gz), bf16(m), false, true))));
  EXPECT_TRUE(identical(m.grad(), f32(ops::matmul(bf16(a), bf16(gz), true, false))));
}

TEST(Autocast, LeavesFloat64AndUnguardedCallsAlone) {
  const Tensor x = testing::random_input({3, 4}, 12), w = testing::random_input({2, 4}, 13);
  Tensor y64;
  {
    const AutocastGuard bf(Precision::BFloat16);
    y64 = linear(x, w);
  }
  EXPECT_EQ(y64.dtype(), DType::Float64);
  EXPECT_TRUE(allclose(y64, ops::linear(data_only(x), data_only(w), Tensor()), 0.0, 0.0));
  // Without the guard a float32 product stays float32 all through.
  const Tensor xf = leaf({3, 4}, 14), wf = leaf({2, 4}, 15);
  EXPECT_TRUE(identical(linear(xf, wf), ops::linear(data_only(xf), data_only(wf), Tensor())));
}

}  // namespace
}  // namespace tandem
