// CUDA softmax and log_softmax (softmax.cu) against the CPU kernels on the same inputs: along
// dim 0, 1 and the last (2 and -1) of a 3-D tensor, long rows, large logits, float64, a
// non-contiguous input, and both backwards (fed the CPU's output y, so only the backward differs).
// Shapes: x (A, L, B) with L the softmax dim.
#include <gtest/gtest.h>

#include "parity.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/ops.h"

namespace tandem {
namespace {

using testing::near_cpu;
using testing::on_gpu;
using testing::random_cpu;

// oneDNN's float32 log_softmax carries about 5e-6 absolute error (cpu/softmax.cpp).
constexpr double kAtol = 2e-5, kRtol = 1e-4;

void expect_forward_parity(const Tensor& x, std::int64_t dim, double atol, double rtol) {
  SCOPED_TRACE(::testing::Message() << "x " << show(x.shape()) << ", dim " << dim);
  EXPECT_TRUE(near_cpu(ops::cuda::softmax(on_gpu(x), dim), ops::softmax(x, dim), atol, rtol));
  EXPECT_TRUE(
      near_cpu(ops::cuda::log_softmax(on_gpu(x), dim), ops::log_softmax(x, dim), atol, rtol));
}

void expect_backward_parity(const Tensor& x, std::int64_t dim, std::uint64_t seed, double atol,
                            double rtol) {
  SCOPED_TRACE(::testing::Message() << "x " << show(x.shape()) << ", dim " << dim);
  const Tensor g = random_cpu(x.shape(), seed, -1, 1, x.dtype());
  const Tensor y = ops::softmax(x, dim);
  EXPECT_TRUE(near_cpu(ops::cuda::softmax_backward(on_gpu(g), on_gpu(y), dim),
                       ops::softmax_backward(g, y, dim), atol, rtol));
  const Tensor ly = ops::log_softmax(x, dim);
  EXPECT_TRUE(near_cpu(ops::cuda::log_softmax_backward(on_gpu(g), on_gpu(ly), dim),
                       ops::log_softmax_backward(g, ly, dim), atol, rtol));
}

TEST(CudaSoftmax, ForwardAlongEveryDim) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = random_cpu({4, 5, 6}, 1, -3, 3);
  for (std::int64_t dim : {0, 1, 2, -1}) expect_forward_parity(x, dim, kAtol, kRtol);
}

TEST(CudaSoftmax, BackwardAlongEveryDim) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = random_cpu({4, 5, 6}, 2, -3, 3);
  for (std::int64_t dim : {0, 1, 2, -1}) expect_backward_parity(x, dim, 3, kAtol, kRtol);
}

TEST(CudaSoftmax, LongRowsAndLargeLogits) {
  TANDEM_REQUIRE_GPU();
  // Rows longer than a warp (1000 classes, last dim) and a long middle dim.
  const Tensor x = random_cpu({3, 1000}, 4, -5, 5);
  expect_forward_parity(x, 1, kAtol, kRtol);
  expect_backward_parity(x, 1, 5, kAtol, kRtol);
  const Tensor x2 = random_cpu({2, 300, 7}, 6, -5, 5);
  expect_forward_parity(x2, 1, kAtol, kRtol);
  expect_backward_parity(x2, 1, 7, kAtol, kRtol);
  // Logits near 1000 overflow exp without the max subtraction.
  const Tensor big = random_cpu({5, 9}, 8, 995, 1005);
  expect_forward_parity(big, 1, kAtol, kRtol);
  expect_forward_parity(big, 0, kAtol, kRtol);
}

TEST(CudaSoftmax, Float64) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = random_cpu({4, 5, 6}, 9, -3, 3, DType::Float64);
  for (std::int64_t dim : {0, 1, 2}) {
    expect_forward_parity(x, dim, 1e-12, 1e-10);
    expect_backward_parity(x, dim, 10, 1e-12, 1e-10);
  }
}

TEST(CudaSoftmax, NonContiguousInput) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = random_cpu({6, 5}, 11, -3, 3);
  for (std::int64_t dim : {0, 1}) {
    SCOPED_TRACE(dim);
    EXPECT_TRUE(
        near_cpu(ops::cuda::softmax(on_gpu(x).t(), dim), ops::softmax(x.t(), dim), kAtol, kRtol));
  }
}

}  // namespace
}  // namespace tandem
