// The caching allocator's bookkeeping over a fake device (no GPU needed): size rounding, pool
// choice, splitting and merging, same-stream reuse, cross-stream reuse only after events, the
// cache given back when the device is full (but not a held stream's: a graph's), and the
// out-of-memory message.
#include "tandem/device/cuda/block_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tandem::cuda {
namespace {

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * 1024;
constexpr StreamId kStreamA = 0xA0;
constexpr StreamId kStreamB = 0xB0;

// A device of `capacity` bytes: addresses are handed out and never touched; events complete when
// the test says their stream's work is done (or when the host waits on one).
class FakeDevice final : public RawDeviceMemory {
 public:
  explicit FakeDevice(std::size_t capacity) : capacity_(capacity) {}

  void* allocate(std::size_t nbytes) override {
    if (used_ + nbytes > capacity_) return nullptr;
    used_ += nbytes;
    ++mallocs;
    const std::uintptr_t at = next_;
    next_ += nbytes + 64 * kMiB;  // gaps, so neighbouring segments never look adjacent
    segments_[at] = nbytes;
    return reinterpret_cast<void*>(at);
  }
  void release(void* ptr) override {
    const auto it = segments_.find(reinterpret_cast<std::uintptr_t>(ptr));
    ASSERT_NE(it, segments_.end()) << "release of an address that is not a segment";
    used_ -= it->second;
    segments_.erase(it);
    ++frees;
  }
  EventId record_event(StreamId stream) override {
    if (fail_events) throw Error("fake: cannot record an event");
    events_[++last_event_] = {stream, false};
    return last_event_;
  }
  bool event_done(EventId event) override { return events_.at(event).done; }
  void wait_event(EventId event) override {
    events_.at(event).done = true;
    ++host_waits;
  }
  void destroy_event(EventId event) override { EXPECT_EQ(events_.erase(event), 1u); }
  void memory_info(std::size_t* free, std::size_t* total) override {
    *free = capacity_ - used_;
    *total = capacity_;
  }
  std::string name() const override { return "fake:0"; }

  void finish_work_on(StreamId stream) {
    for (auto& [id, e] : events_) {
      if (e.stream == stream) e.done = true;
    }
  }
  std::size_t live_events() const { return events_.size(); }
  std::size_t live_segments() const { return segments_.size(); }

  int mallocs = 0;
  int frees = 0;
  int host_waits = 0;
  bool fail_events = false;

 private:
  struct FakeEvent {
    StreamId stream;
    bool done;
  };
  std::size_t capacity_;
  std::size_t used_ = 0;
  std::uintptr_t next_ = 0x10000000;
  std::map<std::uintptr_t, std::size_t> segments_;
  std::map<EventId, FakeEvent> events_;
  EventId last_event_ = 0;
};

char* at(void* p) { return static_cast<char*>(p); }

TEST(BlockAllocator, RoundsSizesAndChoosesPools) {
  EXPECT_EQ(BlockAllocator::round_size(1), 512u);
  EXPECT_EQ(BlockAllocator::round_size(512), 512u);
  EXPECT_EQ(BlockAllocator::round_size(513), 1024u);
  EXPECT_EQ(BlockAllocator::round_size(100000), 100352u);  // 196 * 512
  EXPECT_TRUE(BlockAllocator::is_small(kMiB));
  EXPECT_FALSE(BlockAllocator::is_small(kMiB + 512));
  EXPECT_EQ(BlockAllocator::segment_size(512), 2 * kMiB);  // small pool: 2 MiB segments
  EXPECT_EQ(BlockAllocator::segment_size(kMiB), 2 * kMiB);
  EXPECT_EQ(BlockAllocator::segment_size(kMiB + 512), 20 * kMiB);  // large, under 10 MiB: 20 MiB
  EXPECT_EQ(BlockAllocator::segment_size(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(BlockAllocator::segment_size(10 * kMiB), 10 * kMiB);  // from 10 MiB: to 2 MiB steps
  EXPECT_EQ(BlockAllocator::segment_size(11 * kMiB), 12 * kMiB);
}

TEST(BlockAllocator, ZeroBytesIsNullAndFreeingNullIsANoOp) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  EXPECT_EQ(blocks.allocate(0, kStreamA), nullptr);
  blocks.free(nullptr);
  EXPECT_EQ(device.mallocs, 0);
  EXPECT_EQ(blocks.stats().allocations, 0u);
}

TEST(BlockAllocator, SmallBlocksShareOneSegment) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(1000, kStreamA);
  void* b = blocks.allocate(1000, kStreamA);
  EXPECT_EQ(device.mallocs, 1);
  EXPECT_EQ(at(b) - at(a), 1024);  // best fit: the remainder right after a
  EXPECT_EQ(blocks.block_size(a), 1024u);
  const AllocatorStats s = blocks.stats();
  EXPECT_EQ(s.in_use, 2048u);
  EXPECT_EQ(s.reserved, 2 * kMiB);
  EXPECT_EQ(s.device_allocations, 1u);
  EXPECT_EQ(s.cache_hits, 1u);  // the second came from the first segment's remainder
  EXPECT_EQ(s.blocks_in_use, 2u);
  EXPECT_EQ(s.segments, 1u);
  blocks.free(a);
  blocks.free(b);
  EXPECT_EQ(blocks.stats().in_use, 0u);
}

TEST(BlockAllocator, FreedBlockIsReusedOnItsStream) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(3 * kMiB, kStreamA);
  blocks.free(a);
  void* again = blocks.allocate(3 * kMiB, kStreamA);
  EXPECT_EQ(again, a);
  EXPECT_EQ(device.mallocs, 1);
  EXPECT_EQ(blocks.stats().cache_hits, 1u);
  EXPECT_EQ(blocks.stats().allocations, 2u);
  blocks.free(again);
}

TEST(BlockAllocator, FreedBlockIsNotGivenToAnotherStream) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(3 * kMiB, kStreamA);
  blocks.free(a);
  void* b = blocks.allocate(3 * kMiB, kStreamB);
  EXPECT_NE(b, a);
  EXPECT_EQ(device.mallocs, 2);
  EXPECT_EQ(blocks.block_stream(b), kStreamB);
  blocks.free(b);
}

TEST(BlockAllocator, SmallAndLargePoolsAreSeparate) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* large = blocks.allocate(2 * kMiB, kStreamA);  // a 20 MiB segment with 18 MiB left
  void* small = blocks.allocate(4 * kKiB, kStreamA);  // not carved from that remainder
  EXPECT_EQ(device.mallocs, 2);
  EXPECT_EQ(blocks.stats().reserved, 22 * kMiB);
  blocks.free(small);
  void* large2 = blocks.allocate(2 * kMiB, kStreamA);  // the large remainder
  EXPECT_EQ(at(large2) - at(large), static_cast<std::ptrdiff_t>(2 * kMiB));
  EXPECT_EQ(device.mallocs, 2);
  blocks.free(large);
  blocks.free(large2);
}

TEST(BlockAllocator, LargeRemaindersUnderOneMiBAreNotSplitOff) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(19 * kMiB + 512 * kKiB, kStreamA);  // 20 MiB segment, 512 KiB left
  EXPECT_EQ(blocks.block_size(a), 20 * kMiB);
  EXPECT_EQ(blocks.stats().in_use, 20 * kMiB);
  void* b = blocks.allocate(2 * kMiB, kStreamA);  // so this needs a new segment
  EXPECT_EQ(device.mallocs, 2);
  blocks.free(a);
  blocks.free(b);
}

TEST(BlockAllocator, SplitBlocksMergeBackIntoTheirSegment) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(4 * kMiB, kStreamA);
  void* b = blocks.allocate(4 * kMiB, kStreamA);
  void* c = blocks.allocate(4 * kMiB, kStreamA);
  EXPECT_EQ(device.mallocs, 1);  // all from one 20 MiB segment
  EXPECT_EQ(at(b) - at(a), static_cast<std::ptrdiff_t>(4 * kMiB));
  EXPECT_EQ(at(c) - at(b), static_cast<std::ptrdiff_t>(4 * kMiB));
  blocks.free(b);
  blocks.free(a);  // merges with b: 8 MiB free at a
  void* ab = blocks.allocate(8 * kMiB, kStreamA);
  EXPECT_EQ(ab, a);
  EXPECT_EQ(device.mallocs, 1);
  blocks.check_invariants();
  blocks.free(ab);
  blocks.free(c);  // the whole segment is one free block again...
  blocks.check_invariants();
  blocks.empty_cache();  // ...so it goes back to the device
  EXPECT_EQ(device.frees, 1);
  EXPECT_EQ(device.live_segments(), 0u);
  const AllocatorStats s = blocks.stats();
  EXPECT_EQ(s.reserved, 0u);
  EXPECT_EQ(s.segments, 0u);
  EXPECT_EQ(s.device_frees, 1u);
}

TEST(BlockAllocator, EmptyCacheKeepsSegmentsWithLiveBlocks) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(4 * kMiB, kStreamA);
  void* b = blocks.allocate(4 * kMiB, kStreamA);
  void* other = blocks.allocate(14 * kMiB, kStreamA);  // too big for the 12 MiB left: its own
  blocks.free(other);
  blocks.free(a);
  blocks.empty_cache();
  EXPECT_EQ(device.frees, 1);  // only the wholly free one
  EXPECT_EQ(blocks.stats().reserved, 20 * kMiB);
  blocks.free(b);
}

TEST(BlockAllocator, AHeldStreamsFreeSegmentsStayUntilItIsLetGo) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  blocks.hold_stream(kStreamB);  // a graph's stream: its replays use the memory cached for it
  blocks.hold_stream(kStreamB);  // two holders
  void* graph_temp = blocks.allocate(30 * kMiB, kStreamB);
  void* eager = blocks.allocate(20 * kMiB, kStreamA);
  blocks.free(graph_temp);  // free in the pools, yet still the graph's
  blocks.free(eager);
  blocks.empty_cache();
  EXPECT_EQ(device.frees, 1);  // the eager segment only
  EXPECT_EQ(blocks.stats().reserved, 30 * kMiB);
  // A full device gets back what is not held, then says it is out of memory.
  EXPECT_THROW(blocks.allocate(40 * kMiB, kStreamA), OutOfMemoryError);
  EXPECT_EQ(blocks.stats().reserved, 30 * kMiB);
  blocks.let_go_stream(kStreamB);
  blocks.empty_cache();
  EXPECT_EQ(blocks.stats().reserved, 30 * kMiB);  // one holder left
  blocks.let_go_stream(kStreamB);
  void* big = blocks.allocate(40 * kMiB, kStreamA);  // now the graph's segment goes back first
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(device.frees, 2);
  blocks.free(big);
  EXPECT_THROW(blocks.let_go_stream(kStreamB), Error);
  blocks.check_invariants();
}

TEST(BlockAllocator, BlockUsedOnAnotherStreamWaitsForItsEvent) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(1000, kStreamA);
  blocks.record_stream(a, kStreamB);
  blocks.record_stream(a, kStreamB);  // once is enough
  blocks.record_stream(a, kStreamA);  // its own stream: nothing to wait for
  blocks.free(a);
  EXPECT_EQ(device.live_events(), 1u);
  EXPECT_EQ(blocks.stats().pending_blocks, 1u);
  EXPECT_EQ(blocks.stats().in_use, 0u);
  void* b = blocks.allocate(1000, kStreamA);  // B's work may still read a: not reused
  EXPECT_NE(b, a);
  device.finish_work_on(kStreamB);
  void* c = blocks.allocate(1000, kStreamA);  // the event has completed: a is back
  EXPECT_EQ(c, a);
  EXPECT_EQ(device.live_events(), 0u);
  EXPECT_EQ(blocks.stats().pending_blocks, 0u);
  EXPECT_EQ(device.host_waits, 0);
  EXPECT_EQ(device.mallocs, 1);
  blocks.free(b);
  blocks.free(c);
}

TEST(BlockAllocator, PendingBlockMergesOnlyOnceItsEventsComplete) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(4 * kMiB, kStreamA);
  void* b = blocks.allocate(4 * kMiB, kStreamA);
  blocks.record_stream(b, kStreamB);
  blocks.free(b);  // pending
  blocks.free(a);  // must not swallow b while b's event is outstanding
  void* big = blocks.allocate(8 * kMiB, kStreamA);
  EXPECT_NE(big, a);  // a..a+4MiB alone is too small; the tail (12 MiB) is used instead
  device.finish_work_on(kStreamB);
  blocks.free(big);
  void* ab = blocks.allocate(8 * kMiB, kStreamA);  // b came back and merged with a
  EXPECT_EQ(ab, a);
  blocks.free(ab);
  blocks.empty_cache();
  EXPECT_EQ(device.live_segments(), 0u);
}

TEST(BlockAllocator, ABlockWhoseEventCannotBeRecordedIsNeverReused) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(3 * kMiB, kStreamA);
  blocks.record_stream(a, kStreamB);
  device.fail_events = true;
  EXPECT_THROW(blocks.free(a), Error);
  device.fail_events = false;
  const AllocatorStats s = blocks.stats();
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.pending_blocks, 0u);
  void* b = blocks.allocate(3 * kMiB, kStreamA);
  EXPECT_NE(b, a);  // B may still be using a
  blocks.free(b);   // b's block must not merge with a's either
  void* c = blocks.allocate(3 * kMiB, kStreamA);
  EXPECT_NE(c, a);
  blocks.free(c);
}

TEST(BlockAllocator, EmptyCacheWaitsForPendingEvents) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(3 * kMiB, kStreamA);
  blocks.record_stream(a, kStreamB);
  blocks.free(a);
  blocks.empty_cache();
  EXPECT_EQ(device.host_waits, 1);
  EXPECT_EQ(device.live_events(), 0u);
  EXPECT_EQ(device.live_segments(), 0u);
  EXPECT_EQ(blocks.stats().reserved, 0u);
}

TEST(BlockAllocator, AFullDeviceGetsTheCacheBackBeforeFailing) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(40 * kMiB, kStreamA);
  blocks.free(a);                                  // cached: 40 MiB reserved, none in use
  void* b = blocks.allocate(50 * kMiB, kStreamA);  // fits only once the 40 MiB go back
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(device.frees, 1);
  EXPECT_EQ(blocks.stats().reserved, 50 * kMiB);
  EXPECT_EQ(blocks.stats().out_of_memory, 0u);
  blocks.free(b);
}

TEST(BlockAllocator, AFullDeviceWaitsForPendingBlocksThatFit) {
  FakeDevice device(20 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(12 * kMiB, kStreamA);
  blocks.record_stream(a, kStreamB);
  blocks.free(a);
  void* b = blocks.allocate(12 * kMiB, kStreamA);  // no room for a second segment: waits for B
  EXPECT_EQ(b, a);
  EXPECT_EQ(device.host_waits, 1);
  EXPECT_EQ(device.mallocs, 1);
  blocks.free(b);
}

TEST(BlockAllocator, OutOfMemorySaysWhatWasAskedInUseReservedAndFree) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(30 * kMiB, kStreamA);
  try {
    blocks.allocate(100 * kMiB, kStreamA);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("fake:0: out of memory"), std::string::npos) << m;
    EXPECT_NE(m.find("tried to allocate 100.0 MiB (104857600 bytes)"), std::string::npos) << m;
    EXPECT_NE(m.find("30.0 MiB in use"), std::string::npos) << m;
    EXPECT_NE(m.find("30.0 MiB reserved"), std::string::npos) << m;
    EXPECT_NE(m.find("34.0 MiB free of 64.0 MiB total"), std::string::npos) << m;
  }
  EXPECT_EQ(blocks.stats().out_of_memory, 1u);
  EXPECT_THROW(blocks.allocate(~std::size_t{0}, kStreamA), OutOfMemoryError);  // no overflow
  void* b = blocks.allocate(10 * kMiB, kStreamA);  // still works afterwards
  EXPECT_NE(b, nullptr);
  blocks.free(a);
  blocks.free(b);
}

TEST(BlockAllocator, PeaksAndCounters) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(6 * kMiB, kStreamA);
  void* b = blocks.allocate(6 * kMiB, kStreamA);
  blocks.free(a);
  blocks.free(b);
  AllocatorStats s = blocks.stats();
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.peak_in_use, 12 * kMiB);
  EXPECT_EQ(s.peak_reserved, 20 * kMiB);
  blocks.reset_peak();
  s = blocks.stats();
  EXPECT_EQ(s.peak_in_use, 0u);
  EXPECT_EQ(s.peak_reserved, 20 * kMiB);  // still reserved (cached)
}

TEST(BlockAllocator, UnknownPointersAreErrors) {
  FakeDevice device(64 * kMiB);
  BlockAllocator blocks(device);
  void* a = blocks.allocate(1000, kStreamA);
  EXPECT_THROW(blocks.free(at(a) + 512), Error);
  EXPECT_THROW(blocks.record_stream(at(a) + 512, kStreamB), Error);
  blocks.free(a);
  EXPECT_THROW(blocks.free(a), Error);  // twice
}

// Many random allocations, frees and cross-stream uses: no two live blocks ever overlap, each is
// as large as asked, and everything goes back to the device at the end.
TEST(BlockAllocator, RandomUseKeepsBlocksDisjointAndReturnsEverything) {
  FakeDevice device(512 * kMiB);
  BlockAllocator blocks(device);
  std::mt19937_64 rng(7);
  std::map<std::uintptr_t, std::size_t> live;  // start -> requested size
  const StreamId streams[] = {kStreamA, kStreamB};
  auto overlaps = [&](std::uintptr_t start, std::size_t size) {
    auto next = live.lower_bound(start);
    if (next != live.end() && next->first < start + size) return true;
    if (next != live.begin() && std::prev(next)->first + std::prev(next)->second > start)
      return true;
    return false;
  };
  for (int step = 0; step < 20000; ++step) {
    const int action = static_cast<int>(rng() % 10);
    if (action < 5 || live.empty()) {
      const std::size_t size = rng() % 4 == 0 ? 1 + rng() % (24 * kMiB) : 1 + rng() % (256 * kKiB);
      const StreamId stream = streams[rng() % 2];
      void* p = blocks.allocate(size, stream);
      const auto start = reinterpret_cast<std::uintptr_t>(p);
      ASSERT_FALSE(overlaps(start, size)) << "step " << step;
      ASSERT_GE(blocks.block_size(p), size);
      live[start] = size;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      void* p = reinterpret_cast<void*>(it->first);
      if (action == 9) blocks.record_stream(p, streams[rng() % 2]);
      blocks.free(p);
      live.erase(it);
    }
    if (step % 100 == 0) {
      device.finish_work_on(kStreamA);
      device.finish_work_on(kStreamB);
    }
    if (step % 10 == 0) {
      ASSERT_NO_THROW(blocks.check_invariants()) << "step " << step;
    }
  }
  for (const auto& [start, size] : live) blocks.free(reinterpret_cast<void*>(start));
  const AllocatorStats s = blocks.stats();
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.blocks_in_use, 0u);
  EXPECT_GT(s.cache_hits, s.allocations / 2);  // the cache does its job
  blocks.empty_cache();
  EXPECT_EQ(device.live_segments(), 0u);
  EXPECT_EQ(device.live_events(), 0u);
  EXPECT_EQ(blocks.stats().reserved, 0u);
}

TEST(BlockAllocator, ThreadsShareOneAllocator) {
  FakeDevice device(1024 * kMiB);
  BlockAllocator blocks(device);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&blocks, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<void*> held;
      const StreamId stream = 0x100 + static_cast<StreamId>(t);
      for (int i = 0; i < 5000; ++i) {
        held.push_back(blocks.allocate(1 + rng() % (3 * kMiB), stream));
        if (held.size() > 16) {
          const std::size_t k = rng() % held.size();
          blocks.free(held[k]);
          held.erase(held.begin() + static_cast<long>(k));
        }
      }
      for (void* p : held) blocks.free(p);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(blocks.stats().in_use, 0u);
  EXPECT_EQ(blocks.stats().allocations, 20000u);
  blocks.empty_cache();
  EXPECT_EQ(device.live_segments(), 0u);
}

TEST(BlockAllocator, FormatsBytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(20 * kMiB), "20.0 MiB");
  EXPECT_EQ(format_bytes(std::size_t{141} * 1024 * kMiB), "141.0 GiB");
}

}  // namespace
}  // namespace tandem::cuda
