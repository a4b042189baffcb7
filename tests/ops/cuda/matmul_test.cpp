// CUDA matmul and linear (cuBLAS, matmul.cpp) against the CPU kernels on the same inputs: every
// transpose combination, batched, odd sizes, float32 in full precision (a TF32 product would miss
// the tolerance at K = 300), float64, and the linear layer's forward and both backwards.
// Shapes: a (M, K), b (K, N) (transposed as the flags say); x (N, D_in), w (D_out, D_in).
#include <gtest/gtest.h>

#include "errors.h"
#include "parity.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/ops.h"

namespace tandem {
namespace {

using testing::near_cpu;
using testing::on_gpu;
using testing::random_cpu;

// a as stored: (M, K), or (K, M) when transposed; b: (K, N), or (N, K).
Shape stored(std::int64_t rows, std::int64_t cols, bool trans) {
  return trans ? Shape{cols, rows} : Shape{rows, cols};
}

Shape batched(std::int64_t batch, Shape s) {
  s.insert(s.begin(), batch);
  return s;
}

void expect_matmul_parity(const Tensor& a, const Tensor& b, bool ta, bool tb, double atol,
                          double rtol) {
  SCOPED_TRACE(::testing::Message() << "trans_a " << ta << ", trans_b " << tb << ", a "
                                    << show(a.shape()) << ", b " << show(b.shape()));
  const Tensor cpu = ops::matmul(a, b, ta, tb);
  const Tensor gpu = ops::cuda::matmul(on_gpu(a), on_gpu(b), ta, tb);
  EXPECT_TRUE(near_cpu(gpu, cpu, atol, rtol));
}

TEST(CudaMatmul, EveryTransposeOddSizes) {
  TANDEM_REQUIRE_GPU();
  const std::int64_t m = 7, k = 13, n = 5;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Tensor a = random_cpu(stored(m, k, ta), 1);
      const Tensor b = random_cpu(stored(k, n, tb), 2);
      expect_matmul_parity(a, b, ta, tb, 1e-5, 1e-4);
    }
  }
}

TEST(CudaMatmul, FullFloat32PrecisionOnALongSum) {
  TANDEM_REQUIRE_GPU();
  // K = 300: TF32 (10-bit mantissa) would be off by about 1e-3 relative; float32 by about 1e-6.
  const std::int64_t m = 64, k = 300, n = 33;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Tensor a = random_cpu(stored(m, k, ta), 3);
      const Tensor b = random_cpu(stored(k, n, tb), 4);
      expect_matmul_parity(a, b, ta, tb, 5e-5, 1e-4);
    }
  }
}

TEST(CudaMatmul, BatchedEveryTranspose) {
  TANDEM_REQUIRE_GPU();
  const std::int64_t batch = 3, m = 7, k = 13, n = 5;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Tensor a = random_cpu(batched(batch, stored(m, k, ta)), 5);
      const Tensor b = random_cpu(batched(batch, stored(k, n, tb)), 6);
      expect_matmul_parity(a, b, ta, tb, 1e-5, 1e-4);
    }
  }
}

TEST(CudaMatmul, Float64) {
  TANDEM_REQUIRE_GPU();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Tensor a = random_cpu(stored(9, 17, ta), 7, -1, 1, DType::Float64);
      const Tensor b = random_cpu(stored(17, 6, tb), 8, -1, 1, DType::Float64);
      expect_matmul_parity(a, b, ta, tb, 1e-12, 1e-12);
    }
  }
  const Tensor a = random_cpu({2, 4, 3}, 9, -1, 1, DType::Float64);
  const Tensor b = random_cpu({2, 3, 5}, 10, -1, 1, DType::Float64);
  expect_matmul_parity(a, b, false, false, 1e-12, 1e-12);
}

TEST(CudaMatmul, NonContiguousOperandsAndEmptyInnerDim) {
  TANDEM_REQUIRE_GPU();
  // A transposed view on the GPU (copied contiguous there) against the same view on the CPU.
  const Tensor a = random_cpu({13, 7}, 11);
  const Tensor b = random_cpu({13, 5}, 12);
  const Tensor cpu = ops::matmul(a.t(), b, false, false);
  const Tensor gpu = ops::cuda::matmul(on_gpu(a).t(), on_gpu(b), false, false);
  EXPECT_TRUE(near_cpu(gpu, cpu));
  // K = 0: a (4, 0) x (0, 3) product is zeros.
  const Tensor e1 = zeros({4, 0}), e2 = zeros({0, 3});
  EXPECT_TRUE(near_cpu(ops::cuda::matmul(on_gpu(e1), on_gpu(e2), false, false),
                       ops::matmul(e1, e2, false, false), 0, 0));
}

TEST(CudaMatmul, MismatchedShapesAreAnError) {
  TANDEM_REQUIRE_GPU();
  const Tensor a = on_gpu(random_cpu({7, 13}, 13)), b = on_gpu(random_cpu({12, 5}, 14));
  testing::expect_contains(testing::error_of([&] { ops::cuda::matmul(a, b, false, false); }),
                           "cannot be multiplied");
}

TEST(CudaLinear, ForwardWithAndWithoutBias) {
  TANDEM_REQUIRE_GPU();
  const std::int64_t n = 7, d_in = 13, d_out = 5;
  const Tensor x = random_cpu({n, d_in}, 20), w = random_cpu({d_out, d_in}, 21);
  const Tensor b = random_cpu({d_out}, 22);
  EXPECT_TRUE(near_cpu(ops::cuda::linear(on_gpu(x), on_gpu(w), on_gpu(b)), ops::linear(x, w, b)));
  EXPECT_TRUE(
      near_cpu(ops::cuda::linear(on_gpu(x), on_gpu(w), Tensor()), ops::linear(x, w, Tensor())));
  // A bigger layer (64 x 784 -> 50, the MLP's first).
  const Tensor x2 = random_cpu({64, 784}, 23), w2 = random_cpu({50, 784}, 24, -0.05, 0.05);
  const Tensor b2 = random_cpu({50}, 25);
  EXPECT_TRUE(near_cpu(ops::cuda::linear(on_gpu(x2), on_gpu(w2), on_gpu(b2)),
                       ops::linear(x2, w2, b2), 1e-5, 1e-4));
  // float64.
  const Tensor x3 = x.to(DType::Float64), w3 = w.to(DType::Float64), b3 = b.to(DType::Float64);
  EXPECT_TRUE(near_cpu(ops::cuda::linear(on_gpu(x3), on_gpu(w3), on_gpu(b3)),
                       ops::linear(x3, w3, b3), 1e-12, 1e-12));
}

TEST(CudaLinear, BackwardInput) {
  TANDEM_REQUIRE_GPU();
  const std::int64_t n = 7, d_in = 13, d_out = 5;
  const Tensor g = random_cpu({n, d_out}, 30), w = random_cpu({d_out, d_in}, 31);
  EXPECT_TRUE(near_cpu(ops::cuda::linear_backward_input(on_gpu(g), on_gpu(w)),
                       ops::linear_backward_input(g, w)));
}

TEST(CudaLinear, BackwardWeightsAndBiasEitherMayBeNull) {
  TANDEM_REQUIRE_GPU();
  const std::int64_t n = 7, d_in = 13, d_out = 5;
  const Tensor g = random_cpu({n, d_out}, 40), x = random_cpu({n, d_in}, 41);
  Tensor cpu_w, cpu_b;
  ops::linear_backward_weights(g, x, &cpu_w, &cpu_b);
  const Tensor gg = on_gpu(g), gx = on_gpu(x);
  {
    Tensor gw, gb;
    ops::cuda::linear_backward_weights(gg, gx, &gw, &gb);
    EXPECT_TRUE(near_cpu(gw, cpu_w));
    EXPECT_TRUE(near_cpu(gb, cpu_b));
  }
  {
    Tensor gw;
    ops::cuda::linear_backward_weights(gg, gx, &gw, nullptr);
    EXPECT_TRUE(near_cpu(gw, cpu_w));
  }
  {
    Tensor gb;
    ops::cuda::linear_backward_weights(gg, gx, nullptr, &gb);
    EXPECT_TRUE(near_cpu(gb, cpu_b));
  }
  ops::cuda::linear_backward_weights(gg, gx, nullptr, nullptr);  // nothing asked, nothing done
  // A long batch for the bias sum (1000 rows).
  const Tensor g2 = random_cpu({1000, 10}, 42), x2 = random_cpu({1000, 30}, 43);
  Tensor cpu_w2, cpu_b2, gpu_w2, gpu_b2;
  ops::linear_backward_weights(g2, x2, &cpu_w2, &cpu_b2);
  ops::cuda::linear_backward_weights(on_gpu(g2), on_gpu(x2), &gpu_w2, &gpu_b2);
  EXPECT_TRUE(near_cpu(gpu_w2, cpu_w2, 1e-4, 1e-4));
  EXPECT_TRUE(near_cpu(gpu_b2, cpu_b2, 1e-4, 1e-4));
}

}  // namespace
}  // namespace tandem
