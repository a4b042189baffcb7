// Page-locked staging blocks for host-to-GPU copies: the bytes are copied into a pinned block on
// the host, the GPU copy is queued from there on the stream, and the caller returns at once (its
// host memory may be freed or reused right away). A block is handed out again only once the copy
// that last read it has finished (an event recorded after it). Per GPU, thread-safe, capped: when
// the cap is reached or cudaHostAlloc fails, acquire() says no and the caller copies synchronously.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace tandem::cuda {

class PinnedStaging {
 public:
  // Copies larger than this are not staged (a pinned block that size would be dear to keep).
  static constexpr std::size_t kMaxCopyBytes = std::size_t{64} << 20;
  // Pinned bytes held per GPU at most.
  static constexpr std::size_t kMaxHeldBytes = std::size_t{256} << 20;

  struct Block;

  // A pinned block of at least nbytes for copies to `device`, free of earlier copies; nullptr
  // when nbytes is above kMaxCopyBytes, the cap is reached or pinned memory cannot be had.
  Block* acquire(int device, std::size_t nbytes);
  // The block's host memory.
  static void* data(Block* block);
  // Queues nothing; marks the block busy until the work queued on `stream` so far has finished.
  void release_after(Block* block, cudaStream_t stream);

  struct Stats {
    std::size_t blocks = 0;
    std::size_t bytes = 0;
  };
  Stats stats(int device) const;

  ~PinnedStaging();

 private:
  mutable std::mutex mutex_;
  std::vector<std::vector<std::unique_ptr<Block>>> blocks_;  // [device]
  std::vector<std::size_t> held_;                            // [device] bytes
};

// The process's staging blocks (never destroyed: copies may still be in flight at exit).
PinnedStaging& pinned_staging();

}  // namespace tandem::cuda
