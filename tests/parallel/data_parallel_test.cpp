// DataParallel against one device: 20 SGD steps of the seed CNN and of a batch-norm network (with
// global statistics) on 1, 2 and 3 CPU replicas, even and weighted splits, give the same losses
// and weights within float32 tolerances; plus bit-identical repeats, replica-count invariance with
// fixed micro-shards, accumulation, exceptions, buckets, options and accounting.
#include <omp.h>

#include <atomic>
#include <mutex>
#include <stdexcept>

#include "parallel_test_util.h"
#include "tandem/parallel/replica_threads.h"

namespace tandem::testing {
namespace {

using nn::BatchNormStats;
using nn::DataParallel;
using nn::DataParallelOptions;
using nn::ParameterSync;
using nn::SplitPolicy;

// The one-device references run on this thread with one oneDNN thread, as the replicas do: the
// suite shares two cores with others, and waiting OpenMP teams would only slow it down.
[[maybe_unused]] const bool single_threaded = [] {
  omp_set_num_threads(1);
  return true;
}();

// Tolerances for float32 training split across replicas against one device. The per-slice
// kernels sum in another order than the whole-batch ones, and 20 momentum steps carry the
// rounding differences along: the largest seen here are 3.9e-7 absolute in a weight (|w| < 0.7)
// and 1e-7 relative in a loss. Asserted with a margin for other CPUs' oneDNN kernels:
constexpr double kLossRtol = 1e-5;
constexpr double kWeightRtol = 1e-5;
constexpr double kWeightAtol = 5e-6;
constexpr int kSteps = 20;
constexpr std::int64_t kBatch = 24;

nn::StateDict initial_state(std::uint64_t seed, bool batchnorm) {
  manual_seed(seed);
  if (batchnorm) return snapshot(BnNet());
  return snapshot(SeedNet());
}

DataParallelOptions weighted(std::vector<double> proportions) {
  return {.split = SplitPolicy::Weighted, .proportions = std::move(proportions)};
}

std::vector<double> weights_for(int replicas) {
  if (replicas == 1) return {1.0};
  if (replicas == 2) return {3.0, 1.0};
  return {3.0, 2.0, 1.0};
}

class SeedCnnReplicas : public ::testing::TestWithParam<int> {};

TEST_P(SeedCnnReplicas, EvenSplitMatchesOneDevice) {
  const auto init = initial_state(1, false);
  const auto batches = make_batches(kSteps, kBatch, 7);
  const TrainingRun ref = train_single<SeedNet>(init, batches);
  const TrainingRun dp = train_dp<SeedNet>(init, batches, nn::cpu_replicas(GetParam()));
  EXPECT_TRUE(losses_match(dp.losses, ref.losses, kLossRtol));
  EXPECT_TRUE(states_match(dp.state, ref.state, kWeightRtol, kWeightAtol));
  EXPECT_EQ(dp.reduction, "host");  // NCCL is for replicas each on a GPU of their own
}

TEST_P(SeedCnnReplicas, WeightedSplitMatchesOneDevice) {
  const auto init = initial_state(2, false);
  const auto batches = make_batches(kSteps, kBatch, 8);
  const TrainingRun ref = train_single<SeedNet>(init, batches);
  const TrainingRun dp = train_dp<SeedNet>(init, batches, nn::cpu_replicas(GetParam()),
                                           weighted(weights_for(GetParam())));
  EXPECT_TRUE(losses_match(dp.losses, ref.losses, kLossRtol));
  EXPECT_TRUE(states_match(dp.state, ref.state, kWeightRtol, kWeightAtol));
}

TEST_P(SeedCnnReplicas, SyncBatchNormMatchesOneDevice) {
  const auto init = initial_state(3, true);
  const auto batches = make_batches(kSteps, kBatch, 9);
  const TrainingRun ref = train_single<BnNet>(init, batches);
  for (SplitPolicy split : {SplitPolicy::Even, SplitPolicy::Weighted}) {
    DataParallelOptions options{.split = split, .batchnorm = BatchNormStats::Global};
    if (split == SplitPolicy::Weighted) options.proportions = weights_for(GetParam());
    const TrainingRun dp = train_dp<BnNet>(init, batches, nn::cpu_replicas(GetParam()), options);
    // Weights and the running mean / variance / num_batches_tracked buffers.
    EXPECT_TRUE(losses_match(dp.losses, ref.losses, kLossRtol));
    EXPECT_TRUE(states_match(dp.state, ref.state, kWeightRtol, kWeightAtol));
  }
}

INSTANTIATE_TEST_SUITE_P(Replicas, SeedCnnReplicas, ::testing::Values(1, 2, 3));

TEST(DataParallel, OneReplicaIsBitIdenticalToOneDevice) {
  // Weight 1 and a sum that starts from the first term reproduce plain training exactly, given
  // the same oneDNN thread count on the replica thread as on this one.
  const auto init = initial_state(4, false);
  const auto batches = make_batches(5, kBatch, 10);
  const TrainingRun ref = train_single<SeedNet>(init, batches);
  const TrainingRun dp = train_dp<SeedNet>(init, batches, nn::cpu_replicas(1),
                                           {.threads_per_replica = omp_get_max_threads()});
  EXPECT_EQ(dp.losses, ref.losses);
  EXPECT_TRUE(states_match(dp.state, ref.state, -1, 0));
}

// Gradients of the model after one forward_backward on `batch` (or after `fn` on a plain model).
std::vector<Tensor> grads_of(const nn::Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters())
    out.push_back(p.grad().defined() ? contiguous_copy(p.grad()) : Tensor());
  return out;
}

::testing::AssertionResult grads_match(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                                       double rtol, double atol) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "gradient counts differ";
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].defined() != b[i].defined()) {
      return ::testing::AssertionFailure() << "gradient " << i << " defined on one side only";
    }
    if (!a[i].defined()) continue;
    auto close = allclose(a[i], b[i], rtol, atol);
    if (!close) return ::testing::AssertionFailure() << "gradient " << i << ": " << close.message();
  }
  return ::testing::AssertionSuccess();
}

Tensor rows_of(const Tensor& t, std::int64_t start, std::int64_t count) {
  return contiguous_copy(t.narrow(0, start, count));
}

TEST(DataParallel, PerReplicaBatchNormUsesEachSliceStatistics) {
  // Weighted 3:1 on 24 rows: replica 0 normalises rows 0-17 with their statistics, replica 1
  // rows 18-23 with theirs. The gradient is 0.75 grad(loss_a) + 0.25 grad(loss_b); the model's
  // running stats are replica 0's (those of rows 0-17 only), as PyTorch's DataParallel keeps.
  const auto init = initial_state(5, true);
  const Batch b = make_batches(1, kBatch, 11)[0];
  auto model = model_from<BnNet>(init);
  DataParallel dp(model, nn::cpu_replicas(2), weighted({3.0, 1.0}));
  const nn::StepResult r = dp.forward_backward(b.x, b.y, cross_entropy_loss);

  auto ref = model_from<BnNet>(init);
  const Tensor loss_a = cross_entropy_loss(ref->forward(rows_of(b.x, 0, 18)), rows_of(b.y, 0, 18));
  const Tensor loss_b = cross_entropy_loss(ref->forward(rows_of(b.x, 18, 6)), rows_of(b.y, 18, 6));
  (loss_a * 0.75 + loss_b * 0.25).backward();
  EXPECT_NEAR(r.loss, 0.75 * loss_a.item() + 0.25 * loss_b.item(), 1e-6);
  EXPECT_TRUE(grads_match(grads_of(*model), grads_of(*ref), 1e-4, 1e-6));

  auto seen_a = model_from<BnNet>(init);
  seen_a->forward(rows_of(b.x, 0, 18));
  for (const char* name :
       {"bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var"}) {
    Tensor mine, expected;
    for (auto& [n, t] : model->state_dict())
      if (n == name) mine = t;
    for (auto& [n, t] : seen_a->state_dict())
      if (n == name) expected = t;
    EXPECT_TRUE(allclose(mine, expected, 1e-5, 1e-6)) << name;
  }
}

TEST(DataParallel, TheCallersAutocastReachesEveryReplica) {
  // Weighted 3:1 on 24 rows under bfloat16 autocast: both replica threads run their forward and
  // loss in bf16, and the gradient is that of one device running the two slices under autocast
  // (to a bfloat16 ulp: the reference rounds the 0.75- and 0.25-scaled gradients to bf16, the
  // replicas their unscaled ones).
  const auto init = initial_state(6, false);
  const Batch b = make_batches(1, kBatch, 12)[0];
  auto model = model_from<SeedNet>(init);
  DataParallel dp(model, nn::cpu_replicas(2), weighted({3.0, 1.0}));
  std::mutex mutex;
  std::vector<Precision> seen;
  const nn::LossFn loss = [&](const Tensor& out, const Tensor& y) {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      seen.push_back(autocast_precision());
    }
    return cross_entropy_loss(out, y);
  };
  nn::StepResult r;
  {
    const AutocastGuard bf16(Precision::BFloat16);
    r = dp.forward_backward(b.x, b.y, loss);
  }
  EXPECT_EQ(seen, (std::vector<Precision>{Precision::BFloat16, Precision::BFloat16}));

  auto ref = model_from<SeedNet>(init);
  Tensor loss_a, loss_b;
  {
    const AutocastGuard bf16(Precision::BFloat16);
    loss_a = cross_entropy_loss(ref->forward(rows_of(b.x, 0, 18)), rows_of(b.y, 0, 18));
    loss_b = cross_entropy_loss(ref->forward(rows_of(b.x, 18, 6)), rows_of(b.y, 18, 6));
  }
  (loss_a * 0.75 + loss_b * 0.25).backward();
  EXPECT_NEAR(r.loss, 0.75 * loss_a.item() + 0.25 * loss_b.item(), 1e-6);
  EXPECT_TRUE(grads_match(grads_of(*model), grads_of(*ref), 2e-2, 1e-3));
}

TEST(DataParallel, RepeatRunsAreBitIdentical) {
  const auto init = initial_state(6, false);
  const auto batches = make_batches(kSteps, kBatch, 12);
  const TrainingRun a = train_dp<SeedNet>(init, batches, nn::cpu_replicas(2), weighted({3.0, 1.0}));
  const TrainingRun b = train_dp<SeedNet>(init, batches, nn::cpu_replicas(2), weighted({3.0, 1.0}));
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_TRUE(states_match(a.state, b.state, -1, 0));

  const auto bn_init = initial_state(6, true);
  const DataParallelOptions sync{.batchnorm = BatchNormStats::Global};
  const TrainingRun c = train_dp<BnNet>(bn_init, batches, nn::cpu_replicas(3), sync);
  const TrainingRun d = train_dp<BnNet>(bn_init, batches, nn::cpu_replicas(3), sync);
  EXPECT_EQ(c.losses, d.losses);
  EXPECT_TRUE(states_match(c.state, d.state, -1, 0));
}

TEST(DataParallel, MicroShardsMakeWeightsIndependentOfTheReplicaCount) {
  // Fixed shards of 4 rows, one oneDNN thread each: the same bits on 1, 2 or 3 replicas.
  const auto init = initial_state(7, false);
  const auto batches = make_batches(8, kBatch, 13);
  const DataParallelOptions sharded{.threads_per_replica = 1, .micro_shard = 4};
  const TrainingRun one = train_dp<SeedNet>(init, batches, nn::cpu_replicas(1), sharded);
  for (int replicas : {2, 3}) {
    const TrainingRun many = train_dp<SeedNet>(init, batches, nn::cpu_replicas(replicas), sharded);
    EXPECT_EQ(many.losses, one.losses) << replicas << " replicas";
    EXPECT_TRUE(states_match(many.state, one.state, -1, 0)) << replicas << " replicas";
  }
  DataParallelOptions uneven = sharded;
  uneven.split = SplitPolicy::Weighted;
  uneven.proportions = {1.0, 2.0, 3.0};
  const TrainingRun skewed = train_dp<SeedNet>(init, batches, nn::cpu_replicas(3), uneven);
  EXPECT_TRUE(states_match(skewed.state, one.state, -1, 0));
  // And it is still the same training as one device on whole batches.
  const TrainingRun ref = train_single<SeedNet>(init, batches);
  EXPECT_TRUE(losses_match(one.losses, ref.losses, kLossRtol));
  EXPECT_TRUE(states_match(one.state, ref.state, kWeightRtol, kWeightAtol));
}

TEST(DataParallel, AccumulationMatchesOneDeviceOnTheWholeBatch) {
  const auto init = initial_state(8, false);
  const auto batches = make_batches(10, kBatch, 14);
  const TrainingRun ref = train_single<SeedNet>(init, batches);

  auto model = model_from<SeedNet>(init);
  DataParallel dp(model, nn::cpu_replicas(2), {.accumulate = 2});
  optim::SGD opt(model->parameters(), kSgd);
  std::vector<double> losses;
  for (const Batch& b : batches) {
    opt.zero_grad();
    const nn::StepResult first =
        dp.forward_backward(rows_of(b.x, 0, 12), rows_of(b.y, 0, 12), cross_entropy_loss);
    // Nothing is communicated before the last micro-step.
    EXPECT_FALSE(first.synchronized);
    for (const auto& d : first.devices) EXPECT_EQ(d.reduction_s, 0.0);
    EXPECT_THROW(dp.step(opt), Error);
    const nn::StepResult second =
        dp.forward_backward(rows_of(b.x, 12, 12), rows_of(b.y, 12, 12), cross_entropy_loss);
    EXPECT_TRUE(second.synchronized);
    dp.step(opt);
    losses.push_back((first.loss + second.loss) / 2);
  }
  EXPECT_TRUE(losses_match(losses, ref.losses, kLossRtol));
  EXPECT_TRUE(states_match(snapshot(*model), ref.state, kWeightRtol, kWeightAtol));
}

TEST(DataParallel, AccumulationOnThreeReplicasMatchesOneDevice) {
  // Halves of 12 rows over three replicas: 4 rows each, every micro-step.
  const auto init = initial_state(8, false);
  const auto batches = make_batches(4, kBatch, 15);
  const TrainingRun ref = train_single<SeedNet>(init, batches);
  const TrainingRun dp = train_dp_accumulated<SeedNet>(init, batches, nn::cpu_replicas(3));
  EXPECT_TRUE(states_match(dp.state, ref.state, kWeightRtol, kWeightAtol));
}

TEST(DataParallel, AccumulationWeightsEachMicroStepEquallyWhateverTheSplits) {
  // Micro-batches of 10 and 14 rows split 3:1 (8 + 2, then 11 + 3): the replicas' shares change
  // between micro-steps and the result is still the gradient of (loss_1 + loss_2) / 2, added to a
  // gradient that was there before the cycle.
  const auto init = initial_state(9, false);
  const Batch b = make_batches(1, kBatch, 15)[0];
  auto model = model_from<SeedNet>(init);
  for (const Tensor& p : model->parameters()) p.set_grad(full(p.shape(), 0.5));
  DataParallel dp(model, nn::cpu_replicas(2),
                  {.split = SplitPolicy::Weighted, .proportions = {3.0, 1.0}, .accumulate = 2});
  const auto r1 = dp.forward_backward(rows_of(b.x, 0, 10), rows_of(b.y, 0, 10), cross_entropy_loss);
  const auto r2 =
      dp.forward_backward(rows_of(b.x, 10, 14), rows_of(b.y, 10, 14), cross_entropy_loss);
  EXPECT_EQ(r1.devices[0].samples, 8);
  EXPECT_EQ(r2.devices[0].samples, 11);

  auto ref = model_from<SeedNet>(init);
  for (const Tensor& p : ref->parameters()) p.set_grad(full(p.shape(), 0.5));
  const Tensor l1 = cross_entropy_loss(ref->forward(rows_of(b.x, 0, 10)), rows_of(b.y, 0, 10));
  (l1 * 0.5).backward();
  const Tensor l2 = cross_entropy_loss(ref->forward(rows_of(b.x, 10, 14)), rows_of(b.y, 10, 14));
  (l2 * 0.5).backward();
  EXPECT_NEAR(r1.loss, l1.item(), 1e-6);
  EXPECT_NEAR(r2.loss, l2.item(), 1e-6);
  EXPECT_TRUE(grads_match(grads_of(*model), grads_of(*ref), 1e-5, 1e-7));
}

// Throws on the replica whose slice has `rows` rows (set per test; 0: never).
std::atomic<std::int64_t> g_fail_rows{0};

Tensor loss_failing_on_rows(const Tensor& out, const Tensor& y) {
  if (out.size(0) == g_fail_rows.load()) throw std::runtime_error("bad sample in this slice");
  return cross_entropy_loss(out, y);
}

struct FailingBnNet : BnNet {  // fails in forward, before its first batch-norm collective
  Tensor forward(const Tensor& x) override {
    if (x.size(0) == g_fail_rows.load()) throw std::runtime_error("bad sample in forward");
    return BnNet::forward(x);
  }
};

template <typename Net>
void expect_failure_then_recovery(DataParallelOptions options, const nn::LossFn& failing,
                                  const char* message) {
  const auto init = initial_state(10, std::is_base_of_v<BnNet, Net>);
  const Batch b = make_batches(1, kBatch, 16)[0];
  auto model = model_from<Net>(init);
  DataParallel dp(model, nn::cpu_replicas(2), options);  // slices of 16 and 8 rows
  g_fail_rows = 8;
  try {
    dp.forward_backward(b.x, b.y, failing);
    ADD_FAILURE() << "the replica's exception did not reach the caller";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), message);
  }
  g_fail_rows = 0;
  for (const Tensor& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
  // The next step runs normally and gives one device's gradient (batch statistics in training
  // mode do not depend on the running stats the failed forward may have moved).
  dp.forward_backward(b.x, b.y, failing);
  auto ref = model_from<Net>(init);
  cross_entropy_loss(ref->forward(b.x), b.y).backward();
  EXPECT_TRUE(grads_match(grads_of(*model), grads_of(*ref), 1e-4, 1e-6));
}

TEST(DataParallel, ExceptionOnOneReplicaReachesTheCaller) {
  expect_failure_then_recovery<SeedNet>(weighted({2.0, 1.0}), loss_failing_on_rows,
                                        "bad sample in this slice");
}

TEST(DataParallel, ExceptionWhileOthersWaitInBatchNormCollectives) {
  // Replica 1 fails in its loss: replica 0 waits for it in the backward's collective.
  DataParallelOptions sync = weighted({2.0, 1.0});
  sync.batchnorm = BatchNormStats::Global;
  expect_failure_then_recovery<BnNet>(sync, loss_failing_on_rows, "bad sample in this slice");
  // Replica 1 fails in forward: replica 0 waits for it in the forward's first collective.
  expect_failure_then_recovery<FailingBnNet>(sync, cross_entropy_loss, "bad sample in forward");
}

TEST(DataParallel, AFailedMicroStepDiscardsTheWholeCycle) {
  const auto init = initial_state(19, false);
  const auto batches = make_batches(2, kBatch, 25);
  auto model = model_from<SeedNet>(init);
  DataParallel dp(model, nn::cpu_replicas(2),
                  {.split = SplitPolicy::Weighted, .proportions = {2.0, 1.0}, .accumulate = 2});
  const Batch& b0 = batches[0];
  dp.forward_backward(rows_of(b0.x, 0, 12), rows_of(b0.y, 0, 12), cross_entropy_loss);
  g_fail_rows = 4;  // the last micro-step fails on replica 1 (4 of 12 rows)
  EXPECT_THROW(
      dp.forward_backward(rows_of(b0.x, 12, 12), rows_of(b0.y, 12, 12), loss_failing_on_rows),
      std::runtime_error);
  g_fail_rows = 0;
  for (const Tensor& p : model->parameters()) EXPECT_FALSE(p.grad().defined());

  // A new cycle starts from scratch and gives one device's accumulated gradient.
  const Batch& b1 = batches[1];
  const auto r1 =
      dp.forward_backward(rows_of(b1.x, 0, 12), rows_of(b1.y, 0, 12), cross_entropy_loss);
  const auto r2 =
      dp.forward_backward(rows_of(b1.x, 12, 12), rows_of(b1.y, 12, 12), cross_entropy_loss);
  EXPECT_FALSE(r1.synchronized);
  EXPECT_TRUE(r2.synchronized);
  auto ref = model_from<SeedNet>(init);
  (cross_entropy_loss(ref->forward(rows_of(b1.x, 0, 12)), rows_of(b1.y, 0, 12)) * 0.5).backward();
  (cross_entropy_loss(ref->forward(rows_of(b1.x, 12, 12)), rows_of(b1.y, 12, 12)) * 0.5).backward();
  EXPECT_TRUE(grads_match(grads_of(*model), grads_of(*ref), 1e-5, 1e-7));
}

TEST(DataParallel, BucketsDoNotChangeTheArithmeticAndFollowReverseOrderOfUse) {
  const auto init = initial_state(11, false);
  const auto batches = make_batches(6, kBatch, 17);
  const TrainingRun whole = train_dp<SeedNet>(init, batches, nn::cpu_replicas(2));
  const TrainingRun tiny =
      train_dp<SeedNet>(init, batches, nn::cpu_replicas(2), {.bucket_bytes = 1});
  EXPECT_TRUE(states_match(tiny.state, whole.state, -1, 0));

  // One parameter per bucket; after the first step they are ordered as backward produced them:
  // fc's gradients (parameters 4, 5) first, conv1's (0, 1) last.
  auto model = model_from<SeedNet>(init);
  DataParallel dp(model, nn::cpu_replicas(2), {.bucket_bytes = 1});
  ASSERT_EQ(dp.buckets().size(), 6u);
  dp.forward_backward(batches[0].x, batches[0].y, cross_entropy_loss);
  const auto& buckets = dp.buckets();
  ASSERT_EQ(buckets.size(), 6u);
  EXPECT_GE(buckets.front()[0], 4u);
  EXPECT_LE(buckets.back()[0], 1u);
  // The default 1 MB puts this whole model (about 22 kB) in one bucket.
  DataParallel one_bucket(model_from<SeedNet>(init), nn::cpu_replicas(2));
  EXPECT_EQ(one_bucket.buckets().size(), 1u);
}

TEST(DataParallel, SharedReplicasAliasTheModelsParameters) {
  auto model = model_from<SeedNet>(initial_state(12, false));
  DataParallel dp(model, nn::cpu_replicas(3));
  const auto mine = model->parameters();
  for (std::size_t r = 1; r < 3; ++r) {
    const auto theirs = dp.replica(r).parameters();
    ASSERT_EQ(theirs.size(), mine.size());
    for (std::size_t i = 0; i < mine.size(); ++i) {
      EXPECT_FALSE(theirs[i].is_same(mine[i]));           // own tensors (own gradients) ...
      EXPECT_EQ(theirs[i].storage(), mine[i].storage());  // ... over the model's values
    }
  }
  EXPECT_EQ(&dp.replica(0), model.get());
}

TEST(DataParallel, BroadcastParameterSyncMatchesSharedAndKeepsReplicasIdentical) {
  const auto init = initial_state(13, false);
  const auto batches = make_batches(6, kBatch, 18);
  const TrainingRun shared = train_dp<SeedNet>(init, batches, nn::cpu_replicas(3));
  auto model = model_from<SeedNet>(init);
  DataParallel dp(model, nn::cpu_replicas(3), {.parameter_sync = ParameterSync::Broadcast});
  optim::SGD opt(model->parameters(), kSgd);
  for (const Batch& b : batches) {
    opt.zero_grad();
    dp.forward_backward(b.x, b.y, cross_entropy_loss);
    dp.step(opt);
  }
  EXPECT_TRUE(states_match(snapshot(*model), shared.state, -1, 0));
  // Copies, refreshed when a cycle begins: after the next forward_backward they equal the model.
  dp.forward_backward(batches[0].x, batches[0].y, cross_entropy_loss);
  for (std::size_t r = 1; r < 3; ++r) {
    const auto theirs = dp.replica(r).parameters();
    const auto mine = model->parameters();
    for (std::size_t i = 0; i < mine.size(); ++i) {
      EXPECT_NE(theirs[i].storage(), mine[i].storage());
      EXPECT_TRUE(bitwise_equal(theirs[i], mine[i])) << "replica " << r << " parameter " << i;
    }
  }
}

TEST(DataParallel, AutoSplitRebalancesAndStaysExact) {
  const auto init = initial_state(14, false);
  const auto batches = make_batches(kSteps, kBatch, 19);
  const TrainingRun ref = train_single<SeedNet>(init, batches);
  auto model = model_from<SeedNet>(init);
  DataParallel dp(
      model, nn::cpu_replicas(2),
      {.split = SplitPolicy::Auto,
       .auto_split = {
           .warmup_steps = 1, .measure_steps = 1, .recheck_every = 0, .min_change = 0.0}});
  optim::SGD opt(model->parameters(), kSgd);
  std::vector<double> losses;
  for (const Batch& b : batches) {
    opt.zero_grad();
    const nn::StepResult r = dp.forward_backward(b.x, b.y, cross_entropy_loss);
    EXPECT_GE(r.devices[0].samples, 1);  // nobody is starved: every device stays measurable
    EXPECT_GE(r.devices[1].samples, 1);
    dp.step(opt);
    losses.push_back(r.loss);
  }
  const auto p = dp.proportions();
  EXPECT_NEAR(p[0] + p[1], 1.0, 1e-12);
  EXPECT_EQ(dp.stats().devices[0].samples + dp.stats().devices[1].samples, kSteps * kBatch);
  EXPECT_TRUE(losses_match(losses, ref.losses, kLossRtol));
  EXPECT_TRUE(states_match(snapshot(*model), ref.state, kWeightRtol, kWeightAtol));
}

struct NetWithUnusedParameter : SeedNet {
  Tensor unused = register_parameter("unused", zeros({3}));
};

TEST(DataParallel, UnusedParametersDoNotBlockTheReduction) {
  manual_seed(15);
  const auto init = snapshot(NetWithUnusedParameter());
  const Batch b = make_batches(1, kBatch, 20)[0];
  auto model = model_from<NetWithUnusedParameter>(init);
  DataParallel dp(model, nn::cpu_replicas(2), {.bucket_bytes = 1});
  dp.forward_backward(b.x, b.y, cross_entropy_loss);
  auto ref = model_from<NetWithUnusedParameter>(init);
  cross_entropy_loss(ref->forward(b.x), b.y).backward();
  EXPECT_FALSE(model->unused.grad().defined());
  EXPECT_TRUE(grads_match(grads_of(*model), grads_of(*ref), 1e-4, 1e-6));
}

struct WideNet : nn::Module {  // no default constructor: replicas come from a factory
  explicit WideNet(std::int64_t hidden)
      : fc1(register_module("fc1", nn::Linear(64, hidden))),
        fc2(register_module("fc2", nn::Linear(hidden, 10))) {}
  nn::Linear fc1, fc2;
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x.flatten(1)))); }
};

TEST(DataParallel, FactoryMakesReplicasOfModelsWithoutADefaultConstructor) {
  manual_seed(16);
  auto model = std::make_shared<WideNet>(32);
  auto ref = std::make_shared<WideNet>(32);
  ref->load_state_dict(model->state_dict());
  const Batch b = make_batches(1, kBatch, 21)[0];
  const GeneratorState before = default_generator().state();
  DataParallel dp(model, nn::cpu_replicas(3), std::function<std::shared_ptr<WideNet>()>([] {
                    return std::make_shared<WideNet>(32);
                  }));
  // Making replicas (which initialises them) leaves the default generator where it was.
  EXPECT_EQ(default_generator().state(), before);
  dp.forward_backward(b.x, b.y, cross_entropy_loss);
  cross_entropy_loss(ref->forward(b.x), b.y).backward();
  EXPECT_TRUE(grads_match(grads_of(*model), grads_of(*ref), 1e-4, 1e-6));
  // A factory building another architecture is caught by the broadcast's checks.
  EXPECT_THROW(DataParallel(std::make_shared<WideNet>(32), nn::cpu_replicas(2),
                            std::function<std::shared_ptr<WideNet>()>(
                                [] { return std::make_shared<WideNet>(16); })),
               Error);
}

TEST(DataParallel, PinnedReplicasComputeTheSameBits) {
  const int replicas = std::min<int>(2, static_cast<int>(parallel::available_cpus().size()));
  const auto init = initial_state(17, false);
  const auto batches = make_batches(4, kBatch, 22);
  const TrainingRun free =
      train_dp<SeedNet>(init, batches, nn::cpu_replicas(replicas), {.threads_per_replica = 1});
  const TrainingRun pinned =
      train_dp<SeedNet>(init, batches, nn::cpu_replicas(replicas),
                        {.threads_per_replica = 1, .pinning = nn::Pinning::Cores});
  EXPECT_TRUE(states_match(pinned.state, free.state, -1, 0));
}

TEST(DataParallel, DefaultThreadsShareTheCores) {
  const int cpus = static_cast<int>(parallel::available_cpus().size());
  for (int replicas : {1, 2, 3}) {
    DataParallel dp(std::make_shared<SeedNet>(), nn::cpu_replicas(replicas));
    EXPECT_EQ(dp.threads_per_replica(), std::max(1, cpus / replicas));
    EXPECT_EQ(dp.stats().threads_per_replica, dp.threads_per_replica());
  }
  DataParallel three(std::make_shared<SeedNet>(), nn::cpu_replicas(2), {.threads_per_replica = 3});
  EXPECT_EQ(three.threads_per_replica(), 3);
}

TEST(DataParallel, RejectsBadDevicesAndOptions) {
  auto model = std::make_shared<SeedNet>();
  auto make = [&](std::vector<Device> devices, DataParallelOptions options = {}) {
    DataParallel dp(model, std::move(devices), std::move(options));
  };
  EXPECT_THROW(make({}), Error);
  EXPECT_THROW(make({Device("cpu:0"), Device("cuda:0")}), Error);
  EXPECT_THROW(make({Device("cpu:1"), Device("cpu:1")}), Error);
  EXPECT_THROW(make(nn::cpu_replicas(2), weighted({1.0})), Error);
  EXPECT_THROW(make(nn::cpu_replicas(2), weighted({1.0, -1.0})), Error);
  EXPECT_THROW(make(nn::cpu_replicas(2), weighted({0.0, 0.0})), Error);
  EXPECT_THROW(make(nn::cpu_replicas(2), {.proportions = {1.0, 1.0}}), Error);  // Even
  EXPECT_THROW(make(nn::cpu_replicas(2), {.accumulate = 0}), Error);
  EXPECT_THROW(make(nn::cpu_replicas(2), {.batchnorm = BatchNormStats::Global, .micro_shard = 4}),
               Error);
  const int too_many = static_cast<int>(parallel::available_cpus().size()) + 1;
  EXPECT_THROW(make(nn::cpu_replicas(too_many), {.pinning = nn::Pinning::Cores}), Error);

  DataParallel dp(model, nn::cpu_replicas(2));
  const Batch b = make_batches(1, 4, 23)[0];
  EXPECT_THROW(dp.forward_backward(b.x, rows_of(b.y, 0, 3), cross_entropy_loss), Error);
  EXPECT_THROW(dp.forward_backward(b.x, b.y, [](const Tensor& out, const Tensor&) { return out; }),
               Error);  // not a scalar
}

TEST(DataParallel, AccountsSamplesAndTimePerDevice) {
  auto model = model_from<SeedNet>(initial_state(18, false));
  DataParallel dp(model, nn::cpu_replicas(2), weighted({3.0, 1.0}));
  optim::SGD opt(model->parameters(), kSgd);
  for (const Batch& b : make_batches(2, kBatch, 24)) {
    const nn::StepResult r = dp.forward_backward(b.x, b.y, cross_entropy_loss);
    ASSERT_EQ(r.devices.size(), 2u);
    EXPECT_EQ(r.devices[0].samples, 18);
    EXPECT_EQ(r.devices[1].samples, 6);
    EXPECT_EQ(r.samples, kBatch);
    for (const auto& d : r.devices) {
      EXPECT_GT(d.forward_s, 0.0);
      EXPECT_GT(d.backward_s, 0.0);
      EXPECT_GE(d.reduction_s, 0.0);
      EXPECT_GE(d.wait_s, 0.0);
    }
    // Each replica's thread allocated its activations and gradients: three times the rows,
    // more memory (both hold a full set of gradients, so not three times as much).
    EXPECT_GT(r.devices[1].peak_bytes, 0u);
    EXPECT_GT(r.devices[0].peak_bytes, r.devices[1].peak_bytes);
    // Exactly one replica completed the (single) bucket last and summed it.
    EXPECT_TRUE((r.devices[0].reduction_s > 0.0) != (r.devices[1].reduction_s > 0.0));
    dp.step(opt);
  }
  const nn::DataParallelStats& s = dp.stats();
  EXPECT_EQ(s.micro_steps, 2);
  EXPECT_EQ(s.optimizer_steps, 2);
  EXPECT_EQ(s.devices[0].samples, 36);
  EXPECT_EQ(s.devices[1].samples, 12);
  EXPECT_EQ(s.devices[1].device, Device("cpu:1"));
  EXPECT_GT(s.devices[0].optimizer_s, 0.0);
  EXPECT_NEAR(s.proportions[0], 0.75, 1e-12);
  const std::string table = nn::format_table(s);
  EXPECT_NE(table.find("cpu:1"), std::string::npos);
  EXPECT_NE(table.find("total"), std::string::npos);
  EXPECT_NE(table.find("75.0"), std::string::npos);  // cpu's share of the samples
  const std::string json = nn::to_json(s);
  EXPECT_NE(json.find("{\"device\":\"cpu:1\",\"samples\":12,"), std::string::npos);
  EXPECT_NE(json.find("\"peak_bytes\":" + std::to_string(s.devices[1].peak_bytes)),
            std::string::npos);
  EXPECT_NE(table.find("peak MiB"), std::string::npos);
  EXPECT_NE(json.find("\"micro_steps\":2"), std::string::npos);
}

}  // namespace
}  // namespace tandem::testing
