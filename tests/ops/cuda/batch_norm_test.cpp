// CUDA batch normalisation against the CPU kernel: training (output, saved mean and inverse std,
// running statistics updated alike), evaluation and backward, for (N, C, H, W) and (N, C) inputs,
// with and without weight / bias / running statistics, float64 once, and operands on two devices
// as an error. x (N, C, H, W) or (N, C); per-channel tensors (C).
#include <gtest/gtest.h>

#include <cstdint>
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

constexpr double kAtol = 1e-4, kRtol = 1e-4;

Tensor gpu_or_none(const Tensor& t) { return t.defined() ? on_gpu(t) : Tensor(); }

struct BnCase {
  std::string name;
  Shape x;
  bool weight, bias, running;
};

std::vector<BnCase> cases() {
  return {{"4-D, weight and bias", {4, 3, 5, 6}, true, true, true},
          {"4-D, no weight or bias", {3, 5, 4, 7}, false, false, true},
          {"4-D, weight only, no running stats", {2, 4, 3, 3}, true, false, false},
          {"2-D, weight and bias", {16, 5}, true, true, true},
          {"2-D, bias only", {7, 6}, false, true, true}};
}

// Per-channel inputs of case c on the CPU (undefined where the case has none).
struct Params {
  Tensor weight, bias, running_mean, running_var;
};

Params params_for(const BnCase& c, std::uint64_t seed, DType dtype = DType::Float32) {
  const std::int64_t ch = c.x[1];
  Params p;
  if (c.weight) p.weight = random_cpu({ch}, seed, 0.5, 1.5, dtype);
  if (c.bias) p.bias = random_cpu({ch}, seed + 1, -1, 1, dtype);
  if (c.running) {
    p.running_mean = random_cpu({ch}, seed + 2, -0.5, 0.5, dtype);
    p.running_var = random_cpu({ch}, seed + 3, 0.5, 2.0, dtype);
  }
  return p;
}

TEST(CudaBatchNorm, TrainingMatchesCpuAndUpdatesRunningStatsAlike) {
  TANDEM_REQUIRE_GPU();
  std::uint64_t seed = 1;
  for (const BnCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const Tensor x = random_cpu(c.x, seed, -1, 3);  // mean away from 0
    const Params cpu = params_for(c, seed + 10);
    // GPU copies of the running statistics before the CPU kernel updates its own in place.
    const Params gpu{gpu_or_none(cpu.weight), gpu_or_none(cpu.bias), gpu_or_none(cpu.running_mean),
                     gpu_or_none(cpu.running_var)};
    seed += 100;
    Tensor mean_cpu, invstd_cpu, mean_gpu, invstd_gpu;
    const Tensor expected =
        ops::batch_norm_train(x, cpu.weight, cpu.bias, cpu.running_mean, cpu.running_var, 0.1, 1e-5,
                              &mean_cpu, &invstd_cpu);
    const Tensor got =
        ops::cuda::batch_norm_train(on_gpu(x), gpu.weight, gpu.bias, gpu.running_mean,
                                    gpu.running_var, 0.1, 1e-5, &mean_gpu, &invstd_gpu);
    EXPECT_TRUE(near_cpu(got, expected, kAtol, kRtol));
    EXPECT_TRUE(near_cpu(mean_gpu, mean_cpu, kAtol, kRtol));
    EXPECT_TRUE(near_cpu(invstd_gpu, invstd_cpu, kAtol, kRtol));
    if (c.running) {
      EXPECT_TRUE(near_cpu(gpu.running_mean, cpu.running_mean, kAtol, kRtol));
      EXPECT_TRUE(near_cpu(gpu.running_var, cpu.running_var, kAtol, kRtol));
    }
  }
}

TEST(CudaBatchNorm, TrainingWithoutSavedStatsGivesTheSameOutput) {
  TANDEM_REQUIRE_GPU();
  const BnCase c = cases()[0];
  const Tensor x = random_cpu(c.x, 50, -1, 3);
  const Params cpu = params_for(c, 60);
  const Params gpu{gpu_or_none(cpu.weight), gpu_or_none(cpu.bias), gpu_or_none(cpu.running_mean),
                   gpu_or_none(cpu.running_var)};
  const Tensor expected = ops::batch_norm_train(x, cpu.weight, cpu.bias, cpu.running_mean,
                                                cpu.running_var, 0.3, 1e-3, nullptr, nullptr);
  const Tensor got = ops::cuda::batch_norm_train(on_gpu(x), gpu.weight, gpu.bias, gpu.running_mean,
                                                 gpu.running_var, 0.3, 1e-3, nullptr, nullptr);
  EXPECT_TRUE(near_cpu(got, expected, kAtol, kRtol));
  EXPECT_TRUE(near_cpu(gpu.running_mean, cpu.running_mean, kAtol, kRtol));
  EXPECT_TRUE(near_cpu(gpu.running_var, cpu.running_var, kAtol, kRtol));
}

TEST(CudaBatchNorm, EvalMatchesCpu) {
  TANDEM_REQUIRE_GPU();
  std::uint64_t seed = 1000;
  for (BnCase c : cases()) {
    c.running = true;  // evaluation needs them
    SCOPED_TRACE(c.name);
    const Tensor x = random_cpu(c.x, seed, -1, 3);
    const Params cpu = params_for(c, seed + 10);
    seed += 100;
    const Tensor expected =
        ops::batch_norm_eval(x, cpu.weight, cpu.bias, cpu.running_mean, cpu.running_var, 1e-5);
    const Tensor got =
        ops::cuda::batch_norm_eval(on_gpu(x), gpu_or_none(cpu.weight), gpu_or_none(cpu.bias),
                                   on_gpu(cpu.running_mean), on_gpu(cpu.running_var), 1e-5);
    EXPECT_TRUE(near_cpu(got, expected, kAtol, kRtol));
  }
}

TEST(CudaBatchNorm, BackwardMatchesCpu) {
  TANDEM_REQUIRE_GPU();
  std::uint64_t seed = 2000;
  for (const BnCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const Tensor x = random_cpu(c.x, seed, -1, 3);
    const Tensor g = random_cpu(c.x, seed + 1);
    const Params cpu = params_for(c, seed + 10);
    seed += 100;
    Tensor mean, invstd;
    (void)ops::batch_norm_train(x, cpu.weight, cpu.bias, Tensor(), Tensor(), 0.1, 1e-5, &mean,
                                &invstd);
    Tensor gw_cpu, gb_cpu, gw_gpu, gb_gpu;
    const Tensor expected =
        ops::batch_norm_backward(g, x, cpu.weight, mean, invstd, &gw_cpu, &gb_cpu);
    const Tensor got =
        ops::cuda::batch_norm_backward(on_gpu(g), on_gpu(x), gpu_or_none(cpu.weight), on_gpu(mean),
                                       on_gpu(invstd), &gw_gpu, &gb_gpu);
    EXPECT_TRUE(near_cpu(got, expected, kAtol, kRtol));
    if (c.weight) {
      EXPECT_TRUE(near_cpu(gw_gpu, gw_cpu, kAtol, kRtol));
    } else {
      EXPECT_FALSE(gw_gpu.defined());
    }
    EXPECT_TRUE(near_cpu(gb_gpu, gb_cpu, kAtol, kRtol));
  }
}

TEST(CudaBatchNorm, BackwardWithoutParameterGradientsMatchesCpu) {
  TANDEM_REQUIRE_GPU();
  const BnCase c = cases()[0];
  const Tensor x = random_cpu(c.x, 3000, -1, 3);
  const Tensor g = random_cpu(c.x, 3001);
  const Params cpu = params_for(c, 3010);
  Tensor mean, invstd;
  (void)ops::batch_norm_train(x, cpu.weight, cpu.bias, Tensor(), Tensor(), 0.1, 1e-5, &mean,
                              &invstd);
  const Tensor expected =
      ops::batch_norm_backward(g, x, cpu.weight, mean, invstd, nullptr, nullptr);
  const Tensor got = ops::cuda::batch_norm_backward(on_gpu(g), on_gpu(x), on_gpu(cpu.weight),
                                                    on_gpu(mean), on_gpu(invstd), nullptr, nullptr);
  EXPECT_TRUE(near_cpu(got, expected, kAtol, kRtol));
}

TEST(CudaBatchNorm, Float64MatchesCpu) {
  TANDEM_REQUIRE_GPU();
  const BnCase c = cases()[0];
  const Tensor x = random_cpu(c.x, 4000, -1, 3, DType::Float64);
  const Tensor g = random_cpu(c.x, 4001, -1, 1, DType::Float64);
  const Params cpu = params_for(c, 4010, DType::Float64);
  const Params gpu{on_gpu(cpu.weight), on_gpu(cpu.bias), on_gpu(cpu.running_mean),
                   on_gpu(cpu.running_var)};
  Tensor mean_cpu, invstd_cpu, mean_gpu, invstd_gpu;
  const Tensor y_cpu = ops::batch_norm_train(x, cpu.weight, cpu.bias, cpu.running_mean,
                                             cpu.running_var, 0.1, 1e-5, &mean_cpu, &invstd_cpu);
  const Tensor y_gpu =
      ops::cuda::batch_norm_train(on_gpu(x), gpu.weight, gpu.bias, gpu.running_mean,
                                  gpu.running_var, 0.1, 1e-5, &mean_gpu, &invstd_gpu);
  EXPECT_TRUE(near_cpu(y_gpu, y_cpu, 1e-10, 1e-10));
  EXPECT_TRUE(near_cpu(mean_gpu, mean_cpu, 1e-10, 1e-10));
  EXPECT_TRUE(near_cpu(invstd_gpu, invstd_cpu, 1e-10, 1e-10));
  EXPECT_TRUE(near_cpu(gpu.running_mean, cpu.running_mean, 1e-10, 1e-10));
  EXPECT_TRUE(near_cpu(gpu.running_var, cpu.running_var, 1e-10, 1e-10));
  EXPECT_TRUE(near_cpu(
      ops::cuda::batch_norm_eval(on_gpu(x), gpu.weight, gpu.bias, gpu.running_mean, gpu.running_var,
                                 1e-5),
      ops::batch_norm_eval(x, cpu.weight, cpu.bias, cpu.running_mean, cpu.running_var, 1e-5), 1e-10,
      1e-10));
  Tensor gw_cpu, gb_cpu, gw_gpu, gb_gpu;
  const Tensor gx_cpu =
      ops::batch_norm_backward(g, x, cpu.weight, mean_cpu, invstd_cpu, &gw_cpu, &gb_cpu);
  const Tensor gx_gpu = ops::cuda::batch_norm_backward(
      on_gpu(g), on_gpu(x), gpu.weight, on_gpu(mean_cpu), on_gpu(invstd_cpu), &gw_gpu, &gb_gpu);
  EXPECT_TRUE(near_cpu(gx_gpu, gx_cpu, 1e-10, 1e-10));
  EXPECT_TRUE(near_cpu(gw_gpu, gw_cpu, 1e-10, 1e-10));
  EXPECT_TRUE(near_cpu(gb_gpu, gb_cpu, 1e-10, 1e-10));
}

TEST(CudaBatchNorm, OperandOnTheCpuIsAnError) {
  TANDEM_REQUIRE_GPU();
  const BnCase c = cases()[0];
  const Tensor x = random_cpu(c.x, 5000);
  const Params cpu = params_for(c, 5010);
  // The running statistics left on the CPU.
  testing::expect_contains(testing::error_of([&] {
                             (void)ops::cuda::batch_norm_train(
                                 on_gpu(x), on_gpu(cpu.weight), on_gpu(cpu.bias), cpu.running_mean,
                                 cpu.running_var, 0.1, 1e-5, nullptr, nullptr);
                           }),
                           "different devices");
  testing::expect_contains(testing::error_of([&] {
                             (void)ops::cuda::batch_norm_eval(x, Tensor(), Tensor(),
                                                              on_gpu(cpu.running_mean),
                                                              on_gpu(cpu.running_var), 1e-5);
                           }),
                           "operands on different devices (cuda:0 and cpu)");
}

}  // namespace
}  // namespace tandem
