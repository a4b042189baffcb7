// DataParallel on distinct GPUs, reduced by NCCL (CollectiveReducer over NCCL): against one CPU
// device on the same batches, plain, with a weighted split, global batch-norm statistics,
// accumulation and fixed micro-shards; against the host reducer on the same GPUs; and a failed
// step (the communicators aborted, not hung) followed by a working one. Needs two GPUs: skipped,
// with the count, elsewhere. Tolerances are the CUDA kernel tests' (rtol 1e-4): NCCL sums in
// float32 in its own order.
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
const Device kGpu1(DeviceType::CUDA, 1);

template <typename Net>
void expect_nccl_matches_one_cpu_device(nn::DataParallelOptions options = {},
                                        std::int64_t batch = 12) {
  manual_seed(7);
  const nn::StateDict init = snapshot(Net());
  const std::vector<Batch> batches = make_batches(5, batch, 11);
  const TrainingRun one = train_single<Net>(init, batches);
  const TrainingRun dp = train_dp<Net>(init, batches, {kGpu0, kGpu1}, std::move(options));
  EXPECT_EQ(dp.reduction, "nccl");
  EXPECT_TRUE(losses_match(dp.losses, one.losses, 1e-4));
  EXPECT_TRUE(states_match(dp.state, one.state, 1e-4, 1e-5));
}

TEST(DataParallelNccl, TwoGpusEqualOneCpuDevice) {
  TANDEM_REQUIRE_GPUS(2);
  expect_nccl_matches_one_cpu_device<SeedNet>();
}

TEST(DataParallelNccl, SmallBucketsAndAWeightedSplitEqualOneCpuDevice) {
  TANDEM_REQUIRE_GPUS(2);
  expect_nccl_matches_one_cpu_device<SeedNet>(
      {.split = nn::SplitPolicy::Weighted, .proportions = {1.0, 3.0}, .bucket_bytes = 256});
}

TEST(DataParallelNccl, AReplicaWithoutSamplesStillTakesPart) {
  TANDEM_REQUIRE_GPUS(2);
  expect_nccl_matches_one_cpu_device<SeedNet>(
      {.split = nn::SplitPolicy::Weighted, .proportions = {1.0, 0.0}});
}

TEST(DataParallelNccl, GlobalBatchNormStatisticsEqualOneCpuDevice) {
  TANDEM_REQUIRE_GPUS(2);
  expect_nccl_matches_one_cpu_device<BnNet>({.batchnorm = nn::BatchNormStats::Global});
}

TEST(DataParallelNccl, FixedMicroShardsEqualOneCpuDevice) {
  TANDEM_REQUIRE_GPUS(2);
  expect_nccl_matches_one_cpu_device<SeedNet>({.micro_shard = 4});
}

TEST(DataParallelNccl, AccumulatedMicroStepsEqualOneCpuDeviceOnTheWholeBatch) {
  TANDEM_REQUIRE_GPUS(2);
  manual_seed(7);
  const nn::StateDict init = snapshot(SeedNet());
  const std::vector<Batch> whole = make_batches(3, 16, 21);
  const TrainingRun one = train_single<SeedNet>(init, whole);
  const TrainingRun dp = train_dp_accumulated<SeedNet>(init, whole, {kGpu0, kGpu1});
  EXPECT_EQ(dp.reduction, "nccl");
  EXPECT_TRUE(states_match(dp.state, one.state, 1e-4, 1e-5));
}

TEST(DataParallelNccl, AgreesWithTheHostReducerOnTheSameGpus) {
  TANDEM_REQUIRE_GPUS(2);
  manual_seed(7);
  const nn::StateDict init = snapshot(SeedNet());
  const std::vector<Batch> batches = make_batches(4, 12, 31);
  const TrainingRun nccl = train_dp<SeedNet>(init, batches, {kGpu0, kGpu1});
  const TrainingRun host = train_dp<SeedNet>(init, batches, {kGpu0, kGpu1},
                                             {.gpu_reduction = nn::GpuReduction::Host});
  EXPECT_EQ(nccl.reduction, "nccl");
  EXPECT_EQ(host.reduction, "host");
  EXPECT_TRUE(losses_match(nccl.losses, host.losses, 1e-5));
  EXPECT_TRUE(states_match(nccl.state, host.state, 1e-5, 1e-6));
}

TEST(DataParallelNccl, AFailedStepAbortsTheReductionAndTheNextStepWorks) {
  TANDEM_REQUIRE_GPUS(2);
  manual_seed(7);
  const nn::StateDict init = snapshot(SeedNet());
  const std::vector<Batch> batches = make_batches(2, 12, 41);
  auto model = model_from<SeedNet>(init);
  model->to(kGpu0);
  nn::DataParallel dp(model, {kGpu0, kGpu1}, {.threads_per_replica = 1});
  Tensor bad = batches[0].y.clone();
  bad.data<std::int64_t>()[9] = 10;  // a class that does not exist, in replica 1's half
  EXPECT_THROW(dp.forward_backward(batches[0].x, bad, cross_entropy_loss), Error);
  // The same steps as a fresh run: the failed one left no trace, and nothing hangs.
  const TrainingRun after = train_through(dp, *model, batches);
  const TrainingRun fresh = train_dp<SeedNet>(init, batches, {kGpu0, kGpu1});
  EXPECT_TRUE(losses_match(after.losses, fresh.losses, 1e-6));
  EXPECT_TRUE(states_match(after.state, fresh.state, 1e-6, 1e-7));
}

}  // namespace
}  // namespace tandem::testing
