// The pinned staging pool: blocks of 2^k bytes (at least 64 KiB) per GPU, each with the event of
// the last copy that read it; the smallest free block that fits is reused, else one is made.
#include "tandem/device/cuda/pinned_staging.h"

#include <algorithm>

#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/stream.h"

namespace tandem::cuda {

struct PinnedStaging::Block {
  void* ptr = nullptr;
  std::size_t size = 0;
  cudaEvent_t event = nullptr;  // created on the block's GPU
  bool pending = false;         // event recorded and not yet seen complete
  bool handed_out = false;      // between acquire() and release_after()
};

namespace {

std::size_t block_size_for(std::size_t nbytes) {
  std::size_t size = std::size_t{64} << 10;
  while (size < nbytes) size <<= 1;
  return size;
}

}  // namespace

PinnedStaging::Block* PinnedStaging::acquire(int device, std::size_t nbytes) {
  if (nbytes == 0 || nbytes > kMaxCopyBytes || device < 0) return nullptr;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (blocks_.size() <= static_cast<std::size_t>(device)) {
    blocks_.resize(static_cast<std::size_t>(device) + 1);
    held_.resize(static_cast<std::size_t>(device) + 1, 0);
  }
  std::vector<std::unique_ptr<Block>>& mine = blocks_[static_cast<std::size_t>(device)];
  Block* best = nullptr;
  for (const auto& b : mine) {
    if (b->handed_out || b->size < nbytes) continue;
    if (b->pending) {
      const cudaError_t state = cudaEventQuery(b->event);
      if (state == cudaErrorNotReady) {
        // An answer, not an error: cleared, or the thread's next kernel launch check (which reads
        // cudaGetLastError) would report it.
        (void)cudaGetLastError();
        continue;
      }
      TANDEM_CUDA_CHECK(state);
      b->pending = false;
    }
    if (best == nullptr || b->size < best->size) best = b.get();
  }
  if (best == nullptr) {
    const std::size_t size = block_size_for(nbytes);
    std::size_t& held = held_[static_cast<std::size_t>(device)];
    if (held + size > kMaxHeldBytes) return nullptr;
    auto block = std::make_unique<Block>();
    block->size = size;
    if (cudaHostAlloc(&block->ptr, size, cudaHostAllocDefault) != cudaSuccess) {
      (void)cudaGetLastError();  // pinned memory exhausted: the caller copies synchronously
      return nullptr;
    }
    {
      const DeviceGuard guard(device);
      TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&block->event, cudaEventDisableTiming));
    }
    held += size;
    best = block.get();
    mine.push_back(std::move(block));
  }
  best->handed_out = true;
  return best;
}

void* PinnedStaging::data(Block* block) { return block->ptr; }

void PinnedStaging::release_after(Block* block, cudaStream_t stream) {
  const std::lock_guard<std::mutex> lock(mutex_);
  TANDEM_CUDA_CHECK(cudaEventRecord(block->event, stream));
  block->pending = true;
  block->handed_out = false;
}

PinnedStaging::Stats PinnedStaging::stats(int device) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  Stats s;
  if (device < 0 || static_cast<std::size_t>(device) >= blocks_.size()) return s;
  s.blocks = blocks_[static_cast<std::size_t>(device)].size();
  s.bytes = held_[static_cast<std::size_t>(device)];
  return s;
}

PinnedStaging::~PinnedStaging() {
  for (auto& per_device : blocks_) {
    for (auto& b : per_device) {
      if (b->event) (void)cudaEventSynchronize(b->event);
      if (b->event) (void)cudaEventDestroy(b->event);
      if (b->ptr) (void)cudaFreeHost(b->ptr);
    }
  }
}

PinnedStaging& pinned_staging() {
  static PinnedStaging* staging = new PinnedStaging;  // outlives every copy, never destroyed
  return *staging;
}

}  // namespace tandem::cuda
