// The caching allocator's bookkeeping for one device, over an abstract device (RawDeviceMemory),
// so it runs and is tested without a GPU: size rounding, a small and a large pool, splitting and
// merging blocks within segments, stream-ordered reuse, events for blocks used on other streams.
// CUDA-free; caching_allocator.cpp gives it cudaMalloc and CUDA events. In the spirit of PyTorch's
// CUDACachingAllocator, not a copy of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tandem/base/check.h"

namespace tandem::cuda {

using StreamId = std::uintptr_t;  // a cudaStream_t, as an integer
using EventId = std::uintptr_t;   // a cudaEvent_t, as an integer

// What the allocator needs from a device. Errors other than running out of memory throw.
class RawDeviceMemory {
 public:
  virtual ~RawDeviceMemory() = default;
  virtual void* allocate(std::size_t nbytes) = 0;  // nullptr when the device is out of memory
  virtual void release(void* ptr) = 0;             // waits for the device's work (as cudaFree)
  virtual EventId record_event(StreamId stream) = 0;
  virtual bool event_done(EventId event) = 0;
  virtual void wait_event(EventId event) = 0;  // blocks the host until the event completes
  virtual void destroy_event(EventId event) = 0;
  virtual void memory_info(std::size_t* free, std::size_t* total) = 0;  // the whole device's
  virtual std::string name() const = 0;                                 // "cuda:0"
};

struct AllocatorStats {
  std::size_t in_use = 0;    // bytes of blocks handed out (rounded sizes)
  std::size_t reserved = 0;  // bytes held from the device: in use, cached or pending
  std::size_t peak_in_use = 0;
  std::size_t peak_reserved = 0;
  std::size_t allocations = 0;         // allocate() calls of a nonzero size
  std::size_t cache_hits = 0;          // of those, served from the cache without cudaMalloc
  std::size_t device_allocations = 0;  // cudaMalloc calls that succeeded (segments made)
  std::size_t device_frees = 0;        // cudaFree calls (segments given back)
  std::size_t out_of_memory = 0;       // OutOfMemoryError thrown
  std::size_t blocks_in_use = 0;
  std::size_t segments = 0;
  std::size_t pending_blocks = 0;  // freed, waiting for events on other streams
};

// Thrown when the device cannot give what was asked even after the cache is emptied.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// "512 B", "1.5 KiB", "20.0 MiB", "139.8 GiB".
std::string format_bytes(std::size_t nbytes);

class BlockAllocator {
 public:
  static constexpr std::size_t kMinBlock = 512;            // every size rounds up to this
  static constexpr std::size_t kSmallSize = 1 << 20;       // up to 1 MiB: the small pool
  static constexpr std::size_t kSmallSegment = 2 << 20;    // the small pool grows by 2 MiB
  static constexpr std::size_t kMinLargeAlloc = 10 << 20;  // below 10 MiB: a 20 MiB segment
  static constexpr std::size_t kLargeSegment = 20 << 20;
  static constexpr std::size_t kLargeRound = 2 << 20;  // from 10 MiB: rounded up to 2 MiB

  explicit BlockAllocator(RawDeviceMemory& raw) : raw_(raw) {}
  ~BlockAllocator();  // waits for pending events and gives back cached segments
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  // A block of at least nbytes for use on `stream` (nullptr for 0 bytes); throws
  // OutOfMemoryError with the device's figures when it cannot.
  void* allocate(std::size_t nbytes, StreamId stream);
  // Back to the cache for reuse on its stream, at once, or once the work queued on the other
  // streams it was used on (record_stream) has completed.
  void free(void* ptr);
  // The block at ptr is also used by work on `stream`: freeing it waits for that work.
  void record_stream(void* ptr, StreamId stream);
  // Gives every wholly free segment back to the device (waiting for pending events first), except
  // those cached for a held stream.
  void empty_cache();
  // While a stream is held (as often as it was held, less as often as it was let go), the segments
  // cached for it stay reserved: neither empty_cache() nor an out-of-memory retry gives them back.
  // A CUDA graph's memory: its replays write to those addresses whatever the pools say is free.
  void hold_stream(StreamId stream);
  void let_go_stream(StreamId stream);  // throws if the stream is not held

  AllocatorStats stats() const;
  void reset_peak();
  // The size of the block handed out at ptr (rounded; more when not split); throws if none.
  std::size_t block_size(void* ptr) const;
  // The stream a block was allocated for; throws if ptr is not a block in use.
  StreamId block_stream(void* ptr) const;

  // Walks every segment and throws describing the first broken invariant (for tests): blocks
  // contiguous and doubly linked, no two neighbours both in a pool, the pools, the live blocks and
  // the in-use and reserved figures agreeing with the blocks.
  void check_invariants() const;

  static std::size_t round_size(std::size_t nbytes);
  static bool is_small(std::size_t rounded) { return rounded <= kSmallSize; }
  // The size of the segment asked of the device for a block of `rounded` bytes.
  static std::size_t segment_size(std::size_t rounded);

 private:
  struct Block {
    char* ptr = nullptr;
    std::size_t size = 0;
    StreamId stream = 0;
    bool small = false;
    bool allocated = false;
    bool in_pool = false;    // free for reuse (neither allocated nor waiting on events)
    int pending_events = 0;  // events to complete before it returns to its pool
    Block* prev = nullptr;   // neighbours within the same segment
    Block* next = nullptr;
    std::vector<StreamId> uses;  // other streams it was used on
  };
  struct BlockLess {  // pools ordered by stream, then size, then address: best fit on one stream
    bool operator()(const Block* a, const Block* b) const {
      if (a->stream != b->stream) return a->stream < b->stream;
      if (a->size != b->size) return a->size < b->size;
      return a->ptr < b->ptr;
    }
  };
  using Pool = std::set<Block*, BlockLess>;

  Pool& pool_of(bool small) { return small ? small_pool_ : large_pool_; }
  Block* find_free(std::size_t size, StreamId stream);    // removed from its pool
  Block* new_segment(std::size_t size, StreamId stream);  // nullptr when the device is full
  Block* split(Block* block, std::size_t size);
  void return_to_pool(Block* block);  // merges with free neighbours
  void process_events();              // completed events' blocks go back to their pools
  void wait_pending();                // waits for every pending event
  void release_free_segments();
  void forget_abandoned_segments();  // destructor only
  Block* live_block(void* ptr) const;
  [[noreturn]] void throw_out_of_memory(std::size_t nbytes, std::size_t size);

  RawDeviceMemory& raw_;
  mutable std::mutex mutex_;
  Pool small_pool_, large_pool_;
  std::vector<Block*> abandoned_;  // freed, but no event could be recorded: never reused
  std::unordered_map<void*, Block*> live_;
  std::deque<std::pair<EventId, Block*>> pending_;
  std::unordered_map<StreamId, int> held_;  // stream -> times held
  AllocatorStats stats_;
};

}  // namespace tandem::cuda
