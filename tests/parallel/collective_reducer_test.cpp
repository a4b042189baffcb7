// CollectiveReducer through a host collective with NCCL's contract (host_collective.h), on CPU
// replicas: the same training as one device (plain, small buckets, a weighted split with an idle
// replica, accumulation, fixed micro-shards, global batch-norm statistics); sums queued in bucket
// order on every replica even when the buckets complete in another order; a failed step aborts
// the collective and the next one makes a fresh one; the options it refuses. What NCCL adds (its
// streams) is checked on two GPUs by parallel/cuda/nccl_collective_gpu_test.cpp.
#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "errors.h"
#include "host_collective.h"
#include "parallel_test_util.h"
#include "tandem/parallel/collective_reducer.h"

namespace tandem::testing {
namespace {

constexpr double kRtol = 1e-5;
constexpr double kAtol = 5e-6;

nn::DataParallelOptions with_collective(std::shared_ptr<HostCollective::Counters> counters,
                                        nn::DataParallelOptions options = {}) {
  options.collective = HostCollective::factory(std::move(counters));
  return options;
}

template <typename Net>
void expect_matches_one_device(int replicas, nn::DataParallelOptions options) {
  manual_seed(7);
  const nn::StateDict init = snapshot(Net());
  const std::vector<Batch> batches = make_batches(5, 12, 11);
  const TrainingRun one = train_single<Net>(init, batches);
  auto counters = std::make_shared<HostCollective::Counters>();
  const TrainingRun dp = train_dp<Net>(init, batches, nn::cpu_replicas(replicas),
                                       with_collective(counters, std::move(options)));
  EXPECT_EQ(dp.reduction, "host-collective");
  EXPECT_EQ(counters->made.load(), 1);
  EXPECT_GT(counters->sums.load(), 0);
  EXPECT_TRUE(losses_match(dp.losses, one.losses, kRtol));
  EXPECT_TRUE(states_match(dp.state, one.state, kRtol, kAtol));
}

TEST(CollectiveReducer, TwoAndThreeReplicasEqualOneDevice) {
  expect_matches_one_device<SeedNet>(2, {});
  expect_matches_one_device<SeedNet>(3, {});
}

TEST(CollectiveReducer, SmallBucketsAndAWeightedSplitWithAnIdleReplicaEqualOneDevice) {
  expect_matches_one_device<SeedNet>(
      3, {.split = nn::SplitPolicy::Weighted, .proportions = {1.0, 0.0, 2.0}, .bucket_bytes = 64});
}

TEST(CollectiveReducer, FixedMicroShardsEqualOneDevice) {
  expect_matches_one_device<SeedNet>(2, {.micro_shard = 4});
}

TEST(CollectiveReducer, GlobalBatchNormStatisticsEqualOneDevice) {
  expect_matches_one_device<BnNet>(2, {.batchnorm = nn::BatchNormStats::Global,
                                       .bucket_bytes = 64});
}

TEST(CollectiveReducer, AccumulatedMicroStepsEqualOneDeviceOnTheWholeBatch) {
  manual_seed(7);
  const nn::StateDict init = snapshot(SeedNet());
  const std::vector<Batch> whole = make_batches(3, 16, 21);
  const TrainingRun one = train_single<SeedNet>(init, whole);
  auto counters = std::make_shared<HostCollective::Counters>();
  const TrainingRun dp = train_dp_accumulated<SeedNet>(init, whole, nn::cpu_replicas(2),
                                                       with_collective(counters));
  EXPECT_EQ(dp.reduction, "host-collective");
  EXPECT_TRUE(states_match(dp.state, one.state, kRtol, kAtol));
}

TEST(CollectiveReducer, SumsAreQueuedInBucketOrderWhateverOrderTheBucketsComplete) {
  // Three parameters of different sizes, one bucket each; replica 0 completes them in the order
  // 2, 0, 1 and replica 1 in the order 1, 2, 0. The host collective throws if the ranks' n-th
  // sums differ, so both must queue bucket 0, 1, 2 (of 10, 20 and 30 elements here: the buckets
  // follow reverse registration, so bucket 0 is parameter 2).
  std::vector<std::vector<Tensor>> params(2);
  for (std::size_t r = 0; r < 2; ++r) {
    for (std::int64_t n : {30, 20, 10}) {
      Tensor p = zeros({n});
      p.set_requires_grad(true);
      p.set_grad(full({n}, static_cast<double>(r + 1)));
      params[r].push_back(p);
    }
  }
  const std::vector<std::vector<std::vector<Tensor>>> stored(2);
  auto counters = std::make_shared<HostCollective::Counters>();
  parallel::CollectiveReducer reducer(params, stored, 1, {kCPU, kCPU},
                                      HostCollective::factory(counters));
  ASSERT_EQ(reducer.buckets().size(), 3U);
  reducer.begin({.contributions = {{.replica = 0, .coeff = 0.5}, {.replica = 1, .coeff = 0.25}},
                 .base = {Tensor(), Tensor(), Tensor()}});
  reducer.arm(0);
  reducer.arm(1);
  for (std::size_t i : {0, 2, 1}) reducer.grad_ready(0, i);  // buckets 2, 0, 1
  for (std::size_t i : {1, 0, 2}) reducer.grad_ready(1, i);  // buckets 1, 2, 0
  reducer.finish(0);
  reducer.finish(1);
  EXPECT_TRUE(reducer.all_reduced());
  EXPECT_EQ(counters->sums.load(), 3);
  for (const Tensor& p : params[0]) {  // 0.5 * 1 + 0.25 * 2
    for (float v : p.grad().to_vector<float>()) EXPECT_EQ(v, 1.0f);
  }
}

TEST(CollectiveReducer, AFailedStepAbortsTheCollectiveAndTheNextStepsEqualAFreshRun) {
  manual_seed(7);
  const nn::StateDict init = snapshot(SeedNet());
  const std::vector<Batch> batches = make_batches(2, 12, 41);
  auto counters = std::make_shared<HostCollective::Counters>();
  auto model = model_from<SeedNet>(init);
  nn::DataParallel dp(model, nn::cpu_replicas(2),
                      with_collective(counters, {.threads_per_replica = 1}));
  Tensor bad = batches[0].y.clone();
  bad.data<std::int64_t>()[9] = 10;  // a class that does not exist, in replica 1's half
  EXPECT_THROW(dp.forward_backward(batches[0].x, bad, cross_entropy_loss), Error);
  EXPECT_EQ(counters->aborted.load(), 1);
  const TrainingRun after = train_through(dp, *model, batches);
  EXPECT_EQ(counters->made.load(), 2);  // a fresh collective after the abort
  auto fresh_counters = std::make_shared<HostCollective::Counters>();
  const TrainingRun fresh =
      train_dp<SeedNet>(init, batches, nn::cpu_replicas(2), with_collective(fresh_counters));
  EXPECT_EQ(after.losses, fresh.losses);
  EXPECT_TRUE(states_match(after.state, fresh.state, -1.0, 0.0));
}

TEST(CollectiveReducer, ACollectiveOfYourOwnDoesNotHandBucketsOn) {
  auto counters = std::make_shared<HostCollective::Counters>();
  auto model = std::make_shared<SeedNet>();
  nn::DataParallelOptions options = with_collective(counters);
  options.on_bucket_reduced = [](const std::vector<Tensor>&) {};
  expect_contains(error_of([&] { nn::DataParallel dp(model, nn::cpu_replicas(2), options); }),
                  "DataParallel: a collective of your own sums the buckets across the replicas");
}

}  // namespace
}  // namespace tandem::testing
