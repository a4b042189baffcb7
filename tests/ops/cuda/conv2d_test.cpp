// CUDA conv2d (cuDNN) against the CPU kernel: forward, backward input and backward weights (with
// and without the bias gradient) over stride 2, padding, dilation 2, groups 2, no bias, batch 3
// and non-square kernels; float64 once; a second call (cached algorithm) equal to the first; the
// fastest algorithms (ops::deterministic_algorithms() off: atomic-add gradients allowed) as close
// to the CPU, ResNet-like shapes included; and an operand left on the CPU is an error. x (N, C, H, W), w (K, C/G, R, S), y (N, K, P, Q).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "errors.h"
#include "parity.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/determinism.h"
#include "tandem/ops/ops.h"

namespace tandem {
namespace {

using testing::near_cpu;
using testing::on_gpu;
using testing::random_cpu;

struct ConvCase {
  std::string name;
  Shape x, w;
  Conv2dParams p;
  bool bias;
};

std::vector<ConvCase> cases() {
  return {
      {"3x3 pad 1 with bias", {3, 4, 9, 11}, {6, 4, 3, 3}, {.padding = {1, 1}}, true},
      {"stride 2, non-square 3x5 kernel, padding (1, 2)",
       {3, 4, 10, 13},
       {5, 4, 3, 5},
       {.stride = {2, 2}, .padding = {1, 2}},
       true},
      {"dilation 2, no bias",
       {3, 4, 12, 10},
       {5, 4, 3, 3},
       {.padding = {2, 2}, .dilation = {2, 2}},
       false},
      {"groups 2, stride (2, 1)",
       {3, 4, 8, 9},
       {6, 2, 3, 2},
       {.stride = {2, 1}, .padding = {1, 0}, .groups = 2},
       true},
      {"depthwise, dilation (2, 1), 2x3 kernel",
       {2, 4, 7, 8},
       {4, 1, 2, 3},
       {.padding = {0, 1}, .dilation = {2, 1}, .groups = 4},
       false},
  };
}

constexpr double kAtol = 1e-4, kRtol = 1e-4;

TEST(CudaConv2d, ForwardMatchesCpu) {
  TANDEM_REQUIRE_GPU();
  std::uint64_t seed = 1;
  for (const ConvCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const Tensor x = random_cpu(c.x, seed++), w = random_cpu(c.w, seed++);
    const Tensor b = c.bias ? random_cpu({c.w[0]}, seed++) : Tensor();
    const Tensor expected = ops::conv2d(x, w, b, c.p);
    const Tensor got = ops::cuda::conv2d(on_gpu(x), on_gpu(w), c.bias ? on_gpu(b) : Tensor(), c.p);
    EXPECT_TRUE(near_cpu(got, expected, kAtol, kRtol));
  }
}

TEST(CudaConv2d, BackwardInputMatchesCpu) {
  TANDEM_REQUIRE_GPU();
  std::uint64_t seed = 100;
  for (const ConvCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const Shape y_shape = ops::conv2d_output_shape(c.x, c.w, c.p);
    const Tensor g = random_cpu(y_shape, seed++), w = random_cpu(c.w, seed++);
    const Tensor expected = ops::conv2d_backward_input(g, w, c.x, c.p);
    const Tensor got = ops::cuda::conv2d_backward_input(on_gpu(g), on_gpu(w), c.x, c.p);
    EXPECT_TRUE(near_cpu(got, expected, kAtol, kRtol));
  }
}

TEST(CudaConv2d, BackwardWeightsMatchCpu) {
  TANDEM_REQUIRE_GPU();
  std::uint64_t seed = 200;
  for (const ConvCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const Shape y_shape = ops::conv2d_output_shape(c.x, c.w, c.p);
    const Tensor g = random_cpu(y_shape, seed++), x = random_cpu(c.x, seed++);
    Tensor gw_cpu, gb_cpu, gw_gpu, gb_gpu;
    ops::conv2d_backward_weights(g, x, c.w, c.p, &gw_cpu, c.bias ? &gb_cpu : nullptr);
    ops::cuda::conv2d_backward_weights(on_gpu(g), on_gpu(x), c.w, c.p, &gw_gpu,
                                       c.bias ? &gb_gpu : nullptr);
    EXPECT_TRUE(near_cpu(gw_gpu, gw_cpu, kAtol, kRtol));
    if (c.bias) {
      EXPECT_TRUE(near_cpu(gb_gpu, gb_cpu, kAtol, kRtol));
    } else {
      EXPECT_FALSE(gb_gpu.defined());
    }
  }
}

TEST(CudaConv2d, BiasGradientAloneMatchesCpu) {
  TANDEM_REQUIRE_GPU();
  const ConvCase c = cases()[1];
  const Shape y_shape = ops::conv2d_output_shape(c.x, c.w, c.p);
  const Tensor g = random_cpu(y_shape, 300), x = random_cpu(c.x, 301);
  Tensor gb_cpu, gb_gpu;
  ops::conv2d_backward_weights(g, x, c.w, c.p, nullptr, &gb_cpu);
  ops::cuda::conv2d_backward_weights(on_gpu(g), on_gpu(x), c.w, c.p, nullptr, &gb_gpu);
  EXPECT_TRUE(near_cpu(gb_gpu, gb_cpu, kAtol, kRtol));
}

TEST(CudaConv2d, Float64MatchesCpu) {
  TANDEM_REQUIRE_GPU();
  const ConvCase c = cases()[3];  // groups 2 with bias
  const Shape y_shape = ops::conv2d_output_shape(c.x, c.w, c.p);
  const Tensor x = random_cpu(c.x, 400, -1, 1, DType::Float64);
  const Tensor w = random_cpu(c.w, 401, -1, 1, DType::Float64);
  const Tensor b = random_cpu({c.w[0]}, 402, -1, 1, DType::Float64);
  const Tensor g = random_cpu(y_shape, 403, -1, 1, DType::Float64);
  EXPECT_TRUE(near_cpu(ops::cuda::conv2d(on_gpu(x), on_gpu(w), on_gpu(b), c.p),
                       ops::conv2d(x, w, b, c.p), 1e-10, 1e-10));
  EXPECT_TRUE(near_cpu(ops::cuda::conv2d_backward_input(on_gpu(g), on_gpu(w), c.x, c.p),
                       ops::conv2d_backward_input(g, w, c.x, c.p), 1e-10, 1e-10));
  Tensor gw_cpu, gb_cpu, gw_gpu, gb_gpu;
  ops::conv2d_backward_weights(g, x, c.w, c.p, &gw_cpu, &gb_cpu);
  ops::cuda::conv2d_backward_weights(on_gpu(g), on_gpu(x), c.w, c.p, &gw_gpu, &gb_gpu);
  EXPECT_TRUE(near_cpu(gw_gpu, gw_cpu, 1e-10, 1e-10));
  EXPECT_TRUE(near_cpu(gb_gpu, gb_cpu, 1e-10, 1e-10));
}

TEST(CudaConv2d, FastestAlgorithmsMatchCpu) {
  TANDEM_REQUIRE_GPU();
  const ops::DeterministicAlgorithms fastest(false);
  std::vector<ConvCase> all = cases();
  // ResNet-8's 1x1 stride-2 shortcut and a 3x3 layer, whose filter gradients sum over a batch.
  all.push_back({"1x1 stride 2 shortcut", {32, 16, 16, 16}, {32, 16, 1, 1}, {.stride = {2, 2}},
                 false});
  all.push_back({"3x3 pad 1, batch 32", {32, 16, 16, 16}, {16, 16, 3, 3}, {.padding = {1, 1}},
                 false});
  std::uint64_t seed = 900;
  for (const ConvCase& c : all) {
    SCOPED_TRACE(c.name);
    const Shape y_shape = ops::conv2d_output_shape(c.x, c.w, c.p);
    const Tensor x = random_cpu(c.x, seed++), w = random_cpu(c.w, seed++);
    const Tensor g = random_cpu(y_shape, seed++);
    EXPECT_TRUE(near_cpu(ops::cuda::conv2d(on_gpu(x), on_gpu(w), Tensor(), c.p),
                         ops::conv2d(x, w, Tensor(), c.p), kAtol, kRtol));
    EXPECT_TRUE(near_cpu(ops::cuda::conv2d_backward_input(on_gpu(g), on_gpu(w), c.x, c.p),
                         ops::conv2d_backward_input(g, w, c.x, c.p), kAtol, kRtol));
    Tensor gw_cpu, gw_gpu;
    ops::conv2d_backward_weights(g, x, c.w, c.p, &gw_cpu, nullptr);
    ops::cuda::conv2d_backward_weights(on_gpu(g), on_gpu(x), c.w, c.p, &gw_gpu, nullptr);
    EXPECT_TRUE(near_cpu(gw_gpu, gw_cpu, kAtol, kRtol));
  }
}

TEST(CudaConv2d, SecondCallWithCachedAlgorithmMatchesCpu) {
  TANDEM_REQUIRE_GPU();
  const ConvCase c = cases()[0];
  for (int call = 0; call < 2; ++call) {
    SCOPED_TRACE(call);
    const Tensor x = random_cpu(c.x, 500 + call), w = random_cpu(c.w, 510 + call);
    const Tensor b = random_cpu({c.w[0]}, 520 + call);
    EXPECT_TRUE(near_cpu(ops::cuda::conv2d(on_gpu(x), on_gpu(w), on_gpu(b), c.p),
                         ops::conv2d(x, w, b, c.p), kAtol, kRtol));
  }
}

TEST(CudaConv2d, OperandOnTheCpuIsAnError) {
  TANDEM_REQUIRE_GPU();
  const ConvCase c = cases()[0];
  const Tensor x = random_cpu(c.x, 600), w = random_cpu(c.w, 601);
  const Shape y_shape = ops::conv2d_output_shape(c.x, c.w, c.p);
  const Tensor g = random_cpu(y_shape, 602);
  testing::expect_contains(
      testing::error_of([&] { (void)ops::cuda::conv2d(on_gpu(x), w, Tensor(), c.p); }),
      "different devices");
  testing::expect_contains(
      testing::error_of([&] { (void)ops::cuda::conv2d_backward_input(g, on_gpu(w), c.x, c.p); }),
      "operands on different devices (cuda:0 and cpu)");
  // Through ops.h, which hands any call with a GPU operand to the CUDA kernels.
  testing::expect_contains(
      testing::error_of([&] { (void)ops::conv2d(x, on_gpu(w), Tensor(), c.p); }),
      "operands on different devices (cuda:0 and cpu)");
  Tensor gw;
  testing::expect_contains(
      testing::error_of(
          [&] { ops::cuda::conv2d_backward_weights(on_gpu(g), x, c.w, c.p, &gw, nullptr); }),
      "different devices");
}

}  // namespace
}  // namespace tandem
