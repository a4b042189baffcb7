// Tests of the samplers (sequential, random, distributed with pad and drop) and of the weighted
// split of a global batch into per-device shares.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "data_test_util.h"

namespace tandem::data {
namespace {

using testing::error_of;

std::vector<std::int64_t> sorted(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<std::int64_t> range(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), std::int64_t{0});
  return v;
}

TEST(Sampler, SequentialAndRandom) {
  EXPECT_EQ(SequentialSampler(5).indices(3, 9), range(5));
  RandomSampler r(100);
  const auto e0 = r.indices(0, 1);
  EXPECT_EQ(sorted(e0), range(100));
  EXPECT_EQ(r.indices(0, 1), e0);  // a pure function of (epoch, seed)
  EXPECT_NE(r.indices(1, 1), e0);  // a new order every epoch
  EXPECT_NE(r.indices(0, 2), e0);  // and per seed
  EXPECT_NE(e0, range(100));
  EXPECT_TRUE(RandomSampler(0).indices(0, 0).empty());
}

TEST(Sampler, PermutationIsUniform) {
  // Position of element 0 over 6000 permutations of 6: 1000 per position expected.
  std::vector<int> where(6, 0);
  for (int e = 0; e < 6000; ++e) {
    const auto p = permutation(6, 42, e);
    ++where[static_cast<std::size_t>(std::find(p.begin(), p.end(), 0) - p.begin())];
  }
  for (int count : where) {
    EXPECT_GT(count, 850);
    EXPECT_LT(count, 1150);
  }
}

TEST(DistributedSampler, PadGivesEveryRankCeilAndCoversAll) {
  const std::int64_t n = 10, w = 3;
  for (bool shuffle : {false, true}) {
    std::vector<std::int64_t> all;
    for (std::int64_t r = 0; r < w; ++r) {
      DistributedSampler s(n, {.rank = r, .world_size = w, .shuffle = shuffle, .tail = Tail::Pad});
      EXPECT_EQ(s.size(), 4);
      const auto idx = s.indices(2, 7);
      EXPECT_EQ(static_cast<std::int64_t>(idx.size()), 4);
      all.insert(all.end(), idx.begin(), idx.end());
    }
    // 12 slots over 10 samples: every sample once, two of them twice (the padding).
    const std::set<std::int64_t> distinct(all.begin(), all.end());
    EXPECT_EQ(distinct.size(), 10u);
    EXPECT_EQ(all.size(), 12u);
  }
  DistributedSampler s1(10, {.rank = 1, .world_size = 3, .shuffle = false});
  EXPECT_EQ(s1.indices(0, 0), (std::vector<std::int64_t>{1, 4, 7, 0}));
}

TEST(DistributedSampler, DropGivesDisjointFloorShards) {
  const std::int64_t n = 10, w = 4;
  std::vector<std::int64_t> all;
  for (std::int64_t r = 0; r < w; ++r) {
    DistributedSampler s(n, {.rank = r, .world_size = w, .shuffle = true, .tail = Tail::Drop});
    EXPECT_EQ(s.size(), 2);
    const auto idx = s.indices(5, 3);
    all.insert(all.end(), idx.begin(), idx.end());
  }
  EXPECT_EQ(std::set<std::int64_t>(all.begin(), all.end()).size(), 8u);  // disjoint
  // The same epoch order on every rank, changing with the epoch.
  DistributedSampler r0(n, {.rank = 0, .world_size = w});
  EXPECT_NE(r0.indices(0, 3), r0.indices(1, 3));
  EXPECT_EQ(r0.indices(1, 3), r0.indices(1, 3));
}

TEST(DistributedSampler, SmallDatasetsAndErrors) {
  DistributedSampler pad(2, {.rank = 4, .world_size = 5, .shuffle = false});
  EXPECT_EQ(pad.indices(0, 0), (std::vector<std::int64_t>{0}));  // wraps around
  DistributedSampler drop(2, {.rank = 4, .world_size = 5, .tail = Tail::Drop});
  EXPECT_TRUE(drop.indices(0, 0).empty());
  EXPECT_TRUE(DistributedSampler(0, {.rank = 0, .world_size = 2}).indices(0, 0).empty());
  TANDEM_EXPECT_ERROR_HAS(error_of([] { DistributedSampler(5, {.rank = 2, .world_size = 2}); }),
                          "rank 2 is outside [0, 2)");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { DistributedSampler(5, {.rank = 0, .world_size = 0}); }),
                          "world_size 0");
}

TEST(SplitBatch, LargestRemainder) {
  auto shares = split_batch(64, std::vector<double>{1, 1, 1});
  EXPECT_EQ(shares.counts, (std::vector<std::int64_t>{22, 21, 21}));
  EXPECT_EQ(shares.offsets, (std::vector<std::int64_t>{0, 22, 43}));
  EXPECT_DOUBLE_EQ(shares.weight(0), 22.0 / 64.0);
  EXPECT_EQ(split_batch(64, std::vector<double>{2, 1}).counts, (std::vector<std::int64_t>{43, 21}));
  // 5, 2.5, 2.5: one left over, a tie, to the lower index.
  EXPECT_EQ(split_batch(10, std::vector<double>{0.5, 0.25, 0.25}).counts,
            (std::vector<std::int64_t>{5, 3, 2}));
  // 5.25, 0, 1.75: the left-over sample goes to the largest fraction (0.75).
  EXPECT_EQ(split_batch(7, std::vector<double>{3, 0, 1}).counts,
            (std::vector<std::int64_t>{5, 0, 2}));
  EXPECT_EQ(split_batch(3, std::vector<double>{1, 1, 1, 1, 1}).counts,
            (std::vector<std::int64_t>{1, 1, 1, 0, 0}));
  EXPECT_EQ(split_batch(0, std::vector<double>{1, 2}).counts, (std::vector<std::int64_t>{0, 0}));
}

TEST(SplitBatch, AlwaysSumsToTheBatchWithinOneOfTheQuota) {
  Generator g(123);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::int64_t batch = g.randint(0, 1000);
    std::vector<double> p(static_cast<std::size_t>(g.randint(1, 9)));
    for (double& v : p) v = g.randint(0, 4) == 0 ? 0.0 : g.uniform_double() * 10;
    if (std::accumulate(p.begin(), p.end(), 0.0) == 0.0) p[0] = 1.0;
    const BatchShares s = split_batch(batch, p);
    const double sum = std::accumulate(p.begin(), p.end(), 0.0);
    EXPECT_EQ(std::accumulate(s.counts.begin(), s.counts.end(), std::int64_t{0}), batch);
    for (std::size_t i = 0; i < p.size(); ++i) {
      EXPECT_LT(std::abs(static_cast<double>(s.counts[i]) - batch * p[i] / sum), 1.0);
      if (p[i] == 0.0) {
        EXPECT_EQ(s.counts[i], 0);
      }
    }
  }
}

TEST(SplitBatch, ErrorsAndViews) {
  TANDEM_EXPECT_ERROR_HAS(error_of([] {
                            split_batch(8, std::vector<double>{1, -1});
                          }),
                          "proportion 1 = -1");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { split_batch(8, std::vector<double>{0, 0}); }), "all zero");
  TANDEM_EXPECT_ERROR_HAS(error_of([] { split_batch(8, std::vector<double>{}); }),
                          "no proportions");
  Batch b{arange(0, 10, 1, {.dtype = DType::Float32}), arange(0, 5, 1, {.dtype = DType::Int64})};
  b.data = make_view(b.data, {5, 2}, {2, 1}, 0);
  const auto parts = split(b, split_batch(5, std::vector<double>{3, 2}));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].data.shape(), (Shape{3, 2}));
  EXPECT_EQ(parts[1].data.to_vector<float>(), (std::vector<float>{6, 7, 8, 9}));
  EXPECT_EQ(parts[1].target.to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 4}));
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { split(b, split_batch(6, std::vector<double>{1})); }),
                          "do not hold the 6 samples");
}

}  // namespace
}  // namespace tandem::data
