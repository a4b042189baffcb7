// The CPU backend: 64-byte aligned host memory with a cache of freed blocks, so the steady state of
// a training loop (the same tensor sizes every step) allocates nothing from the OS and takes no
// page faults. A request takes the smallest cached block that holds it and is at most twice its size
// (so a last, smaller batch or evaluation chunk reuses the full batch's blocks instead of adding its
// own set); the cache is bounded.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tandem/device/allocator.h"

namespace tandem {

struct MemoryStats {
  std::size_t in_use = 0;    // bytes handed out and not yet freed
  std::size_t cached = 0;    // bytes kept for reuse
  std::size_t peak = 0;      // largest in_use seen
  std::size_t os_allocations = 0;
};

// Host memory charged to one consumer, such as a CPU replica of DataParallel (they share one heap):
// the bytes of blocks allocated on a thread while the account is current (MemoryAccountScope),
// until they are freed, on whichever thread.
struct MemoryAccount {
  std::atomic<std::size_t> in_use{0};
  std::atomic<std::size_t> peak{0};
  void reset_peak() { peak.store(in_use.load()); }
};

// While alive, the calling thread's CPU allocations are charged to `account` (null: to none);
// restores the previous account when it ends.
class MemoryAccountScope {
 public:
  explicit MemoryAccountScope(std::shared_ptr<MemoryAccount> account);
  ~MemoryAccountScope();
  MemoryAccountScope(const MemoryAccountScope&) = delete;
  MemoryAccountScope& operator=(const MemoryAccountScope&) = delete;

 private:
  std::shared_ptr<MemoryAccount> previous_;
};

class CpuBackend final : public DeviceBackend {
 public:
  // Blocks above this size are cached (smaller ones are cheap for malloc).
  static constexpr std::size_t kCacheMinBytes = 64 * 1024;
  // A cached block serves a request of at least 1/kMaxWaste of its size.
  static constexpr std::size_t kMaxWaste = 2;
  // Blocks of kHugeMinBytes and more start on a kHugePage boundary and are marked for transparent
  // huge pages (madvise): a fresh block then faults in 2 MiB at a time, not 4 KiB. Measured on the
  // CNN at batch 256, one thread (5 alternated runs): the first step, whose activations are all
  // fresh memory, took 0.46-0.48 s against 0.07 s for later ones, much of it in page faults (a
  // virtual machine makes each one dear); 0.34-0.36 s with the huge pages, and startup to the end
  // of the first step 0.49-0.52 -> 0.39-0.41 s. Steady-state speed and peak RSS did not move.
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static constexpr std::size_t kHugeMinBytes = std::size_t{4} << 20;

  explicit CpuBackend(std::size_t cache_limit_bytes);
  ~CpuBackend() override;

  void* allocate(std::size_t nbytes, int index) override;
  void deallocate(void* ptr, std::size_t nbytes, int index) override;
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            std::size_t nbytes) override;
  void zero(void* ptr, std::size_t nbytes, int) override;
  void synchronize(int) override {}
  int device_count() const override { return 1 << 16; }  // cpu:N are replicas, not hardware

  MemoryStats stats() const;
  void empty_cache();

 private:
  static std::size_t rounded(std::size_t nbytes);
  void charge(void* ptr, std::size_t size);  // to the thread's account, if any (mutex held)
  void* take_cached(std::size_t size);        // a cached block for `size`, or null (mutex held)
  mutable std::mutex mutex_;
  std::unordered_map<void*, std::shared_ptr<MemoryAccount>> charged_;
  std::map<std::size_t, std::vector<void*>> free_blocks_;  // size -> blocks; no empty vectors
  std::unordered_map<void*, std::size_t> block_sizes_;      // live cacheable blocks -> their size
  std::size_t cache_limit_;
  MemoryStats stats_;
};

// The process's CPU backend (for statistics and emptying its cache).
CpuBackend& cpu_backend();

}  // namespace tandem
