// CUDA optimizer steps (optimizer_step.cu) against the real CPU optimizers: tandem::optim::SGD,
// Adam and AdamW step CPU parameters, and sgd_step / adam_step the same parameters' GPU copies,
// for three steps with fresh gradients, over the options' branches (momentum, dampening,
// Nesterov, weight decay, maximize; L2 against decoupled decay, AMSGrad), float32 and float64.
// Parameters and their buffers must agree after every step. And the multi-tensor launches
// (MultiTensorStep, what Optimizer::step() uses on a GPU) against one launch per parameter, bit
// for bit, across the limits of one launch. Shapes: p, g and buffers (n).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "parity.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/optim/adam.h"
#include "tandem/optim/sgd.h"

namespace tandem {
namespace {

using testing::near_cpu;
using testing::on_gpu;
using testing::random_cpu;

constexpr int kSteps = 3;
constexpr std::int64_t kN = 1031;  // not a multiple of the block size

// The same IEEE operations in the same order on both sides: equal up to FMA contraction on a
// CPU build with -march=native.
double atol_for(DType dtype) { return dtype == DType::Float64 ? 1e-14 : 1e-7; }
double rtol_for(DType dtype) { return dtype == DType::Float64 ? 1e-13 : 1e-6; }

// The CPU optimizer's buffer `name` of `param`; undefined when it has none.
Tensor cpu_buffer(const optim::Optimizer& opt, const Tensor& param, const std::string& name) {
  const optim::ParamState* state = opt.state(param);
  if (!state) return Tensor();
  for (const auto& [key, t] : state->buffers) {
    if (key == name) return t;
  }
  return Tensor();
}

Tensor gradient(int step, DType dtype) { return random_cpu({kN}, 100 + step, -1, 1, dtype); }

void run_sgd(const optim::SGDOptions& o, DType dtype) {
  SCOPED_TRACE(::testing::Message()
               << dtype_name(dtype) << " lr " << o.lr << ", momentum " << o.momentum
               << ", dampening " << o.dampening << ", weight_decay " << o.weight_decay
               << ", nesterov " << o.nesterov << ", maximize " << o.maximize);
  Tensor p_cpu = random_cpu({kN}, 1, -1, 1, dtype);
  p_cpu.set_requires_grad(true);
  const Tensor p_gpu = on_gpu(p_cpu.detach());
  const Tensor buf_gpu = o.momentum != 0.0 ? on_gpu(zeros({kN}, {.dtype = dtype})) : Tensor();
  optim::SGD opt({p_cpu}, o);
  for (int step = 0; step < kSteps; ++step) {
    SCOPED_TRACE(step);
    const Tensor g = gradient(step, dtype);
    p_cpu.set_grad(g);
    opt.step();
    ops::cuda::sgd_step(p_gpu, on_gpu(g), buf_gpu,
                        {.lr = o.lr,
                         .momentum = o.momentum,
                         .dampening = o.dampening,
                         .weight_decay = o.weight_decay,
                         .nesterov = o.nesterov,
                         .maximize = o.maximize,
                         .first = step == 0});
    EXPECT_TRUE(near_cpu(p_gpu, p_cpu.detach(), atol_for(dtype), rtol_for(dtype)));
    if (o.momentum != 0.0) {
      EXPECT_TRUE(near_cpu(buf_gpu, cpu_buffer(opt, p_cpu, "momentum_buffer"), atol_for(dtype),
                           rtol_for(dtype)));
    }
  }
}

// decoupled: AdamW (the options' weight decay as given), else Adam.
void run_adam(const optim::AdamOptions& o, bool decoupled, DType dtype) {
  SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << (decoupled ? " AdamW" : " Adam")
                                    << " lr " << o.lr << ", weight_decay " << o.weight_decay
                                    << ", amsgrad " << o.amsgrad << ", maximize " << o.maximize);
  Tensor p_cpu = random_cpu({kN}, 2, -1, 1, dtype);
  p_cpu.set_requires_grad(true);
  const Tensor p_gpu = on_gpu(p_cpu.detach());
  const Tensor m_gpu = on_gpu(zeros({kN}, {.dtype = dtype}));
  const Tensor v_gpu = on_gpu(zeros({kN}, {.dtype = dtype}));
  const Tensor vmax_gpu = o.amsgrad ? on_gpu(zeros({kN}, {.dtype = dtype})) : Tensor();
  std::unique_ptr<optim::Optimizer> opt;
  if (decoupled) {
    opt = std::make_unique<optim::AdamW>(
        std::vector<Tensor>{p_cpu},
        optim::AdamWOptions{o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad, o.maximize});
  } else {
    opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p_cpu}, o);
  }
  for (int step = 0; step < kSteps; ++step) {
    SCOPED_TRACE(step);
    const Tensor g = gradient(step, dtype);
    p_cpu.set_grad(g);
    opt->step();
    ops::cuda::adam_step(p_gpu, on_gpu(g), m_gpu, v_gpu, vmax_gpu,
                         {.lr = o.lr,
                          .beta1 = o.betas[0],
                          .beta2 = o.betas[1],
                          .eps = o.eps,
                          .weight_decay = o.weight_decay,
                          .decoupled = decoupled,
                          .amsgrad = o.amsgrad,
                          .maximize = o.maximize,
                          .step = step + 1});
    const double atol = atol_for(dtype), rtol = rtol_for(dtype);
    EXPECT_TRUE(near_cpu(p_gpu, p_cpu.detach(), atol, rtol));
    EXPECT_TRUE(near_cpu(m_gpu, cpu_buffer(*opt, p_cpu, "exp_avg"), atol, rtol));
    EXPECT_TRUE(near_cpu(v_gpu, cpu_buffer(*opt, p_cpu, "exp_avg_sq"), atol, rtol));
    if (o.amsgrad) {
      EXPECT_TRUE(near_cpu(vmax_gpu, cpu_buffer(*opt, p_cpu, "max_exp_avg_sq"), atol, rtol));
    }
  }
}

TEST(CudaOptimizerStep, SgdMatchesTheCpuOptimizer) {
  TANDEM_REQUIRE_GPU();
  const std::vector<optim::SGDOptions> cases = {
      {.lr = 0.1},
      {.lr = 0.1, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true},
      {.lr = 0.05, .momentum = 0.5, .maximize = true},
      {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.02, .nesterov = true, .maximize = true},
  };
  for (const auto& o : cases) run_sgd(o, DType::Float32);
  run_sgd(cases[3], DType::Float64);
  run_sgd(cases[4], DType::Float64);
}

TEST(CudaOptimizerStep, AdamMatchesTheCpuOptimizer) {
  TANDEM_REQUIRE_GPU();
  const std::vector<optim::AdamOptions> cases = {
      {.lr = 1e-2},
      {.lr = 1e-2, .weight_decay = 0.05},
      {.lr = 1e-2, .betas = {0.8, 0.99}, .eps = 1e-6, .amsgrad = true},
      {.lr = 1e-2, .weight_decay = 0.05, .amsgrad = true, .maximize = true},
      {.lr = 1e-2, .maximize = true},
  };
  for (const auto& o : cases) run_adam(o, /*decoupled=*/false, DType::Float32);
  run_adam(cases[1], false, DType::Float64);
}

TEST(CudaOptimizerStep, AdamWMatchesTheCpuOptimizer) {
  TANDEM_REQUIRE_GPU();
  const std::vector<optim::AdamOptions> cases = {
      {.lr = 1e-2, .weight_decay = 0.01},
      {.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true},
      {.lr = 1e-2, .weight_decay = 0.0},
      {.lr = 1e-2, .betas = {0.5, 0.9}, .weight_decay = 0.05, .amsgrad = true, .maximize = true},
  };
  for (const auto& o : cases) run_adam(o, /*decoupled=*/true, DType::Float32);
  run_adam(cases[1], true, DType::Float64);
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

// Parameters of many sizes: more than one launch's worth of tensors (kMultiTensors) and one
// parameter longer than one launch's worth of chunks (kMultiBlocks x kMultiChunk elements).
std::vector<std::int64_t> multi_sizes() {
  using M = ops::cuda::MultiTensorStep;
  std::vector<std::int64_t> sizes{1, 7, M::kMultiChunk, M::kMultiChunk + 1,
                                  M::kMultiBlocks * M::kMultiChunk + 5};
  for (int i = 0; i < M::kMultiTensors; ++i) sizes.push_back(100 + 37 * i);
  return sizes;
}

bool bitwise_equal(const Tensor& gpu_a, const Tensor& gpu_b) {
  const Tensor a = gpu_a.to(kCPU), b = gpu_b.to(kCPU);
  return std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST(CudaMultiTensorStep, SgdInFewLaunchesEqualsOneLaunchPerParameterBitForBit) {
  TANDEM_REQUIRE_GPU();
  const ops::cuda::SgdStep first{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4,
                                 .first = true};
  ops::cuda::SgdStep later = first;
  later.first = false;
  std::vector<Tensor> p1, p2, b1, b2;
  const std::vector<std::int64_t> sizes = multi_sizes();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const Tensor p = random_cpu({sizes[i]}, 10 + i);
    p1.push_back(on_gpu(p));
    p2.push_back(on_gpu(p));
    b1.push_back(zeros({sizes[i]}, {.device = testing::kGpu}));
    b2.push_back(zeros({sizes[i]}, {.device = testing::kGpu}));
  }
  for (int s = 0; s < 2; ++s) {
    const ops::cuda::SgdStep& step = s == 0 ? first : later;
    ops::cuda::MultiTensorStep batch;
    ASSERT_EQ(ops::cuda::MultiTensorStep::open(), &batch);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const Tensor g = on_gpu(random_cpu({sizes[i]}, 100 * s + i));
      batch.add_sgd(p1[i], g, b1[i], step);
      ops::cuda::sgd_step(p2[i], g, b2[i], step);
    }
    batch.flush();
    // 21 tensors and 256 + 7 chunks of the long one: more than one launch, far fewer than 21.
    EXPECT_GE(batch.launches(), 2);
    EXPECT_LE(batch.launches(), 4);
  }
  EXPECT_EQ(ops::cuda::MultiTensorStep::open(), nullptr);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(p1[i], p2[i])) << "parameter " << i << " of " << sizes[i];
    EXPECT_TRUE(bitwise_equal(b1[i], b2[i])) << "buffer " << i;
  }
}

TEST(CudaMultiTensorStep, AdamInFewLaunchesEqualsOneLaunchPerParameterBitForBit) {
  TANDEM_REQUIRE_GPU();
  std::vector<Tensor> p1, p2, m1, m2, v1, v2;
  const std::vector<std::int64_t> sizes = multi_sizes();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const Tensor p = random_cpu({sizes[i]}, 20 + i);
    p1.push_back(on_gpu(p));
    p2.push_back(on_gpu(p));
    for (auto* v : {&m1, &m2, &v1, &v2}) v->push_back(zeros({sizes[i]}, {.device = testing::kGpu}));
  }
  for (std::int64_t t = 1; t <= 2; ++t) {
    const ops::cuda::AdamStep step{.lr = 1e-3, .weight_decay = 0.01, .decoupled = true, .step = t};
    ops::cuda::MultiTensorStep batch;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const Tensor g = on_gpu(random_cpu({sizes[i]}, 200 * t + i));
      batch.add_adam(p1[i], g, m1[i], v1[i], Tensor(), step);
      ops::cuda::adam_step(p2[i], g, m2[i], v2[i], Tensor(), step);
    }
    batch.flush();
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(p1[i], p2[i])) << "parameter " << i;
    EXPECT_TRUE(bitwise_equal(v1[i], v2[i])) << "exp_avg_sq " << i;
  }
}

TEST(CudaMultiTensorStep, AnOptimizerStepOnGpuParametersIsBatched) {
  TANDEM_REQUIRE_GPU();
  // optim::SGD::step() opens a batch: the same result as the per-parameter kernels above.
  std::vector<Tensor> params, copies;
  for (std::int64_t n : {5, 300, 4096}) {
    const Tensor p = random_cpu({n}, 40 + static_cast<std::uint64_t>(n));
    params.push_back(on_gpu(p));
    copies.push_back(on_gpu(p));
  }
  optim::SGD opt(params, {.lr = 0.1, .momentum = 0.9});
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].set_grad(on_gpu(random_cpu(params[i].shape(), 50 + i)));
  }
  opt.step();
  const ops::cuda::SgdStep step{.lr = 0.1, .momentum = 0.9, .first = true};
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const Tensor buf = zeros(copies[i].shape(), {.device = testing::kGpu});
    ops::cuda::sgd_step(copies[i], params[i].grad(), buf, step);
    EXPECT_TRUE(bitwise_equal(params[i], copies[i])) << "parameter " << i;
  }
}

}  // namespace
}  // namespace tandem
