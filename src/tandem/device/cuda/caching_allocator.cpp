// The per-GPU caching allocators: BlockAllocator's device is cudaMalloc, cudaFree and CUDA events
// (kept in a free list for reuse), each call made with its GPU current.
#include "tandem/device/cuda/caching_allocator.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/memory.h"
#include "tandem/device/cuda/stream.h"

namespace tandem::cuda {
namespace {

// The block allocator keeps CUDA handles as integers (it is CUDA-free); these turn them back.
cudaEvent_t as_event(EventId id) {
  return reinterpret_cast<cudaEvent_t>(id);  // NOLINT(performance-no-int-to-ptr)
}
cudaStream_t as_stream(StreamId id) {
  return reinterpret_cast<cudaStream_t>(id);  // NOLINT(performance-no-int-to-ptr)
}

// Used by one BlockAllocator, under its lock.
class CudaRawMemory final : public RawDeviceMemory {
 public:
  explicit CudaRawMemory(int device) : device_(device) {}

  void* allocate(std::size_t nbytes) override {
    const DeviceGuard guard(device_);
    void* ptr = nullptr;
    const cudaError_t rc = cudaMalloc(&ptr, nbytes);
    if (rc == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // the allocator answers it (frees its cache, or says so)
      return nullptr;
    }
    detail::check_cuda(rc, ("cudaMalloc(" + std::to_string(nbytes) + " bytes)").c_str(), __FILE__,
                       __LINE__);
    return ptr;
  }

  void release(void* ptr) override {
    const DeviceGuard guard(device_);
    TANDEM_CUDA_CHECK(cudaFree(ptr));
  }

  EventId record_event(StreamId stream) override {
    const DeviceGuard guard(device_);
    cudaEvent_t event = nullptr;
    if (free_events_.empty()) {
      TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    } else {
      event = free_events_.back();
      free_events_.pop_back();
    }
    const cudaError_t rc = cudaEventRecord(event, as_stream(stream));
    if (rc != cudaSuccess) free_events_.push_back(event);
    TANDEM_CUDA_CHECK(rc);
    return reinterpret_cast<EventId>(event);
  }

  bool event_done(EventId event) override {
    const cudaError_t rc = cudaEventQuery(as_event(event));
    if (rc == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not ready" is an answer, not an error to leave behind
      return false;
    }
    TANDEM_CUDA_CHECK(rc);
    return true;
  }

  void wait_event(EventId event) override {
    TANDEM_CUDA_CHECK(cudaEventSynchronize(as_event(event)));
  }

  void destroy_event(EventId event) override { free_events_.push_back(as_event(event)); }

  void memory_info(std::size_t* free, std::size_t* total) override {
    const DeviceGuard guard(device_);
    TANDEM_CUDA_CHECK(cudaMemGetInfo(free, total));
  }

  std::string name() const override { return "cuda:" + std::to_string(device_); }

 private:
  int device_;
  std::vector<cudaEvent_t> free_events_;
};

struct DeviceAllocator {
  std::once_flag once;
  std::unique_ptr<CudaRawMemory> raw;
  std::unique_ptr<BlockAllocator> blocks;
};

DeviceAllocator* all_allocators() {
  // One per visible GPU; never destroyed (see caching_allocator.h).
  static DeviceAllocator* all = new DeviceAllocator[static_cast<std::size_t>(device_count())];
  return all;
}

}  // namespace

BlockAllocator& caching_allocator(int device) {
  check_index(device);
  DeviceAllocator& a = all_allocators()[device];
  std::call_once(a.once, [&] {
    a.raw = std::make_unique<CudaRawMemory>(device);
    a.blocks = std::make_unique<BlockAllocator>(*a.raw);
  });
  return *a.blocks;
}

void* allocate(int device, std::size_t nbytes, cudaStream_t stream) {
  return caching_allocator(device).allocate(nbytes, reinterpret_cast<StreamId>(stream));
}

void free(int device, void* ptr) { caching_allocator(device).free(ptr); }

void record_stream(int device, void* ptr, cudaStream_t stream) {
  caching_allocator(device).record_stream(ptr, reinterpret_cast<StreamId>(stream));
}

AllocatorStats memory_stats(int device) { return caching_allocator(device).stats(); }

void reset_peak_memory(int device) { caching_allocator(device).reset_peak(); }

void empty_cache() {
  for (int device = 0; device < device_count(); ++device) caching_allocator(device).empty_cache();
}

}  // namespace tandem::cuda
