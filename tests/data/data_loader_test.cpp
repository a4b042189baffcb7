// Tests of the DataLoader: batching and drop_last, shuffling that changes per epoch and does not
// depend on num_workers, in-order delivery, the bounded queue, worker errors, early exits and
// destruction without hangs or leaked threads, resuming mid-epoch, pinned-memory hooks, and
// distributed shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "data_test_util.h"
#include "tandem/device/cuda/discovery.h"

namespace tandem::data {
namespace {

using testing::error_of;
using testing::thread_count;

// n samples; sample i is (2) float32 {i, i + 0.5}, label i % 7. Optionally fails at one index,
// sleeps (to jumble the order in which workers finish) and counts calls.
struct IndexDataset : Dataset {
  std::int64_t n = 100;
  std::int64_t fail_at = -1;
  bool jitter = false;
  mutable std::atomic<int> batches_started{0};
  IndexDataset() = default;
  IndexDataset(const IndexDataset& o) : Dataset(o), n(o.n), fail_at(o.fail_at), jitter(o.jitter) {}
  std::int64_t size() const override { return n; }
  Example get(std::int64_t i) const override {
    if (i == fail_at) throw std::runtime_error("disk on fire");
    if (jitter && i % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200 * (i % 5)));
    return {
        from_vector(std::vector<float>{static_cast<float>(i), static_cast<float>(i) + 0.5f}, {2}),
        scalar_tensor(static_cast<double>(i % 7), {.dtype = DType::Int64})};
  }
  Batch get_batch(std::span<const std::int64_t> indices,
                  const BatchAllocator& alloc) const override {
    ++batches_started;
    return Dataset::get_batch(indices, alloc);
  }
};

// The first column of every batch's data (the sample indices), batch by batch.
std::vector<std::vector<std::int64_t>> epoch_indices(DataLoader& loader) {
  std::vector<std::vector<std::int64_t>> out;
  for (auto& [data, target] : loader) {
    std::vector<std::int64_t> idx;
    const auto v = data.to_vector<float>();
    for (std::size_t k = 0; k < v.size(); k += 2) idx.push_back(static_cast<std::int64_t>(v[k]));
    const auto t = target.to_vector<std::int64_t>();
    for (std::size_t k = 0; k < idx.size(); ++k) EXPECT_EQ(t[k], idx[k] % 7);
    out.push_back(idx);
  }
  return out;
}

std::vector<std::int64_t> flatten(const std::vector<std::vector<std::int64_t>>& batches) {
  std::vector<std::int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

TEST(DataLoader, SequentialBatchesAndDropLast) {
  auto ds = std::make_shared<IndexDataset>();
  ds->n = 10;
  DataLoader loader(ds, {.batch_size = 4});
  EXPECT_EQ(loader.size(), 3);
  const auto batches = epoch_indices(loader);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(batches[2], (std::vector<std::int64_t>{8, 9}));
  DataLoader dropping(ds, {.batch_size = 4, .drop_last = true, .num_workers = 2});
  EXPECT_EQ(dropping.size(), 2);
  EXPECT_EQ(flatten(epoch_indices(dropping)), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(DataLoader, BatchTensorsAreContiguousWithTheRightTypes) {
  DataLoader loader(SyntheticDataset({.shape = {1, 28, 28}, .classes = 10, .count = 130}),
                    {.batch_size = 64, .transforms = {ToFloat(), Normalize({0.5f}, {0.5f})}});
  std::vector<std::int64_t> sizes;
  for (auto& [data, target] : loader) {
    EXPECT_TRUE(data.is_contiguous());
    EXPECT_EQ(data.dtype(), DType::Float32);
    EXPECT_EQ(target.dtype(), DType::Int64);
    EXPECT_EQ(data.size(0), target.size(0));
    EXPECT_EQ(data.shape(), (Shape{data.size(0), 1, 28, 28}));
    sizes.push_back(data.size(0));
  }
  EXPECT_EQ(sizes, (std::vector<std::int64_t>{64, 64, 2}));
}

TEST(DataLoader, ShuffleChangesEveryEpochAndIgnoresWorkerCount) {
  auto ds = std::make_shared<IndexDataset>();
  ds->jitter = true;
  std::vector<std::vector<std::vector<std::int64_t>>> runs;  // [workers][epoch] flattened
  for (int workers : {0, 1, 3}) {
    DataLoader loader(ds, {.batch_size = 8, .shuffle = true, .num_workers = workers, .seed = 5});
    std::vector<std::vector<std::int64_t>> epochs;
    epochs.reserve(3);
    for (int e = 0; e < 3; ++e) epochs.push_back(flatten(epoch_indices(loader)));
    runs.push_back(epochs);
  }
  std::vector<std::int64_t> all(100);
  std::iota(all.begin(), all.end(), std::int64_t{0});
  for (const auto& epochs : runs) {
    EXPECT_EQ(epochs, runs[0]);
    for (const auto& e : epochs) {
      auto s = e;
      std::sort(s.begin(), s.end());
      EXPECT_EQ(s, all);
    }
  }
  EXPECT_NE(runs[0][0], runs[0][1]);
  EXPECT_NE(runs[0][1], runs[0][2]);
  EXPECT_NE(runs[0][0], all);
  EXPECT_EQ(runs[0][1], permutation(100, 5, 1));
}

TEST(DataLoader, RandomTransformsAreTheSameForAnyWorkerCount) {
  const SyntheticDataset ds({.shape = {3, 12, 12}, .classes = 5, .count = 200, .seed = 1});
  std::vector<std::vector<float>> runs;
  for (int workers : {0, 2, 4}) {
    DataLoader loader(ds, {.batch_size = 16,
                           .shuffle = true,
                           .num_workers = workers,
                           .seed = 77,
                           .transforms = {RandomCrop(10, 2), RandomHorizontalFlip(), ToFloat()}});
    std::vector<float> all;
    for (int e = 0; e < 2; ++e) {
      for (auto& batch : loader) {
        const auto v = batch.data.to_vector<float>();
        all.insert(all.end(), v.begin(), v.end());
      }
    }
    runs.push_back(all);
  }
  ASSERT_EQ(runs[0].size(), 2u * 200 * 3 * 10 * 10);
  EXPECT_EQ(runs[1], runs[0]);
  EXPECT_EQ(runs[2], runs[0]);
}

TEST(DataLoader, QueueIsBounded) {
  auto ds = std::make_shared<IndexDataset>();
  DataLoader loader(ds, {.batch_size = 2, .num_workers = 2, .prefetch_factor = 1});
  auto it = loader.begin();  // batch 0 delivered; batches 1 and 2 may be built, not 3
  while (ds->batches_started.load() < 3) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ds->batches_started.load(), 3);
  ++it;  // batch 1 taken: batch 3 may start
  while (ds->batches_started.load() < 4) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ds->batches_started.load(), 4);
  EXPECT_EQ((*it).data.at({0, 0}), 2.0);
}

TEST(DataLoader, WorkerErrorNamesTheSampleAfterEarlierBatches) {
  for (int workers : {0, 1, 3}) {
    auto ds = std::make_shared<IndexDataset>();
    ds->fail_at = 37;
    DataLoader loader(ds, {.batch_size = 8, .num_workers = workers});
    for (int epoch = 0; epoch < 2; ++epoch) {
      int delivered = 0;
      try {
        for (auto& batch : loader) {
          EXPECT_EQ(batch.data.at({0, 0}), 8.0 * delivered);
          ++delivered;
        }
        FAIL() << "no error with " << workers << " workers";
      } catch (const SampleError& e) {
        EXPECT_EQ(e.index(), 37);
        TANDEM_EXPECT_ERROR_HAS(e.what(), "epoch " + std::to_string(epoch), "batch 4", "sample 37",
                                "disk on fire");
      }
      EXPECT_EQ(delivered, 4) << workers << " workers";
    }
  }
}

TEST(DataLoader, TransformErrorsNameTheBatch) {
  DataLoader loader(std::make_shared<IndexDataset>(),
                    {.batch_size = 8, .num_workers = 2, .transforms = {ToFloat()}});
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { loader.begin(); }), "data loader: epoch 0, batch 0",
                          "positions 0..7", "ToFloat: expects uint8 data, got float32");
}

TEST(DataLoader, BreakingOutAndDestroyingMidEpochLeaveNoThreads) {
  // A runtime that adds a helper thread when the first thread starts (ThreadSanitizer's) has
  // done so before the count is taken.
  std::thread([] {}).join();
  const std::size_t before = thread_count();
  auto ds =
      std::make_shared<SyntheticDataset>(SyntheticOptions{.shape = {1, 28, 28}, .count = 5000});
  {
    DataLoader loader(ds, {.batch_size = 16, .shuffle = true, .num_workers = 4});
    for (int round = 0; round < 20; ++round) {
      int n = 0;
      for (auto& batch : loader) {
        EXPECT_EQ(batch.data.size(0), 16);
        if (++n == 3) break;
      }
    }
    EXPECT_EQ(loader.state(), (LoaderState{.epoch = 20, .batch = 0, .seed = 0}));
    auto it = loader.begin();  // left running when the loader dies
    EXPECT_GT(thread_count(), before);
  }
  EXPECT_EQ(thread_count(), before);
  {
    // The loader goes while an iterator still refers to it: the iterator just reads as finished.
    auto loader =
        std::make_unique<DataLoader>(ds, DataLoaderOptions{.batch_size = 16, .num_workers = 3});
    auto it = loader->begin();
    loader.reset();
    EXPECT_EQ(thread_count(), before);
    ++it;
    EXPECT_TRUE(it == std::default_sentinel);
  }
  EXPECT_EQ(thread_count(), before);
}

TEST(DataLoader, ResumedRunSeesTheSameBatchesAsAnUninterruptedOne) {
  const SyntheticDataset ds({.shape = {1, 6, 6}, .classes = 3, .count = 90, .seed = 2});
  const DataLoaderOptions options{
      .batch_size = 8,
      .shuffle = true,
      .num_workers = 2,
      .seed = 31,
      .transforms = {RandomCrop(6, 1), RandomHorizontalFlip(), ToFloat()}};
  auto record = [](DataLoader& loader, std::vector<std::vector<float>>& out, int stop_after = -1) {
    int n = 0;
    for (auto& [data, target] : loader) {
      std::vector<float> v = data.to_vector<float>();
      for (auto t : target.to_vector<std::int64_t>()) v.push_back(static_cast<float>(t));
      out.push_back(v);
      if (++n == stop_after) return loader.state();
    }
    return loader.state();
  };
  std::vector<std::vector<float>> uninterrupted;
  {
    DataLoader loader(ds, options);
    for (int e = 0; e < 3; ++e) record(loader, uninterrupted);
    EXPECT_EQ(loader.state(), (LoaderState{.epoch = 3, .batch = 0, .seed = 31}));
  }
  ASSERT_EQ(uninterrupted.size(), 36u);  // 12 batches per epoch
  std::vector<std::vector<float>> resumed;
  LoaderState saved;
  {
    DataLoader first(ds, options);
    record(first, resumed);
    saved = record(first, resumed, 5);  // epoch 1, stopped (checkpointed) after 5 batches
  }
  EXPECT_EQ(saved, (LoaderState{.epoch = 1, .batch = 5, .seed = 31}));
  {
    DataLoader second(ds, {.batch_size = 8,
                           .shuffle = true,
                           .num_workers = 0,
                           .seed = 999,
                           .transforms = {RandomCrop(6, 1), RandomHorizontalFlip(), ToFloat()}});
    second.load_state(saved);  // the saved seed wins over the options'
    record(second, resumed);
    record(second, resumed);
  }
  EXPECT_EQ(resumed, uninterrupted);
}

TEST(DataLoader, LoadStateEdges) {
  auto ds = std::make_shared<IndexDataset>();
  DataLoader loader(ds, {.batch_size = 10, .shuffle = true});
  loader.load_state({.epoch = 4, .batch = 10, .seed = 1});  // the end of epoch 4
  EXPECT_EQ(flatten(epoch_indices(loader)), permutation(100, 1, 5));
  loader.load_state({.epoch = 2, .batch = 9, .seed = 1});
  const auto order = permutation(100, 1, 2);
  EXPECT_EQ(flatten(epoch_indices(loader)),
            std::vector<std::int64_t>(order.begin() + 90, order.end()));
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { loader.load_state({.epoch = 0, .batch = 11}); }),
                          "batch 11 is outside [0, 10]");
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { loader.load_state({.epoch = -1}); }), "epoch -1");
  // load_state while an epoch runs stops it; its iterator then reads as finished.
  auto it = loader.begin();
  loader.load_state({.epoch = 0, .batch = 0, .seed = 1});
  ++it;
  EXPECT_TRUE(it == loader.end());
  EXPECT_EQ(loader.state(), (LoaderState{.epoch = 0, .batch = 0, .seed = 1}));
}

TEST(DataLoader, EmptyDatasetAndOptionErrors) {
  auto ds = std::make_shared<IndexDataset>();
  ds->n = 0;
  DataLoader loader(ds, {.batch_size = 4, .num_workers = 2});
  EXPECT_EQ(loader.size(), 0);
  EXPECT_TRUE(loader.begin() == loader.end());
  EXPECT_EQ(loader.state().epoch, 1);
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { DataLoader bad(ds, {.batch_size = 0}); }), "batch_size 0");
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { DataLoader bad(ds, {.num_workers = -1}); }),
                          "num_workers -1");
  TANDEM_EXPECT_ERROR_HAS(
      error_of([&] {
        DataLoader bad(ds, {.shuffle = true, .sampler = std::make_shared<SequentialSampler>(0)});
      }),
      "shuffle = true with a sampler");
  // Batches for a GPU that is not there (any machine has a first missing index).
  const Device missing(DeviceType::CUDA, cuda::device_count());
  TANDEM_EXPECT_ERROR_HAS(error_of([&] { DataLoader bad(ds, {.device = missing}); }),
                          "DataLoader: batches to " + missing.str() + ": " + missing.str() +
                              " does not exist");
}

// A pinned-memory hook that counts what it hands out.
std::atomic<int> g_pinned_live{0};
std::atomic<int> g_pinned_total{0};
std::mutex g_pinned_mutex;
std::set<void*> g_pinned_ptrs;
void* fake_pinned_alloc(std::size_t nbytes) {
  void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
  std::lock_guard lock(g_pinned_mutex);
  g_pinned_ptrs.insert(p);
  ++g_pinned_live;
  ++g_pinned_total;
  return p;
}
void fake_pinned_free(void* p) {
  {
    std::lock_guard lock(g_pinned_mutex);
    g_pinned_ptrs.erase(p);
  }
  --g_pinned_live;
  std::free(p);
}

TEST(DataLoader, PinMemoryUsesTheHookWhenInstalledAndPlainMemoryOtherwise) {
  const SyntheticDataset ds({.shape = {1, 4, 4}, .count = 40});
  {
    DataLoader plain(ds, {.batch_size = 8, .num_workers = 1, .pin_memory = true});
    EXPECT_FALSE(plain.pins_memory());
    int n = 0;
    for (auto& batch : plain) n += static_cast<int>(batch.data.size(0));
    EXPECT_EQ(n, 40);
  }
  static const PinnedMemoryHooks hooks{.allocate = fake_pinned_alloc, .free = fake_pinned_free};
  set_pinned_memory_hooks(&hooks);
  {
    DataLoader pinned(
        ds, {.batch_size = 8, .num_workers = 2, .pin_memory = true, .transforms = {ToFloat()}});
    DataLoader unpinned(ds, {.batch_size = 8, .num_workers = 2});
    EXPECT_TRUE(pinned.pins_memory());
    EXPECT_FALSE(unpinned.pins_memory());
    for (auto& [data, target] : pinned) {
      std::lock_guard lock(g_pinned_mutex);
      EXPECT_TRUE(g_pinned_ptrs.count(data.storage()->data()));
      EXPECT_TRUE(g_pinned_ptrs.count(target.storage()->data()));
    }
    const int total = g_pinned_total.load();
    for (auto& [data, target] : unpinned) {
      std::lock_guard lock(g_pinned_mutex);
      EXPECT_FALSE(g_pinned_ptrs.count(data.storage()->data()));
    }
    EXPECT_EQ(g_pinned_total.load(), total);
  }
  set_pinned_memory_hooks(nullptr);
  EXPECT_EQ(g_pinned_live.load(), 0);  // every pinned buffer went back through the hook
  EXPECT_GT(g_pinned_total.load(), 0);
}

TEST(DataLoader, DistributedRanksGetEqualBatchCountsAndDisjointShards) {
  auto ds = std::make_shared<IndexDataset>();
  ds->n = 103;
  for (Tail tail : {Tail::Pad, Tail::Drop}) {
    std::vector<std::int64_t> seen;
    std::vector<std::int64_t> batch_counts;
    for (std::int64_t rank = 0; rank < 4; ++rank) {
      DataLoader loader(
          ds, {.batch_size = 5,
               .num_workers = 1,
               .seed = 8,
               .sampler = std::make_shared<DistributedSampler>(
                   103, DistributedSamplerOptions{.rank = rank, .world_size = 4, .tail = tail})});
      auto epoch0 = epoch_indices(loader);
      auto epoch1 = flatten(epoch_indices(loader));
      batch_counts.push_back(static_cast<std::int64_t>(epoch0.size()));
      auto flat = flatten(epoch0);
      EXPECT_NE(flat, epoch1);  // reshuffled by itself
      seen.insert(seen.end(), flat.begin(), flat.end());
    }
    // 26 samples per rank (Pad) -> 6 batches of 5; 25 (Drop) -> 5.
    EXPECT_EQ(batch_counts, std::vector<std::int64_t>(4, tail == Tail::Pad ? 6 : 5));
    const std::set<std::int64_t> distinct(seen.begin(), seen.end());
    if (tail == Tail::Pad) {
      EXPECT_EQ(seen.size(), 104u);
      EXPECT_EQ(distinct.size(), 103u);
    } else {
      EXPECT_EQ(seen.size(), 100u);
      EXPECT_EQ(distinct.size(), 100u);
    }
  }
}

TEST(DataLoader, WeightedSplitOfEachGlobalBatch) {
  DataLoader loader(std::make_shared<IndexDataset>(), {.batch_size = 10});
  const std::vector<double> speeds{3.0, 1.0};
  for (auto& batch : loader) {
    const BatchShares shares = split_batch(batch.data.size(0), speeds);
    const auto parts = split(batch, shares);
    EXPECT_EQ(parts[0].data.size(0), 8);  // 7.5 and 2.5: the tie goes to the first
    EXPECT_EQ(parts[1].data.size(0), 2);
    EXPECT_EQ(parts[1].data.at({0, 0}), batch.data.at({8, 0}));
    EXPECT_DOUBLE_EQ(shares.weight(0) + shares.weight(1), 1.0);
  }
}

}  // namespace
}  // namespace tandem::data
