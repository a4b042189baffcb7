// The caching CPU allocator.
#include "tandem/device/cpu_allocator.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "tandem/base/check.h"

namespace tandem {

namespace {

std::shared_ptr<MemoryAccount>& current_account() {
  thread_local std::shared_ptr<MemoryAccount> account;
  return account;
}

}  // namespace

MemoryAccountScope::MemoryAccountScope(std::shared_ptr<MemoryAccount> account)
    : previous_(std::exchange(current_account(), std::move(account))) {}

MemoryAccountScope::~MemoryAccountScope() { current_account() = std::move(previous_); }

void CpuBackend::charge(void* ptr, std::size_t size) {
  const std::shared_ptr<MemoryAccount>& account = current_account();
  if (!account) return;
  const std::size_t now = account->in_use.fetch_add(size) + size;
  std::size_t peak = account->peak.load();
  while (now > peak && !account->peak.compare_exchange_weak(peak, now)) {
  }
  charged_.emplace(ptr, account);
}

CpuBackend::CpuBackend(std::size_t cache_limit_bytes) : cache_limit_(cache_limit_bytes) {}

CpuBackend::~CpuBackend() { empty_cache(); }

std::size_t CpuBackend::rounded(std::size_t nbytes) {
  const std::size_t unit = nbytes >= kCacheMinBytes ? 4096 : 64;
  return (nbytes + unit - 1) / unit * unit;
}

void* CpuBackend::take_cached(std::size_t size) {
  auto it = free_blocks_.lower_bound(size);
  if (it == free_blocks_.end() || it->first > size * kMaxWaste) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  if (it->second.empty()) free_blocks_.erase(it);
  return p;
}

void* CpuBackend::allocate(std::size_t nbytes, int /*index*/) {
  if (nbytes == 0) return nullptr;
  const std::size_t size = rounded(nbytes);
  const bool cacheable = size >= kCacheMinBytes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cacheable) {
      if (void* p = take_cached(size)) {
        const std::size_t block = block_sizes_.at(p);
        stats_.cached -= block;
        stats_.in_use += block;
        stats_.peak = std::max(stats_.peak, stats_.in_use);
        charge(p, block);
        return p;
      }
    }
    stats_.in_use += size;
    stats_.peak = std::max(stats_.peak, stats_.in_use);
    ++stats_.os_allocations;
  }
  void* p = nullptr;
  if (size >= kHugeMinBytes) {
    // posix_memalign: aligned_alloc wants the size to be a multiple of the alignment. The advice
    // is only that: where transparent huge pages are off, the block keeps 4 KiB pages.
    if (posix_memalign(&p, kHugePage, size) != 0) p = nullptr;
    if (p != nullptr) madvise(p, size / kHugePage * kHugePage, MADV_HUGEPAGE);
  } else {
    p = std::aligned_alloc(64, size);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (p == nullptr) {
    stats_.in_use -= size;
    TANDEM_FAIL("cpu: out of memory allocating ", nbytes, " bytes (", stats_.in_use,
                " bytes in use by tensors, ", stats_.cached, " cached)");
  }
  if (cacheable) block_sizes_.emplace(p, size);
  charge(p, size);
  return p;
}

void CpuBackend::deallocate(void* ptr, std::size_t nbytes, int /*index*/) {
  if (ptr == nullptr) return;
  std::size_t size = rounded(nbytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (size >= kCacheMinBytes) {
      // The block may be larger than this request's rounded size (taken from the cache).
      const auto block = block_sizes_.find(ptr);
      TANDEM_CHECK(block != block_sizes_.end(), "cpu: freeing ", ptr, " (", nbytes,
                   " bytes), which this allocator did not hand out");
      size = block->second;
      if (stats_.cached + size > cache_limit_) block_sizes_.erase(block);
    }
    stats_.in_use -= size;
    if (!charged_.empty()) {
      if (auto it = charged_.find(ptr); it != charged_.end()) {
        it->second->in_use.fetch_sub(size);
        charged_.erase(it);
      }
    }
    if (size >= kCacheMinBytes && stats_.cached + size <= cache_limit_) {
      free_blocks_[size].push_back(ptr);
      stats_.cached += size;
      return;
    }
  }
  std::free(ptr);
}

void CpuBackend::zero(void* ptr, std::size_t nbytes, int) { std::memset(ptr, 0, nbytes); }

void CpuBackend::copy(void* dst, Device, const void* src, Device, std::size_t nbytes) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}

MemoryStats CpuBackend::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CpuBackend::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [size, blocks] : free_blocks_) {
    for (void* p : blocks) {
      block_sizes_.erase(p);
      std::free(p);
    }
  }
  free_blocks_.clear();
  stats_.cached = 0;
}

CpuBackend& cpu_backend() {
  // Bounded cache: TANDEM_CPU_CACHE_MB overrides the default of 4 GiB. Never destroyed, so tensors
  // held by other static objects can still be freed during exit.
  static CpuBackend* backend = new CpuBackend([] {
    const char* env = std::getenv("TANDEM_CPU_CACHE_MB");
    const std::size_t mb = env ? std::strtoull(env, nullptr, 10) : 4096;
    return mb * 1024 * 1024;
  }());
  return *backend;
}

}  // namespace tandem
