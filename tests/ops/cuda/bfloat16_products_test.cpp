// bfloat16 products on the GPU (cuBLAS and cuDNN on tensor cores, float32 accumulation) against
// the CPU's (the float32 kernels on the same bfloat16 operands, rounded): matmul in every
// transposition and batched, linear and conv2d forward and both backwards (a one-channel input as
// the seed CNN's first layer, stride, padding, groups), a bias refused, and autocast through a
// small network on the GPU against the same on the CPU. Both sides round one float32 sum to
// bfloat16; summed in other orders they may land one bfloat16 ulp apart (2^-7 relative).
// x (N, C, H, W), w (K, C/G, R, S); a (M, K), b (K, N); linear x (N, D_in), w (D_out, D_in).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "errors.h"
#include "parity.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::error_of;
using testing::expect_contains;
using testing::near_cpu;
using testing::on_gpu;

constexpr double kUlp = 1.0 / 128, kAtol = 1e-4;

Tensor random_bf16(const Shape& shape, std::uint64_t seed) {
  return testing::random_cpu(shape, seed, -1.0, 1.0, DType::BFloat16);
}

TEST(CudaBfloat16, MatmulEveryTranspositionAndBatched) {
  TANDEM_REQUIRE_GPU();
  const std::int64_t m = 64, k = 300, n = 33;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "trans_a " << ta << " trans_b " << tb);
      const Tensor a = random_bf16(ta ? Shape{k, m} : Shape{m, k}, 1);
      const Tensor b = random_bf16(tb ? Shape{n, k} : Shape{k, n}, 2);
      EXPECT_TRUE(near_cpu(ops::matmul(on_gpu(a), on_gpu(b), ta, tb), ops::matmul(a, b, ta, tb),
                           kAtol, kUlp));
    }
  }
  const Tensor a = random_bf16({3, 17, 40}, 3), b = random_bf16({3, 40, 9}, 4);
  EXPECT_TRUE(near_cpu(ops::matmul(on_gpu(a), on_gpu(b)), ops::matmul(a, b), kAtol, kUlp));
}

TEST(CudaBfloat16, LinearForwardAndBackwards) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = random_bf16({64, 784}, 5), w = random_bf16({10, 784}, 6);
  const Tensor g = random_bf16({64, 10}, 7);
  EXPECT_TRUE(near_cpu(ops::linear(on_gpu(x), on_gpu(w), Tensor()), ops::linear(x, w, Tensor()),
                       kAtol, kUlp));
  EXPECT_TRUE(near_cpu(ops::linear_backward_input(on_gpu(g), on_gpu(w)),
                       ops::linear_backward_input(g, w), kAtol, kUlp));
  Tensor gw_gpu, gw_cpu;
  ops::linear_backward_weights(on_gpu(g), on_gpu(x), &gw_gpu, nullptr);
  ops::linear_backward_weights(g, x, &gw_cpu, nullptr);
  EXPECT_TRUE(near_cpu(gw_gpu, gw_cpu, kAtol, kUlp));
}

struct ConvCase {
  std::string name;
  Shape x, w;
  Conv2dParams p;
};

TEST(CudaBfloat16, Conv2dForwardAndBackwards) {
  TANDEM_REQUIRE_GPU();
  const std::vector<ConvCase> cases = {
      {"one input channel, 3x3 pad 1 (the seed CNN's conv1)",
       {8, 1, 28, 28},
       {16, 1, 3, 3},
       {.padding = {1, 1}}},
      {"16 to 32 channels, 3x3 pad 1", {8, 16, 14, 14}, {32, 16, 3, 3}, {.padding = {1, 1}}},
      {"stride 2, odd channels",
       {4, 3, 11, 9},
       {5, 3, 3, 3},
       {.stride = {2, 2}, .padding = {1, 1}}},
      {"groups 2", {4, 8, 8, 8}, {8, 4, 3, 3}, {.padding = {1, 1}, .groups = 2}},
  };
  std::uint64_t seed = 10;
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor x = random_bf16(c.x, seed++), w = random_bf16(c.w, seed++);
    const Tensor y = ops::conv2d(x, w, Tensor(), c.p);
    EXPECT_TRUE(near_cpu(ops::conv2d(on_gpu(x), on_gpu(w), Tensor(), c.p), y, kAtol, kUlp));
    const Tensor g = random_bf16(y.shape(), seed++);
    EXPECT_TRUE(near_cpu(ops::conv2d_backward_input(on_gpu(g), on_gpu(w), c.x, c.p),
                         ops::conv2d_backward_input(g, w, c.x, c.p), kAtol, kUlp));
    Tensor gw_gpu, gw_cpu;
    ops::conv2d_backward_weights(on_gpu(g), on_gpu(x), c.w, c.p, &gw_gpu, nullptr);
    ops::conv2d_backward_weights(g, x, c.w, c.p, &gw_cpu, nullptr);
    EXPECT_TRUE(near_cpu(gw_gpu, gw_cpu, kAtol, kUlp));
  }
}

TEST(CudaBfloat16, ABiasIsRefused) {
  TANDEM_REQUIRE_GPU();
  const Tensor x = on_gpu(random_bf16({2, 3, 5, 5}, 30)), w = on_gpu(random_bf16({4, 3, 3, 3}, 31));
  const Tensor b = on_gpu(random_bf16({4}, 32));
  expect_contains(error_of([&] { (void)ops::conv2d(x, w, b, {}); }),
                  "conv2d: a bfloat16 product takes no bias");
  const Tensor v = on_gpu(random_bf16({2, 4}, 33)), m = on_gpu(random_bf16({4, 4}, 34));
  expect_contains(error_of([&] { (void)ops::linear(v, m, b); }),
                  "linear: a bfloat16 product takes no bias");
}

// conv -> relu -> max pool -> linear under autocast, forward and backward, on a device.
struct NetResult {
  Tensor y, gx, gw1, gb1, gw2, gb2;
};
NetResult run_net(Device device) {
  Tensor x = testing::random_cpu({8, 1, 12, 12}, 40).to(device);
  Tensor w1 = testing::random_cpu({6, 1, 3, 3}, 41).to(device);
  Tensor b1 = testing::random_cpu({6}, 42).to(device);
  Tensor w2 = testing::random_cpu({10, 6 * 6 * 6}, 43, -0.1, 0.1).to(device);
  Tensor b2 = testing::random_cpu({10}, 44).to(device);
  for (Tensor* t : {&x, &w1, &b1, &w2, &b2}) t->set_requires_grad(true);
  Tensor y;
  {
    const AutocastGuard bf16(Precision::BFloat16);
    const Tensor h = max_pool2d(relu(conv2d(x, w1, b1, {.padding = {1, 1}})), {});
    y = linear(h.flatten(1), w2, b2);
  }
  y.backward(testing::random_cpu(y.shape(), 45).to(device));
  const auto host = [](const Tensor& t) { return t.to(kCPU); };
  return {host(y),         host(x.grad()),  host(w1.grad()),
          host(b1.grad()), host(w2.grad()), host(b2.grad())};
}

TEST(CudaBfloat16, AutocastNetworkMatchesTheCpu) {
  TANDEM_REQUIRE_GPU();
  const NetResult gpu = run_net(testing::kGpu), cpu = run_net(kCPU);
  ASSERT_EQ(gpu.y.dtype(), DType::Float32);
  ASSERT_EQ(gpu.gw1.dtype(), DType::Float32);
  // A rounding one ulp apart early on moves later values by about that much, relative to the
  // largest of the sums they come from: 2^-6 of each tensor's largest element.
  const auto close = [](const Tensor& gpu_result, const Tensor& cpu_result) {
    const Tensor wide = cpu_result.to(DType::Float64).contiguous();
    double scale = 0.0;
    for (std::int64_t i = 0; i < wide.numel(); ++i) {
      scale = std::max(scale, std::abs(wide.data<double>()[i]));
    }
    return near_cpu(on_gpu(gpu_result), cpu_result, scale / 64.0, 0.0);
  };
  EXPECT_TRUE(close(gpu.y, cpu.y));
  EXPECT_TRUE(close(gpu.gx, cpu.gx));
  EXPECT_TRUE(close(gpu.gw1, cpu.gw1));
  EXPECT_TRUE(close(gpu.gb1, cpu.gb1));
  EXPECT_TRUE(close(gpu.gw2, cpu.gw2));
  EXPECT_TRUE(close(gpu.gb2, cpu.gb2));
}

}  // namespace
}  // namespace tandem
