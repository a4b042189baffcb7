// CUDA cross-entropy (cross_entropy.cu) against the CPU kernel on the same inputs: mean and sum,
// label smoothing 0 and 0.1, the log-probabilities, the backward, float64, and the error for a
// class index out of range (the CPU's message, forward and backward, at the next wait for the GPU).
// Shapes: logits (N, L), target (N) int64.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "errors.h"
#include "parity.h"
#include "tandem/device/cuda/deferred_checks.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/ops.h"

namespace tandem {
namespace {

using testing::near_cpu;
using testing::on_gpu;
using testing::random_cpu;

// n class indices in [0, classes), spread over every class.
Tensor targets(std::int64_t n, std::int64_t classes) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = (i * 7 + 3) % classes;
  return from_vector(t, {n});
}

void expect_parity(const Tensor& logits, const Tensor& target, double atol, double rtol) {
  for (bool mean : {true, false}) {
    for (double s : {0.0, 0.1}) {
      SCOPED_TRACE(::testing::Message() << "logits " << show(logits.shape()) << ", mean " << mean
                                        << ", label_smoothing " << s);
      Tensor cpu_lp, gpu_lp;
      const Tensor cpu = ops::cross_entropy(logits, target, s, mean, &cpu_lp);
      const Tensor gpu = ops::cuda::cross_entropy(on_gpu(logits), on_gpu(target), s, mean, &gpu_lp);
      EXPECT_TRUE(near_cpu(gpu, cpu, atol, rtol));  // 0-d, the logits' dtype
      EXPECT_TRUE(near_cpu(gpu_lp, cpu_lp, atol, rtol));
      // The backward from the CPU's log-probabilities, so that only the backward differs.
      const Tensor grad_loss = scalar_tensor(0.7, {.dtype = logits.dtype()});
      EXPECT_TRUE(near_cpu(ops::cuda::cross_entropy_backward(on_gpu(grad_loss), on_gpu(cpu_lp),
                                                             on_gpu(target), s, mean),
                           ops::cross_entropy_backward(grad_loss, cpu_lp, target, s, mean), atol,
                           rtol));
    }
  }
}

TEST(CudaCrossEntropy, MeanAndSumWithAndWithoutSmoothing) {
  TANDEM_REQUIRE_GPU();
  expect_parity(random_cpu({16, 10}, 1, -3, 3), targets(16, 10), 2e-5, 1e-5);
}

TEST(CudaCrossEntropy, ManyRowsAndClasses) {
  TANDEM_REQUIRE_GPU();
  // More rows than the loss reduction's block (256) and rows longer than a warp.
  expect_parity(random_cpu({700, 37}, 2, -4, 4), targets(700, 37), 1e-4, 1e-5);
}

TEST(CudaCrossEntropy, Float64) {
  TANDEM_REQUIRE_GPU();
  expect_parity(random_cpu({9, 6}, 3, -3, 3, DType::Float64), targets(9, 6), 1e-12, 1e-10);
}

TEST(CudaCrossEntropy, TargetOutOfRangeIsTheCpuError) {
  TANDEM_REQUIRE_GPU();
  const std::int64_t n = 8, classes = 10;
  const Tensor logits = random_cpu({n, classes}, 4);
  std::vector<std::int64_t> bad(static_cast<std::size_t>(n), 1);
  bad[5] = classes;  // one past the last class
  bad[7] = -1;       // a later bad row: the first one is reported
  const Tensor target = from_vector(bad, {n});
  const std::string expected = "cross_entropy: target 10 at index 5 is out of range for 10 classes";
  testing::expect_contains(
      testing::error_of([&] { ops::cross_entropy(logits, target, 0.0, true, nullptr); }), expected);
  // On the GPU the indices are checked without waiting: the call returns, and the error comes at
  // this thread's next wait for the GPU (here, reading the loss).
  const Tensor g_logits = on_gpu(logits), g_target = on_gpu(target);
  Tensor g_loss;
  EXPECT_NO_THROW(g_loss = ops::cuda::cross_entropy(g_logits, g_target, 0.0, true, nullptr));
  EXPECT_EQ(cuda::pending_checks(), 1u);
  testing::expect_contains(testing::error_of([&] { (void)g_loss.to(kCPU); }), expected);
  EXPECT_EQ(cuda::pending_checks(), 0u);  // reported once
  EXPECT_NO_THROW((void)g_loss.to(kCPU));
  // The backward checks the target too.
  const Tensor lp = on_gpu(ops::log_softmax(logits, 1));
  const Tensor grad_loss = on_gpu(scalar_tensor(1.0));
  const Tensor g_grad = ops::cuda::cross_entropy_backward(grad_loss, lp, g_target, 0.0, true);
  testing::expect_contains(testing::error_of([&] { (void)g_grad.to(kCPU); }),
                           "cross_entropy_backward: target 10 at index 5 is out of range");
  // A good target afterwards still works (nothing left behind on the stream).
  const Tensor good = targets(n, classes);
  EXPECT_TRUE(near_cpu(ops::cuda::cross_entropy(g_logits, on_gpu(good), 0.0, true, nullptr),
                       ops::cross_entropy(logits, good, 0.0, true, nullptr), 2e-5, 1e-5));
}

}  // namespace
}  // namespace tandem
