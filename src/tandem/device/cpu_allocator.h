// The CPU backend: 64-byte aligned host memory with a cache of freed blocks, so the steady state of
// a training loop (the same tensor sizes every step) allocates nothing from the OS and takes no
// page faults. Blocks are kept per exact rounded size; the cache is bounded.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "tandem/device/allocator.h"

namespace tandem {

struct MemoryStats {
  std::size_t in_use = 0;    // bytes handed out and not yet freed
  std::size_t cached = 0;    // bytes kept for reuse
  std::size_t peak = 0;      // largest in_use seen
  std::size_t os_allocations = 0;
};

class CpuBackend final : public DeviceBackend {
 public:
  // Blocks above this size are cached (smaller ones are cheap for malloc).
  static constexpr std::size_t kCacheMinBytes = 64 * 1024;

  explicit CpuBackend(std::size_t cache_limit_bytes);
  ~CpuBackend() override;

  void* allocate(std::size_t nbytes, int index) override;
  void deallocate(void* ptr, std::size_t nbytes, int index) override;
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            std::size_t nbytes) override;
  void synchronize(int) override {}
  int device_count() const override { return 1 << 16; }  // cpu:N are replicas, not hardware

  MemoryStats stats() const;
  void empty_cache();

 private:
  static std::size_t rounded(std::size_t nbytes);
  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_blocks_;
  std::size_t cache_limit_;
  MemoryStats stats_;
};

// The process's CPU backend (for statistics and emptying its cache).
CpuBackend& cpu_backend();

}  // namespace tandem
