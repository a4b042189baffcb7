// DataParallel with GPU replicas against one CPU device on the same batches: two replicas on one
// GPU, a GPU with a CPU replica (either as the master), a weighted split, global batch-norm
// statistics, gradient accumulation, a batch already on the GPU, and two identical runs giving
// identical weights. The GPU path reduces through the host (HostReducer's staging), so only the
// kernels' arithmetic differs from the CPU reference: tolerances are the CUDA kernel tests' (rtol
// 1e-4).
#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "gpu_skip.h"
#include "parallel_test_util.h"
#include "tandem/tandem.h"

namespace tandem::testing {
namespace {

const Device kGpu0(DeviceType::CUDA, 0);
const Device kCpu0(DeviceType::CPU, 0);

template <typename Net>
void expect_matches_one_cpu_device(std::vector<Device> devices, nn::DataParallelOptions options = {},
                                   std::int64_t batch = 12) {
  manual_seed(7);
  const nn::StateDict init = snapshot(Net());
  const std::vector<Batch> batches = make_batches(5, batch, 11);
  const TrainingRun one = train_single<Net>(init, batches);
  const TrainingRun dp = train_dp<Net>(init, batches, std::move(devices), std::move(options));
  EXPECT_TRUE(losses_match(dp.losses, one.losses, 1e-4));
  EXPECT_TRUE(states_match(dp.state, one.state, 1e-4, 1e-5));
}

TEST(DataParallelGpu, TwoReplicasOnOneGpuEqualOneCpuDevice) {
  TANDEM_REQUIRE_GPU();
  expect_matches_one_cpu_device<SeedNet>({kGpu0, kGpu0});
}

TEST(DataParallelGpu, AGpuMasterWithACpuReplicaAndAWeightedSplitEqualOneCpuDevice) {
  TANDEM_REQUIRE_GPU();
  expect_matches_one_cpu_device<SeedNet>(
      {kGpu0, kCpu0}, {.split = nn::SplitPolicy::Weighted, .proportions = {3.0, 1.0}});
}

TEST(DataParallelGpu, ACpuMasterWithAGpuReplicaEqualsOneCpuDevice) {
  TANDEM_REQUIRE_GPU();
  expect_matches_one_cpu_device<SeedNet>({kCpu0, kGpu0});
}

TEST(DataParallelGpu, GlobalBatchNormStatisticsAcrossAGpuAndTheCpuEqualOneCpuDevice) {
  TANDEM_REQUIRE_GPU();
  expect_matches_one_cpu_device<BnNet>({kGpu0, kGpu0, kCpu0},
                                       {.batchnorm = nn::BatchNormStats::Global});
}

TEST(DataParallelGpu, AccumulatedMicroStepsOnTwoGpuReplicasEqualOneCpuDeviceOnTheWholeBatch) {
  TANDEM_REQUIRE_GPU();
  manual_seed(7);
  const nn::StateDict init = snapshot(SeedNet());
  const std::vector<Batch> whole = make_batches(3, 16, 21);
  const TrainingRun one = train_single<SeedNet>(init, whole);
  // Each batch of 16 as two micro-steps of 8 through DataParallel: the same update.
  const TrainingRun dp = train_dp_accumulated<SeedNet>(init, whole, {kGpu0, kGpu0});
  EXPECT_TRUE(states_match(dp.state, one.state, 1e-4, 1e-5));
}

TEST(DataParallelGpu, ABatchAlreadyOnTheGpuIsSharedWithACpuReplica) {
  TANDEM_REQUIRE_GPU();
  manual_seed(7);
  const nn::StateDict init = snapshot(SeedNet());
  const std::vector<Batch> batches = make_batches(4, 12, 51);
  std::vector<Batch> on_gpu;
  for (const Batch& b : batches) on_gpu.push_back({copy_to(b.x, kGpu0), copy_to(b.y, kGpu0)});
  // The CPU replica's rows are copied from the GPU by the calling thread; the same training.
  const TrainingRun from_host = train_dp<SeedNet>(init, batches, {kGpu0, kCpu0});
  const TrainingRun from_gpu = train_dp<SeedNet>(init, on_gpu, {kGpu0, kCpu0});
  EXPECT_EQ(from_gpu.losses, from_host.losses);
  EXPECT_TRUE(states_match(from_gpu.state, from_host.state, -1.0, 0.0));
}

TEST(DataParallelGpu, TwoRunsOnTheSameDevicesGiveIdenticalWeights) {
  TANDEM_REQUIRE_GPU();
  manual_seed(7);
  const nn::StateDict init = snapshot(SeedNet());
  const std::vector<Batch> batches = make_batches(4, 12, 31);
  const TrainingRun a = train_dp<SeedNet>(init, batches, {kGpu0, kGpu0, kCpu0});
  const TrainingRun b = train_dp<SeedNet>(init, batches, {kGpu0, kGpu0, kCpu0});
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_TRUE(states_match(a.state, b.state, -1.0, 0.0));
}

TEST(DataParallelGpu, AFailureOnAGpuReplicaReachesTheCallerAndTheNextStepWorks) {
  TANDEM_REQUIRE_GPU();
  manual_seed(7);
  auto model = std::make_shared<SeedNet>();
  model->to(kGpu0);
  nn::DataParallel dp(model, {kGpu0, kGpu0}, {.threads_per_replica = 1});
  const std::vector<Batch> batches = make_batches(1, 12, 41);
  Tensor bad = batches[0].y.clone();
  bad.data<std::int64_t>()[9] = 10;  // a class that does not exist, in replica 1's half
  EXPECT_THROW(dp.forward_backward(batches[0].x, bad, cross_entropy_loss), Error);
  optim::SGD opt(model->parameters(), kSgd);
  opt.zero_grad();
  EXPECT_TRUE(dp.forward_backward(batches[0].x, batches[0].y, cross_entropy_loss).synchronized);
  dp.step(opt);
}

}  // namespace
}  // namespace tandem::testing
