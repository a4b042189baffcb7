// The caching allocator's bookkeeping (see block_allocator.h). Invariants: every block belongs to
// one segment (a list through prev/next covering the segment exactly) and to one stream; a block
// is allocated, pending (freed, waiting for events), in its pool (in_pool), or abandoned (its
// event could not be recorded); no two neighbours are both in a pool (they are merged when the
// second one returns).
#include "tandem/device/cuda/block_allocator.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <unordered_set>

namespace tandem::cuda {

std::string format_bytes(std::size_t nbytes) {
  if (nbytes < 1024) return std::to_string(nbytes) + " B";
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(nbytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f %s", value, kUnits[unit]);
  return buffer;
}

std::size_t BlockAllocator::round_size(std::size_t nbytes) {
  if (nbytes < kMinBlock) return kMinBlock;
  return (nbytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

std::size_t BlockAllocator::segment_size(std::size_t rounded) {
  if (is_small(rounded)) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kLargeSegment;
  return (rounded + kLargeRound - 1) / kLargeRound * kLargeRound;
}

BlockAllocator::~BlockAllocator() {
  // Blocks still handed out keep their segments (and their Block records): whoever holds them
  // may free them later, and the memory goes with the process.
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.clear();  // no graph outlives its device's allocator
    wait_pending();
    release_free_segments();
    forget_abandoned_segments();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw (device gone)
  }
}

void* BlockAllocator::allocate(std::size_t nbytes, StreamId stream) {
  if (nbytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.allocations;
  // Sizes this large would overflow the rounding; no device has that much memory anyway.
  if (nbytes > std::numeric_limits<std::size_t>::max() / 4) throw_out_of_memory(nbytes, nbytes);
  process_events();
  const std::size_t size = round_size(nbytes);
  Block* block = find_free(size, stream);
  if (block != nullptr) {
    ++stats_.cache_hits;
  } else {
    block = new_segment(size, stream);
    if (block == nullptr && !pending_.empty()) {  // blocks waiting on other streams may fit
      wait_pending();
      block = find_free(size, stream);
      if (block != nullptr) ++stats_.cache_hits;
    }
    if (block == nullptr) {  // give the cache back to the device and try once more
      release_free_segments();
      block = new_segment(size, stream);
    }
    if (block == nullptr) throw_out_of_memory(nbytes, size);
  }
  block = split(block, size);
  block->allocated = true;
  live_.emplace(block->ptr, block);
  stats_.in_use += block->size;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  ++stats_.blocks_in_use;
  return block->ptr;
}

void BlockAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Block* block = live_block(ptr);
  live_.erase(ptr);
  block->allocated = false;
  stats_.in_use -= block->size;
  --stats_.blocks_in_use;
  if (block->uses.empty()) {
    return_to_pool(block);
    return;
  }
  // Used on other streams: reusable once the work queued there so far has completed.
  ++stats_.pending_blocks;
  const std::vector<StreamId> uses = std::move(block->uses);
  block->uses.clear();
  try {
    for (const StreamId use : uses) {
      pending_.emplace_back(raw_.record_event(use), block);
      ++block->pending_events;
    }
  } catch (...) {
    // With no event to wait for, the block can never be known safe again: it stays out of the
    // pools (its bytes still reserved) rather than risk being reused under running work.
    if (block->pending_events == 0) {
      --stats_.pending_blocks;
      abandoned_.push_back(block);
    }
    throw;
  }
}

void BlockAllocator::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  Block* block = live_block(ptr);
  if (stream == block->stream) return;
  if (std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end()) {
    block->uses.push_back(stream);
  }
}

void BlockAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  wait_pending();
  release_free_segments();
}

void BlockAllocator::hold_stream(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++held_[stream];
}

void BlockAllocator::let_go_stream(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = held_.find(stream);
  TANDEM_CHECK(it != held_.end(), raw_.name(), ": letting go of a stream that is not held");
  if (--it->second == 0) held_.erase(it);
}

AllocatorStats BlockAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void BlockAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_in_use = stats_.in_use;
  stats_.peak_reserved = stats_.reserved;
}

std::size_t BlockAllocator::block_size(void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_block(ptr)->size;
}

StreamId BlockAllocator::block_stream(void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_block(ptr)->stream;
}

void BlockAllocator::check_invariants() const {
  std::lock_guard<std::mutex> lock(mutex_);
  // Every block we can reach: in the pools, handed out, or pending; then their segments' heads.
  std::vector<const Block*> known;
  for (const Pool* pool : {&small_pool_, &large_pool_}) {
    for (const Block* b : *pool) {
      TANDEM_CHECK(b->in_pool && !b->allocated && b->pending_events == 0, raw_.name(),
                   ": a pooled block is not free");
      TANDEM_CHECK((pool == &small_pool_) == b->small, raw_.name(), ": a block in the wrong pool");
      known.push_back(b);
    }
  }
  std::size_t in_use = 0;
  for (const auto& [ptr, b] : live_) {
    TANDEM_CHECK(b->allocated && !b->in_pool && b->ptr == ptr, raw_.name(),
                 ": a live block is not marked allocated");
    in_use += b->size;
    known.push_back(b);
  }
  for (const auto& [event, b] : pending_) {
    TANDEM_CHECK(!b->allocated && !b->in_pool && b->pending_events > 0, raw_.name(),
                 ": a pending block is not marked pending");
    known.push_back(b);
  }
  TANDEM_CHECK(in_use == stats_.in_use, raw_.name(), ": in use is ", stats_.in_use,
               " but the live blocks hold ", in_use);
  std::unordered_set<const Block*> heads;
  for (const Block* b : known) {
    while (b->prev != nullptr) b = b->prev;
    heads.insert(b);
  }
  std::size_t reserved = 0;
  for (const Block* b : heads) {
    for (; b != nullptr; b = b->next) {
      reserved += b->size;
      if (b->next == nullptr) break;
      TANDEM_CHECK(b->next->prev == b, raw_.name(), ": a broken back link");
      TANDEM_CHECK(b->next->ptr == b->ptr + b->size, raw_.name(), ": blocks not contiguous");
      TANDEM_CHECK(b->next->stream == b->stream && b->next->small == b->small, raw_.name(),
                   ": a segment's blocks differ in stream or pool");
      TANDEM_CHECK(!(b->in_pool && b->next->in_pool), raw_.name(), ": two free neighbours");
    }
  }
  TANDEM_CHECK(heads.size() == stats_.segments && reserved == stats_.reserved, raw_.name(), ": ",
               stats_.segments, " segments of ", stats_.reserved, " bytes counted, ", heads.size(),
               " of ", reserved, " found");
}

BlockAllocator::Block* BlockAllocator::live_block(void* ptr) const {
  const auto it = live_.find(ptr);
  TANDEM_CHECK(it != live_.end(), raw_.name(), ": ", ptr,
               " is not a block handed out by tandem's caching allocator on this device");
  return it->second;
}

BlockAllocator::Block* BlockAllocator::find_free(std::size_t size, StreamId stream) {
  Pool& pool = pool_of(is_small(size));
  Block key;
  key.stream = stream;
  key.size = size;
  const auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  pool.erase(it);
  block->in_pool = false;
  return block;
}

BlockAllocator::Block* BlockAllocator::new_segment(std::size_t size, StreamId stream) {
  const std::size_t bytes = segment_size(size);
  void* ptr = raw_.allocate(bytes);
  if (ptr == nullptr) return nullptr;
  auto* block = new Block;
  block->ptr = static_cast<char*>(ptr);
  block->size = bytes;
  block->stream = stream;
  block->small = is_small(size);
  ++stats_.device_allocations;
  ++stats_.segments;
  stats_.reserved += bytes;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  return block;
}

BlockAllocator::Block* BlockAllocator::split(Block* block, std::size_t size) {
  const std::size_t rest = block->size - size;
  // A small remainder is worth keeping from 512 bytes; a large block keeps a remainder only if it
  // is itself large, so the large pool never fills with slivers.
  const bool worth = block->small ? rest >= kMinBlock : rest > kSmallSize;
  if (!worth) return block;
  auto* remainder = new Block;
  remainder->ptr = block->ptr + size;
  remainder->size = rest;
  remainder->stream = block->stream;
  remainder->small = block->small;
  remainder->prev = block;
  remainder->next = block->next;
  if (block->next != nullptr) block->next->prev = remainder;
  block->next = remainder;
  block->size = size;
  remainder->in_pool = true;  // its other neighbour is not in a pool (invariant): no merging
  pool_of(remainder->small).insert(remainder);
  return block;
}

void BlockAllocator::return_to_pool(Block* block) {
  Pool& pool = pool_of(block->small);
  auto is_free = [](const Block* b) { return b != nullptr && b->in_pool; };
  if (Block* prev = block->prev; is_free(prev)) {
    pool.erase(prev);  // before its size (part of the ordering) changes
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    delete block;
    block = prev;
  }
  if (Block* next = block->next; is_free(next)) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next != nullptr) next->next->prev = block;
    delete next;
  }
  block->in_pool = true;
  pool.insert(block);
}

void BlockAllocator::process_events() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!raw_.event_done(it->first)) {
      ++it;
      continue;
    }
    raw_.destroy_event(it->first);
    Block* block = it->second;
    it = pending_.erase(it);
    if (--block->pending_events == 0) {
      --stats_.pending_blocks;
      return_to_pool(block);
    }
  }
}

void BlockAllocator::wait_pending() {
  for (const auto& [event, block] : pending_) raw_.wait_event(event);
  process_events();
}

void BlockAllocator::release_free_segments() {
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* block = *it;
      // Part of a segment still in use, or a held stream's (a graph's) memory.
      if (block->prev != nullptr || block->next != nullptr || held_.contains(block->stream)) {
        ++it;
        continue;
      }
      raw_.release(block->ptr);
      stats_.reserved -= block->size;
      ++stats_.device_frees;
      --stats_.segments;
      it = pool->erase(it);
      delete block;
    }
  }
}

// An abandoned block's segment keeps its device memory (work may still use it: it goes with the
// process), but once no other block of it is handed out or pending, its records are deleted.
void BlockAllocator::forget_abandoned_segments() {
  for (Block* abandoned : abandoned_) {
    Block* head = abandoned;
    while (head->prev != nullptr) head = head->prev;
    bool idle = true;
    for (Block* b = head; b != nullptr; b = b->next) {
      if (b != abandoned && !b->in_pool) idle = false;
    }
    if (!idle) continue;
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      if (b->in_pool) pool_of(b->small).erase(b);
      delete b;
      b = next;
    }
  }
  abandoned_.clear();
}

void BlockAllocator::throw_out_of_memory(std::size_t nbytes, std::size_t size) {
  ++stats_.out_of_memory;
  std::size_t free = 0;
  std::size_t total = 0;
  std::string device_figures;
  try {
    raw_.memory_info(&free, &total);
    device_figures =
        "the device has " + format_bytes(free) + " free of " + format_bytes(total) + " total";
  } catch (const std::exception& e) {
    device_figures = std::string("the device's free memory could not be read: ") + e.what();
  }
  std::string asked = format_bytes(nbytes) + " (" + std::to_string(nbytes) + " bytes";
  if (size != nbytes) asked += ", a segment of " + format_bytes(segment_size(size));
  asked += ")";
  throw OutOfMemoryError(raw_.name() + ": out of memory: tried to allocate " + asked +
                         "; tandem has " + format_bytes(stats_.in_use) + " in use and " +
                         format_bytes(stats_.reserved) + " reserved on this device; " +
                         device_figures);
}

}  // namespace tandem::cuda
