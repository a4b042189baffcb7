// CUDA pooling against the CPU kernel: max pooling values and indices (equal, ties and a NaN
// included) and its backward through the indices, average pooling (padding, ceil_mode, overlapping
// 3x3 / stride 2 windows, count_include_pad false) forward and backward, adaptive average to
// non-divisor sizes forward and backward, float64 once, and operands on two devices as an error.
// x (N, C, H, W) -> y (N, C, P, Q).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "errors.h"
#include "parity.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/ops.h"

namespace tandem {
namespace {

using testing::near_cpu;
using testing::on_gpu;
using testing::random_cpu;

struct PoolCase {
  std::string name;
  Shape x;
  Pool2dParams p;
};

std::vector<PoolCase> cases() {
  return {
      {"2x2 stride 2", {2, 3, 8, 10}, {}},
      {"3x3 stride 2 pad 1 (overlapping)",
       {2, 3, 9, 11},
       {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
      {"3x3 stride 2 pad 1 ceil_mode",
       {2, 3, 10, 9},
       {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}},
      {"3x3 stride 3 ceil_mode (partial last window)",
       {3, 2, 8, 7},
       {.kernel = {3, 3}, .stride = {3, 3}, .ceil_mode = true}},
      {"2x3 kernel, stride (1, 2), padding (1, 1)",
       {2, 2, 6, 9},
       {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}}},
      {"3x3 stride 2 pad 1 ceil_mode, count_include_pad false",
       {2, 3, 10, 9},
       {.kernel = {3, 3},
        .stride = {2, 2},
        .padding = {1, 1},
        .ceil_mode = true,
        .count_include_pad = false}},
      {"3x2 stride 2 pad 1, count_include_pad false",
       {1, 4, 7, 8},
       {.kernel = {3, 2}, .stride = {2, 2}, .padding = {1, 1}, .count_include_pad = false}},
  };
}

constexpr double kAtol = 1e-5, kRtol = 1e-5;

TEST(CudaPool2d, MaxPoolValuesAndIndicesMatchCpu) {
  TANDEM_REQUIRE_GPU();
  std::uint64_t seed = 1;
  for (const PoolCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const Tensor x = random_cpu(c.x, seed++);
    Tensor idx_cpu, idx_gpu;
    const Tensor expected = ops::max_pool2d(x, c.p, &idx_cpu);
    const Tensor got = ops::cuda::max_pool2d(on_gpu(x), c.p, &idx_gpu);
    EXPECT_TRUE(near_cpu(got, expected, 0, 0));
    EXPECT_TRUE(near_cpu(idx_gpu, idx_cpu, 0, 0));
    // Without indices asked for, the same values.
    EXPECT_TRUE(near_cpu(ops::cuda::max_pool2d(on_gpu(x), c.p, nullptr), expected, 0, 0));
  }
}

// Values in {-1, 0, 1} make ties common (the first maximum in row-major order wins); one NaN
// propagates into the windows holding it.
TEST(CudaPool2d, MaxPoolTiesAndNanMatchCpu) {
  TANDEM_REQUIRE_GPU();
  for (const PoolCase& c : {cases()[0], cases()[1], cases()[2]}) {
    SCOPED_TRACE(c.name);
    Tensor x = random_cpu(c.x, 50, -1.5, 1.5);
    float* p = x.data<float>();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      p[i] = p[i] < -0.5f ? -1.0f : (p[i] < 0.5f ? 0.0f : 1.0f);
    }
    p[x.numel() / 3] = std::numeric_limits<float>::quiet_NaN();
    Tensor idx_cpu, idx_gpu;
    const Tensor expected = ops::max_pool2d(x, c.p, &idx_cpu);
    const Tensor got = ops::cuda::max_pool2d(on_gpu(x), c.p, &idx_gpu);
    EXPECT_TRUE(near_cpu(got, expected, 0, 0));
    EXPECT_TRUE(near_cpu(idx_gpu, idx_cpu, 0, 0));
  }
}

TEST(CudaPool2d, MaxPoolBackwardMatchesCpu) {
  TANDEM_REQUIRE_GPU();
  std::uint64_t seed = 100;
  for (const PoolCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const Tensor x = random_cpu(c.x, seed++);
    Tensor idx;
    const Tensor y = ops::max_pool2d(x, c.p, &idx);
    const Tensor g = random_cpu(y.shape(), seed++);
    const Tensor expected = ops::max_pool2d_backward(g, idx, c.x);
    const Tensor got = ops::cuda::max_pool2d_backward(on_gpu(g), on_gpu(idx), c.x);
    EXPECT_TRUE(near_cpu(got, expected, kAtol, kRtol));
  }
}

TEST(CudaPool2d, AvgPoolMatchesCpu) {
  TANDEM_REQUIRE_GPU();
  std::uint64_t seed = 200;
  for (const PoolCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const Tensor x = random_cpu(c.x, seed++);
    EXPECT_TRUE(
        near_cpu(ops::cuda::avg_pool2d(on_gpu(x), c.p), ops::avg_pool2d(x, c.p), kAtol, kRtol));
  }
}

TEST(CudaPool2d, AvgPoolBackwardMatchesCpu) {
  TANDEM_REQUIRE_GPU();
  std::uint64_t seed = 300;
  for (const PoolCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const Shape y_shape = ops::pool2d_output_shape(c.x, c.p, "avg_pool2d");
    const Tensor g = random_cpu(y_shape, seed++);
    EXPECT_TRUE(near_cpu(ops::cuda::avg_pool2d_backward(on_gpu(g), c.x, c.p),
                         ops::avg_pool2d_backward(g, c.x, c.p), kAtol, kRtol));
  }
}

struct AdaptiveCase {
  Shape x;
  std::array<std::int64_t, 2> out;
};

std::vector<AdaptiveCase> adaptive_cases() {
  return {{{2, 3, 10, 7}, {3, 4}},  // neither divides
          {{2, 3, 5, 7}, {2, 3}},
          {{1, 2, 4, 5}, {7, 6}},   // larger than the input: overlapping cells
          {{3, 2, 6, 6}, {1, 1}}};  // global average
}

TEST(CudaPool2d, AdaptiveAvgPoolMatchesCpu) {
  TANDEM_REQUIRE_GPU();
  std::uint64_t seed = 400;
  for (const AdaptiveCase& c : adaptive_cases()) {
    SCOPED_TRACE(show(c.x));
    const Tensor x = random_cpu(c.x, seed++);
    EXPECT_TRUE(near_cpu(ops::cuda::adaptive_avg_pool2d(on_gpu(x), c.out),
                         ops::adaptive_avg_pool2d(x, c.out), kAtol, kRtol));
  }
}

TEST(CudaPool2d, AdaptiveAvgPoolBackwardMatchesCpu) {
  TANDEM_REQUIRE_GPU();
  std::uint64_t seed = 500;
  for (const AdaptiveCase& c : adaptive_cases()) {
    SCOPED_TRACE(show(c.x));
    const Tensor g = random_cpu({c.x[0], c.x[1], c.out[0], c.out[1]}, seed++);
    EXPECT_TRUE(near_cpu(ops::cuda::adaptive_avg_pool2d_backward(on_gpu(g), c.x),
                         ops::adaptive_avg_pool2d_backward(g, c.x), kAtol, kRtol));
  }
}

TEST(CudaPool2d, Float64MatchesCpu) {
  TANDEM_REQUIRE_GPU();
  const PoolCase c = cases()[2];
  const Tensor x = random_cpu(c.x, 600, -1, 1, DType::Float64);
  Tensor idx_cpu, idx_gpu;
  const Tensor y = ops::max_pool2d(x, c.p, &idx_cpu);
  EXPECT_TRUE(near_cpu(ops::cuda::max_pool2d(on_gpu(x), c.p, &idx_gpu), y, 0, 0));
  EXPECT_TRUE(near_cpu(idx_gpu, idx_cpu, 0, 0));
  const Tensor g = random_cpu(y.shape(), 601, -1, 1, DType::Float64);
  EXPECT_TRUE(near_cpu(ops::cuda::max_pool2d_backward(on_gpu(g), on_gpu(idx_cpu), c.x),
                       ops::max_pool2d_backward(g, idx_cpu, c.x), 1e-12, 1e-12));
  EXPECT_TRUE(
      near_cpu(ops::cuda::avg_pool2d(on_gpu(x), c.p), ops::avg_pool2d(x, c.p), 1e-12, 1e-12));
  EXPECT_TRUE(near_cpu(ops::cuda::avg_pool2d_backward(on_gpu(g), c.x, c.p),
                       ops::avg_pool2d_backward(g, c.x, c.p), 1e-12, 1e-12));
  EXPECT_TRUE(near_cpu(ops::cuda::adaptive_avg_pool2d(on_gpu(x), {3, 4}),
                       ops::adaptive_avg_pool2d(x, {3, 4}), 1e-12, 1e-12));
}

TEST(CudaPool2d, OperandOnTheCpuIsAnError) {
  TANDEM_REQUIRE_GPU();
  const PoolCase c = cases()[1];
  const Tensor x = random_cpu(c.x, 700);
  Tensor idx;
  const Tensor y = ops::max_pool2d(x, c.p, &idx);
  // grad_out on the GPU, indices left on the CPU.
  testing::expect_contains(
      testing::error_of([&] { (void)ops::cuda::max_pool2d_backward(on_gpu(y), idx, c.x); }),
      "different devices");
  testing::expect_contains(testing::error_of([&] { (void)ops::cuda::avg_pool2d(x, c.p); }),
                           "avg_pool2d: no operand is on a GPU");
}

}  // namespace
}  // namespace tandem
