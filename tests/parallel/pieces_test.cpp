// The parts of DataParallel on their own: the weighted sum and buckets of the host reducer, the
// replica group's gather and abort, the worker threads, the split helpers and AutoBalancer (fed
// made-up timings, so nothing depends on this machine's speed).
#include <omp.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "tandem/ops/ops.h"
#include "tandem/parallel/reducer.h"
#include "tandem/parallel/replica_group.h"
#include "tandem/parallel/replica_threads.h"
#include "tandem/parallel/split.h"
#include "tandem/tensor/factories.h"

namespace tandem::parallel {
namespace {

TEST(WeightedSum, OneTimesGIsGBitForBit) {
  const std::vector<float> g{1.5f, -0.0f, 3.25e-30f, -7.0f};
  std::vector<float> out(4);
  weighted_sum<float>(out.data(), nullptr, {g.data()}, {1.0}, 4);
  for (std::size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(std::signbit(out[i]), std::signbit(g[i]));
    EXPECT_EQ(out[i], g[i]);
  }
}

TEST(WeightedSum, SumsInDoubleInTheGivenOrderWithABase) {
  // 0.75 * a + 0.25 * b + base, per element, rounded once; out may alias a source.
  std::vector<float> a(3000), b(3000), base(3000);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = 1.0f + static_cast<float>(i) * 1e-3f;
    b[i] = -2.0f + static_cast<float>(i) * 3e-4f;
    base[i] = 0.125f;
  }
  std::vector<float> expected(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    expected[i] = static_cast<float>(0.125 + 0.75 * static_cast<double>(a[i]) +
                                     0.25 * static_cast<double>(b[i]));
  }
  weighted_sum<float>(a.data(), base.data(), {a.data(), b.data()}, {0.75, 0.25},
                      static_cast<std::int64_t>(a.size()));
  EXPECT_EQ(a, expected);
}

TEST(Buckets, CloseOnceTheyHoldTheLimit) {
  // Parameters of 400, 400, 800, 100 bytes taken in reverse order with a 500-byte limit.
  const auto buckets = make_buckets({3, 2, 1, 0}, {400, 400, 800, 100}, 500);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0], (std::vector<std::size_t>{3, 2}));  // 100, then 800 closes it
  EXPECT_EQ(buckets[1], (std::vector<std::size_t>{1, 0}));  // 400 + 400
}

// Two replicas' gradients for a 150,001-element and a 7-element parameter (several chunks), the
// expected 0.25 * g0 + 0.75 * g1 per element, and replica 0's parameters to compare with.
struct TwoReplicas {
  std::vector<std::vector<Tensor>> params;
  std::vector<std::vector<std::vector<Tensor>>> stored{2};
  std::vector<std::vector<float>> expected;
  TwoReplicas() {
    Generator g(3);
    params.resize(2);
    for (std::int64_t n : {150001, 7}) {
      Tensor grads[2];
      for (std::size_t r = 0; r < 2; ++r) {
        params[r].push_back(zeros({n}));
        grads[r] = randn({n}, {}, &g);
        params[r].back().set_grad(grads[r]);
      }
      std::vector<float> e(static_cast<std::size_t>(n));
      for (std::int64_t k = 0; k < n; ++k) {
        e[static_cast<std::size_t>(k)] =
            static_cast<float>(0.25 * static_cast<double>(grads[0].data<float>()[k]) +
                               0.75 * static_cast<double>(grads[1].data<float>()[k]));
      }
      expected.push_back(std::move(e));
    }
  }
  ReductionPlan plan() const {
    return {.contributions = {{.replica = 0, .coeff = 0.25}, {.replica = 1, .coeff = 0.75}},
            .base = {Tensor(), Tensor()}};
  }
  // Replica r's whole backward: both hooks (the last parameter's first), then its end.
  static void backward(HostReducer& reducer, std::size_t r) {
    reducer.arm(r);
    reducer.grad_ready(r, 1);
    reducer.grad_ready(r, 0);
    reducer.finish(r);
  }
  // Both replicas run the waiting sum chunks at once, from two threads; chunks run by each.
  static std::array<int, 2> help_from_two_threads(HostReducer& reducer) {
    std::array<int, 2> chunks{0, 0};
    std::thread other([&] {
      while (reducer.help(1)) ++chunks[1];
    });
    while (reducer.help(0)) ++chunks[0];
    other.join();
    return chunks;
  }
  void check() const {
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const Tensor out = params[0][i].grad();
      const std::vector<float> got(out.data<float>(), out.data<float>() + out.numel());
      EXPECT_EQ(got, expected[i]) << "parameter " << i;
    }
  }
};

TEST(HostReducer, DeferredSumsAreRunByTheReplicasThatHelpAndMatchTheWeightedSum) {
  TwoReplicas t;
  HostReducer reducer(t.params, t.stored, 16);  // one bucket per parameter
  ASSERT_TRUE(reducer.deferred());
  reducer.begin(t.plan());
  // Replica 0 ends its backward first: nothing is ready until replica 1 completes the buckets.
  reducer.arm(0);
  reducer.grad_ready(0, 1);
  reducer.grad_ready(0, 0);
  reducer.finish(0);
  EXPECT_FALSE(reducer.help(0));
  EXPECT_FALSE(reducer.all_set_up());
  reducer.arm(1);
  reducer.grad_ready(1, 1);
  reducer.grad_ready(1, 0);  // completes both buckets: set up, nothing summed yet
  EXPECT_TRUE(reducer.all_set_up());
  EXPECT_FALSE(reducer.all_reduced());
  reducer.finish(1);
  const std::array<int, 2> chunks = TwoReplicas::help_from_two_threads(reducer);
  EXPECT_EQ(chunks[0] + chunks[1], 4);  // 150,001 elements in chunks of 65,536, and 7
  EXPECT_TRUE(reducer.all_reduced());
  EXPECT_GT(reducer.reduce_seconds(0) + reducer.reduce_seconds(1), 0.0);
  t.check();
}

TEST(HostReducer, EagerWithACallbackSumsEachBucketOnTheLastReplicaAndHandsItOn) {
  TwoReplicas t;
  std::vector<std::int64_t> handed;  // numel of each bucket's parameter, in order
  HostReducer reducer(t.params, t.stored, 16, [&](const std::vector<Tensor>& masters) {
    ASSERT_EQ(masters.size(), 1u);
    handed.push_back(masters[0].numel());
  });
  ASSERT_FALSE(reducer.deferred());
  reducer.begin(t.plan());
  reducer.arm(0);
  reducer.arm(1);
  reducer.grad_ready(0, 1);
  reducer.grad_ready(1, 1);  // the last replica for bucket 0 (parameter 1) sums it at once
  EXPECT_EQ(handed, (std::vector<std::int64_t>{7}));
  reducer.finish(0);
  reducer.finish(1);  // completes parameter 0's bucket, with nothing: its hook never came
  EXPECT_EQ(handed, (std::vector<std::int64_t>{7, 150001}));
  EXPECT_FALSE(reducer.help(0));
  EXPECT_TRUE(reducer.all_reduced());
  t.check();
}

TEST(HostReducer, StagedReplicasAreSummedFromTheCopiesTakenWhenTheyCompletedABucket) {
  // The GPU path, on host tensors: every replica staged, the master's .grad written at the end.
  TwoReplicas t;
  HostReducer reducer(t.params, t.stored, 16, nullptr, {true, true});
  ASSERT_TRUE(reducer.deferred());
  reducer.begin(t.plan());
  TwoReplicas::backward(reducer, 0);
  // Replica 0's backward goes on writing its .grad: the sums must use what it had staged.
  for (const Tensor& p : t.params[0]) ops::fill_(p.grad(), std::nan(""));
  TwoReplicas::backward(reducer, 1);
  TwoReplicas::help_from_two_threads(reducer);
  ASSERT_TRUE(reducer.all_reduced());
  t.check();  // the unstaged path's sums, bit for bit
}

TEST(HostReducer, AStagedMasterAddsTheCycleBaseAndReceivesTheSumByCopy) {
  TwoReplicas t;
  HostReducer reducer(t.params, t.stored, 1 << 20, nullptr, {true, false});  // one bucket
  ReductionPlan plan = t.plan();
  plan.base = {full({150001}, 0.5), full({7}, -2.0)};
  reducer.begin(plan);
  TwoReplicas::backward(reducer, 0);
  TwoReplicas::backward(reducer, 1);
  TwoReplicas::help_from_two_threads(reducer);
  ASSERT_TRUE(reducer.all_reduced());
  const double base[] = {0.5, -2.0};
  for (std::size_t i = 0; i < 2; ++i) {
    const Tensor got = t.params[0][i].grad();
    ASSERT_EQ(got.numel(), static_cast<std::int64_t>(t.expected[i].size()));
    for (std::int64_t k = 0; k < got.numel(); k += 997) {
      // base + 0.25 g0 + 0.75 g1 in double: the expected float sum plus the base, within rounding.
      EXPECT_NEAR(got.data<float>()[k], base[i] + t.expected[i][static_cast<std::size_t>(k)],
                  1e-5)
          << "parameter " << i << " element " << k;
    }
  }
}

TEST(ReplicaGroup, GathersInReplicaOrderAcrossThreads) {
  ReplicaGroup group(3);
  group.begin_step({true, false, true});  // replica 1 sits this step out
  std::vector<std::vector<std::vector<double>>> seen(3);
  std::thread t2([&] { seen[2] = group.all_gather(2, {20.0, 21.0}); });
  seen[0] = group.all_gather(0, {0.0});
  t2.join();
  const std::vector<std::vector<double>> expected{{0.0}, {20.0, 21.0}};
  EXPECT_EQ(seen[0], expected);
  EXPECT_EQ(seen[2], expected);
  EXPECT_THROW(group.all_gather(1, {1.0}), Error);  // not active in this step
}

TEST(ReplicaGroup, AbortWakesWaitersAndLaterCalls) {
  ReplicaGroup group(2);
  group.begin_step({true, true});
  std::atomic<bool> aborted{false};
  std::thread waiter([&] {
    try {
      group.all_gather(0, {1.0});  // replica 1 never comes
    } catch (const ReplicaAborted&) {
      aborted = true;
    }
  });
  group.abort();
  waiter.join();
  EXPECT_TRUE(aborted);
  EXPECT_THROW(group.all_gather(1, {1.0}), ReplicaAborted);
  EXPECT_THROW(group.check_not_aborted(), ReplicaAborted);
  group.begin_step({true, true});  // a new step starts clean
  EXPECT_NO_THROW(group.check_not_aborted());
}

TEST(ReplicaThreads, RunsATaskOnEveryThreadAndReturnsTheirExceptions) {
  ReplicaThreads threads({{.threads = 1}, {.threads = 1}, {.threads = 1}});
  std::vector<std::thread::id> ids(3);
  for (int round = 0; round < 3; ++round) {
    auto errors = threads.run([&](std::size_t i) {
      ids[i] = std::this_thread::get_id();
      if (i == 1 && round == 1) throw std::runtime_error("replica 1 failed");
    });
    ASSERT_EQ(errors.size(), 3u);
    EXPECT_FALSE(errors[0]);
    EXPECT_EQ(static_cast<bool>(errors[1]), round == 1);
    EXPECT_FALSE(errors[2]);
  }
  // Persistent: distinct threads, none of them this one.
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_NE(ids[1], ids[2]);
  EXPECT_NE(ids[0], std::this_thread::get_id());
  EXPECT_THROW(ReplicaThreads(std::vector<ThreadSetup>{{.threads = 0}}), Error);
}

TEST(ReplicaThreads, TheCallerRunsTaskZeroWithItsReplicasThreadCount) {
  const int before = omp_get_max_threads();
  ReplicaThreads threads({{.threads = 1}, {.threads = 1}}, CallerRole::RunsFirst);
  EXPECT_EQ(threads.size(), 2u);
  std::vector<std::thread::id> ids(2);
  std::vector<int> omp(2);
  for (int round = 0; round < 4; ++round) {
    auto errors = threads.run([&](std::size_t i) {
      ids[i] = std::this_thread::get_id();
      omp[i] = omp_get_max_threads();
      if (i == 0 && round == 1) throw std::runtime_error("replica 0 failed");
      if (i == 1 && round == 2) throw std::runtime_error("replica 1 failed");
    });
    ASSERT_EQ(errors.size(), 2u);
    EXPECT_EQ(static_cast<bool>(errors[0]), round == 1);
    EXPECT_EQ(static_cast<bool>(errors[1]), round == 2);
    EXPECT_EQ(ids[0], std::this_thread::get_id());
    EXPECT_NE(ids[1], std::this_thread::get_id());
    EXPECT_EQ(omp, (std::vector<int>{1, 1}));
    EXPECT_EQ(omp_get_max_threads(), before);  // the caller's own count is restored
  }
  // A task that outlasts the spin: the caller sleeps and is woken by the last worker.
  auto errors = threads.run([&](std::size_t i) {
    if (i == 1) std::this_thread::sleep_for(ReplicaThreads::kSpin * 5);
  });
  EXPECT_FALSE(errors[0] || errors[1]);
  EXPECT_THROW(ReplicaThreads({{.threads = 1, .cpus = {0}}}, CallerRole::RunsFirst), Error);
}

TEST(Split, AtLeastOneSampleEachWhenTheBatchAllows) {
  const auto shares = split_at_least_one(10, {0.98, 0.01, 0.01});
  EXPECT_EQ(shares.counts, (std::vector<std::int64_t>{8, 1, 1}));
  EXPECT_EQ(shares.offsets, (std::vector<std::int64_t>{0, 8, 9}));
  const auto small = split_at_least_one(2, {0.5, 0.25, 0.25});  // fewer rows than devices
  EXPECT_EQ(small.counts[0] + small.counts[1] + small.counts[2], 2);
}

TEST(Split, BalancedProportionsFollowThroughput) {
  // Device 1 takes twice as long per sample: it gets a third of the batch.
  const auto p = balanced_proportions({32, 32}, {1.0, 2.0}, {0.5, 0.5});
  EXPECT_NEAR(p[0], 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(p[1], 1.0 / 3.0, 1e-12);
  // A device without a measurement keeps its share; the others divide the rest.
  const auto q = balanced_proportions({10, 0, 30}, {1.0, 0.0, 1.0}, {0.25, 0.5, 0.25});
  EXPECT_NEAR(q[1], 0.5, 1e-12);
  EXPECT_NEAR(q[0], 0.125, 1e-12);
  EXPECT_NEAR(q[2], 0.375, 1e-12);
}

TEST(AutoBalancer, WarmsUpMeasuresRebalancesAndRechecks) {
  AutoBalancer b(2,
                 {.warmup_steps = 1, .measure_steps = 2, .recheck_every = 3, .min_change = 0.01});
  // Device 1 is three times slower per sample.
  auto step = [&](std::int64_t n0, std::int64_t n1, bool boundary = true) {
    return b.record({n0, n1}, {1e-3 * static_cast<double>(n0), 3e-3 * static_cast<double>(n1)},
                    boundary);
  };
  EXPECT_FALSE(step(100, 100));  // warm-up, not measured
  EXPECT_FALSE(step(16, 16));    // first of two measured steps
  EXPECT_TRUE(step(16, 16));     // measured: re-balance to 3:1
  EXPECT_NEAR(b.proportions()[0], 0.75, 1e-12);
  EXPECT_FALSE(step(24, 8));  // three steps until the next check
  EXPECT_FALSE(step(24, 8));
  EXPECT_FALSE(step(24, 8));
  EXPECT_FALSE(step(24, 8));
  EXPECT_FALSE(step(24, 8));  // measured again: already balanced, nothing moves
  EXPECT_NEAR(b.proportions()[0], 0.75, 1e-12);
  // Not at a cycle boundary: the measurement waits for one.
  AutoBalancer c(2, {.warmup_steps = 0, .measure_steps = 1, .recheck_every = 0, .min_change = 0.0});
  EXPECT_FALSE(c.record({10, 10}, {1.0, 3.0}, false));
  EXPECT_TRUE(c.record({10, 10}, {1.0, 3.0}, true));
  EXPECT_NEAR(c.proportions()[0], 0.75, 1e-12);
}

// Windows that scatter around a 3:1 speed ratio (device 1 measured 2 and then 4 times slower per
// sample, alternately): the running times settle the split once, where each window alone would
// move it every time.
TEST(AutoBalancer, SmoothsNoisyWindowsInsteadOfChasingThem) {
  const auto changes = [](double smoothing, double* last) {
    AutoBalancer b(2, {.warmup_steps = 0, .measure_steps = 1, .recheck_every = 0,
                       .smoothing = smoothing, .min_change = 0.025});
    int moved = 0;
    for (int k = 0; k < 40; ++k) {
      const auto shares = split_at_least_one(64, b.proportions());
      const double slower = k % 2 == 0 ? 2e-3 : 4e-3;
      moved += b.record(shares.counts,
                        {1e-3 * static_cast<double>(shares.counts[0]),
                         slower * static_cast<double>(shares.counts[1])},
                        true);
    }
    *last = b.proportions()[0];
    return moved;
  };
  double smoothed = 0, alone = 0;
  EXPECT_LE(changes(0.25, &smoothed), 3);
  EXPECT_NEAR(smoothed, 0.75, 0.01);
  EXPECT_EQ(changes(1.0, &alone), 40);  // 2/3 and 4/5 in turn
}

// Equal devices keep the even split; when device 0 turns three times slower for good, the split
// follows within a dozen windows.
TEST(AutoBalancer, FollowsALastingChange) {
  AutoBalancer b(2, {.warmup_steps = 0, .measure_steps = 1, .recheck_every = 0});
  auto window = [&](double per_sample0) {
    const auto shares = split_at_least_one(64, b.proportions());
    b.record(shares.counts,
             {per_sample0 * static_cast<double>(shares.counts[0]),
              1e-3 * static_cast<double>(shares.counts[1])},
             true);
  };
  for (int k = 0; k < 10; ++k) window(1e-3);
  EXPECT_DOUBLE_EQ(b.proportions()[0], 0.5);
  for (int k = 0; k < 12; ++k) window(3e-3);
  EXPECT_LT(b.proportions()[0], 0.30);
  EXPECT_GT(b.proportions()[0], 0.24);
}

TEST(AutoBalancer, RefusesASmoothingOutsideZeroToOne) {
  for (double smoothing : {0.0, -0.5, 1.5}) {
    EXPECT_THROW(AutoBalancer(2, {.smoothing = smoothing}), Error) << smoothing;
  }
  EXPECT_NO_THROW(AutoBalancer(2, {.smoothing = 1.0}));
}

}  // namespace
}  // namespace tandem::parallel
