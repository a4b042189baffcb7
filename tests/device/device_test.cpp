// Tests of device names and the backend table on a CPU-only build.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <thread>

#include "tandem/base/check.h"
#include "tandem/device/allocator.h"
#include "tandem/device/cpu_allocator.h"
#include "tandem/device/device.h"

namespace tandem {
namespace {

TEST(Device, ParsesAndPrints) {
  EXPECT_EQ(Device("cpu"), (Device{DeviceType::CPU, 0}));
  EXPECT_EQ(Device("cuda:1"), (Device{DeviceType::CUDA, 1}));
  EXPECT_EQ(Device("cuda"), (Device{DeviceType::CUDA, 0}));
  EXPECT_EQ(Device("cuda:1").str(), "cuda:1");
  EXPECT_EQ(Device("cpu").str(), "cpu");
}

TEST(Device, RejectsNonsense) {
  EXPECT_THROW(Device("gpu"), Error);
  EXPECT_THROW(Device("cuda:"), Error);
  EXPECT_THROW(Device("cuda:x"), Error);
  EXPECT_THROW(Device("cuda:-1"), Error);
  EXPECT_THROW(Device("cuda:1x"), Error);
}

TEST(Backend, CpuAllocatesAlignedMemory) {
  void* p = device_allocate(kCPU, 100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  device_free(kCPU, p, 100);
}

TEST(Backend, MemoryIsChargedToTheAllocatingThreadsAccount) {
  auto account = std::make_shared<MemoryAccount>();
  void* unaccounted = device_allocate(kCPU, 1000);
  void* big = nullptr;
  void* small = nullptr;
  {
    const MemoryAccountScope scope(account);
    big = device_allocate(kCPU, 200 * 1024);  // cached-size block: rounded to 4 KiB pages
    small = device_allocate(kCPU, 100);       // rounded to 64 bytes
  }
  EXPECT_EQ(account->in_use.load(), 200u * 1024 + 128);
  void* after = device_allocate(kCPU, 4096);  // the scope has ended: not charged
  EXPECT_EQ(account->in_use.load(), 200u * 1024 + 128);
  // Freed on another thread: still credited to the account that was charged.
  std::thread([&] { device_free(kCPU, big, 200 * 1024); }).join();
  EXPECT_EQ(account->in_use.load(), 128u);
  EXPECT_EQ(account->peak.load(), 200u * 1024 + 128);
  account->reset_peak();
  EXPECT_EQ(account->peak.load(), 128u);
  device_free(kCPU, small, 100);
  device_free(kCPU, after, 4096);
  device_free(kCPU, unaccounted, 1000);
  EXPECT_EQ(account->in_use.load(), 0u);
}

TEST(Backend, CpuCacheServesASmallerRequestFromABlockAtMostTwiceItsSize) {
  CpuBackend backend(64u << 20);
  constexpr std::size_t kBlock = 1u << 20;
  void* block = backend.allocate(kBlock, 0);
  backend.deallocate(block, kBlock, 0);
  EXPECT_EQ(backend.stats().cached, kBlock);
  EXPECT_EQ(backend.stats().os_allocations, 1u);

  // 600 KiB fits the cached 1 MiB block: no new allocation, and the whole block counts as in use.
  void* reused = backend.allocate(600u << 10, 0);
  EXPECT_EQ(reused, block);
  EXPECT_EQ(backend.stats().os_allocations, 1u);
  EXPECT_EQ(backend.stats().in_use, kBlock);
  EXPECT_EQ(backend.stats().cached, 0u);
  backend.deallocate(reused, 600u << 10, 0);  // freed by its request size: the block returns whole
  EXPECT_EQ(backend.stats().in_use, 0u);
  EXPECT_EQ(backend.stats().cached, kBlock);

  // 400 KiB would waste more than half of the block: it gets its own.
  void* own = backend.allocate(400u << 10, 0);
  EXPECT_NE(own, block);
  EXPECT_EQ(backend.stats().os_allocations, 2u);
  EXPECT_EQ(backend.stats().in_use, 400u << 10);
  backend.deallocate(own, 400u << 10, 0);
  EXPECT_EQ(backend.stats().cached, kBlock + (400u << 10));
}

TEST(Backend, CpuCachePrefersTheSmallestBlockThatFits) {
  CpuBackend backend(64u << 20);
  void* large = backend.allocate(900u << 10, 0);
  void* exact = backend.allocate(512u << 10, 0);
  backend.deallocate(large, 900u << 10, 0);
  backend.deallocate(exact, 512u << 10, 0);
  EXPECT_EQ(backend.allocate(500u << 10, 0), exact);
  EXPECT_EQ(backend.allocate(500u << 10, 0), large);
  EXPECT_EQ(backend.stats().os_allocations, 2u);
  backend.deallocate(exact, 500u << 10, 0);
  backend.deallocate(large, 500u << 10, 0);
  EXPECT_EQ(backend.stats().in_use, 0u);
}

TEST(Backend, CpuCacheBeyondItsLimitGoesBackToTheSystem) {
  CpuBackend backend(1u << 20);
  void* a = backend.allocate(800u << 10, 0);
  void* b = backend.allocate(800u << 10, 0);
  backend.deallocate(a, 800u << 10, 0);
  backend.deallocate(b, 800u << 10, 0);  // would exceed the 1 MiB cache: freed
  EXPECT_EQ(backend.stats().cached, 800u << 10);
  void* c = backend.allocate(800u << 10, 0);
  void* d = backend.allocate(800u << 10, 0);
  EXPECT_EQ(backend.stats().os_allocations, 3u);
  backend.deallocate(c, 800u << 10, 0);
  backend.deallocate(d, 800u << 10, 0);
  EXPECT_EQ(backend.stats().in_use, 0u);
}

// Blocks of 4 MiB and more start on a 2 MiB boundary (and are marked for transparent huge
// pages), so a fresh activation costs one page fault per 2 MiB instead of one per 4 KiB; smaller
// blocks keep the 64-byte alignment. Every byte of a large block is usable.
TEST(Backend, CpuLargeBlocksStartOnAHugePageBoundary) {
  CpuBackend backend(64u << 20);
  constexpr std::size_t kLarge = (6u << 20) + 4096;
  auto* large = static_cast<unsigned char*>(backend.allocate(kLarge, 0));
  void* small = backend.allocate(1u << 20, 0);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(large) % CpuBackend::kHugePage, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small) % 64, 0u);
  for (std::size_t i = 0; i < kLarge; ++i) large[i] = static_cast<unsigned char>(i * 7);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kLarge; ++i) wrong += large[i] != static_cast<unsigned char>(i * 7);
  EXPECT_EQ(wrong, 0u);
  backend.deallocate(large, kLarge, 0);
  backend.deallocate(small, 1u << 20, 0);
  EXPECT_EQ(backend.stats().in_use, 0u);
}

TEST(Backend, MissingCudaIsAClearError) {
  if (backend_available(DeviceType::CUDA)) GTEST_SKIP() << "this build has a CUDA backend";
  try {
    check_device(Device("cuda:0"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda is not available"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
