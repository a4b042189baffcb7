// The caching allocator and the CUDA backend on a real GPU: data round trips, reuse on a stream,
// statistics against the driver's own figures, the out-of-memory message, reuse across streams
// only after the other stream's work, copies between GPUs. Skips, saying why, without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu_support.h"
#include "tandem/device/allocator.h"
#include "tandem/device/cuda/caching_allocator.h"
#include "tandem/device/cuda/check.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/memory.h"
#include "tandem/device/cuda/stream.h"

namespace tandem::cuda {
namespace {

constexpr std::size_t kMiB = 1024 * 1024;
const Device kGpu0{DeviceType::CUDA, 0};

std::size_t driver_free_bytes() {
  std::size_t free = 0;
  std::size_t total = 0;
  const DeviceGuard guard(0);
  TANDEM_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

TEST(CudaAllocator, DataSurvivesRoundTripsThroughTheBackend) {
  TANDEM_REQUIRE_GPU();
  const std::size_t n = 3 * kMiB + 123;  // not a multiple of anything
  std::vector<std::uint8_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::uint8_t>(i * 7 + 3);
  void* a = device_allocate(kGpu0, n);
  void* b = device_allocate(kGpu0, n);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 256, 0u);
  device_copy(a, kGpu0, host.data(), kCPU, n);  // host -> GPU
  device_copy(b, kGpu0, a, kGpu0, n);           // GPU -> same GPU, stream-ordered
  std::vector<std::uint8_t> back(n, 0);
  device_copy(back.data(), kCPU, b, kGpu0, n);  // GPU -> host
  EXPECT_EQ(std::memcmp(back.data(), host.data(), n), 0);
  backend(DeviceType::CUDA).synchronize(0);
  device_free(kGpu0, a, n);
  device_free(kGpu0, b, n);
  EXPECT_EQ(device_allocate(kGpu0, 0), nullptr);
}

TEST(CudaAllocator, FreedBlocksAreReusedOnTheirStream) {
  TANDEM_REQUIRE_GPU();
  const cudaStream_t s = test_stream(3);  // its own stream: no other test's blocks
  const AllocatorStats before = memory_stats(0);
  void* p = allocate(0, 5 * kMiB, s);
  free(0, p);
  void* q = allocate(0, 5 * kMiB, s);
  EXPECT_EQ(q, p);
  const AllocatorStats after = memory_stats(0);
  EXPECT_EQ(after.allocations - before.allocations, 2u);
  EXPECT_GE(after.cache_hits - before.cache_hits, 1u);
  EXPECT_LE(after.device_allocations - before.device_allocations, 1u);
  EXPECT_EQ(caching_allocator(0).block_stream(q), reinterpret_cast<StreamId>(s));
  free(0, q);
}

TEST(CudaAllocator, StatisticsMatchTheDriver) {
  TANDEM_REQUIRE_GPU();
  empty_cache();
  const AllocatorStats before = memory_stats(0);
  const std::size_t free_before = driver_free_bytes();
  const std::size_t n = 72 * kMiB;  // its own 72 MiB segment
  void* p = allocate(0, n, test_stream(0));
  AllocatorStats s = memory_stats(0);
  EXPECT_EQ(s.in_use - before.in_use, n);
  EXPECT_EQ(s.reserved - before.reserved, n);
  EXPECT_EQ(s.device_allocations - before.device_allocations, 1u);
  EXPECT_GE(s.peak_in_use, s.in_use);
  EXPECT_GE(free_before - driver_free_bytes(), n);  // the driver saw a real cudaMalloc
  free(0, p);
  s = memory_stats(0);
  EXPECT_EQ(s.in_use, before.in_use);
  EXPECT_EQ(s.reserved - before.reserved, n);  // cached, not given back
  empty_cache();
  s = memory_stats(0);
  EXPECT_EQ(s.reserved, before.reserved);
  EXPECT_EQ(s.device_frees - before.device_frees, 1u);
  EXPECT_GE(driver_free_bytes() + 32 * kMiB, free_before);  // back with the driver, give or take
  reset_peak_memory(0);
  EXPECT_EQ(memory_stats(0).peak_in_use, memory_stats(0).in_use);
}

TEST(CudaAllocator, OutOfMemorySaysWhatWasAskedAndWhatIsFree) {
  TANDEM_REQUIRE_GPU();
  const GpuInfo info = gpu_info(0);
  const std::size_t too_much = info.total_memory + 1024 * kMiB;
  const std::size_t ooms = memory_stats(0).out_of_memory;
  try {
    allocate(0, too_much, test_stream(0));
    FAIL() << "expected OutOfMemoryError for " << too_much << " bytes";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    std::printf("the message: %s\n", m.c_str());
    EXPECT_NE(m.find("cuda:0: out of memory: tried to allocate " + format_bytes(too_much)),
              std::string::npos)
        << m;
    EXPECT_NE(m.find(std::to_string(too_much) + " bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("in use"), std::string::npos) << m;
    EXPECT_NE(m.find("reserved"), std::string::npos) << m;
    EXPECT_NE(m.find("free of " + format_bytes(info.total_memory) + " total"), std::string::npos)
        << m;
  }
  EXPECT_EQ(memory_stats(0).out_of_memory, ooms + 1);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);   // the failed cudaMalloc left no error behind
  void* p = allocate(0, kMiB, test_stream(0));  // and the device still works
  EXPECT_NE(p, nullptr);
  free(0, p);
}

TEST(CudaAllocator, BlockUsedOnAnotherStreamIsReusedOnlyAfterThatWork) {
  TANDEM_REQUIRE_GPU();
  const cudaStream_t mine = test_stream(1);  // a stream no other test allocates for
  const cudaStream_t other = test_stream(2);
  const AllocatorStats before = memory_stats(0);
  void* p = allocate(0, 1000, mine);
  {
    Gate gate(other);            // `other` is busy until the gate opens
    record_stream(0, p, other);  // ... and (say) reads p
    free(0, p);
    EXPECT_EQ(memory_stats(0).pending_blocks, before.pending_blocks + 1);
    void* q = allocate(0, 1000, mine);
    EXPECT_NE(q, p) << "reused while another stream may still read it";
    gate.open();
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(other));
    void* r = allocate(0, 1000, mine);  // the event has completed: p comes back
    EXPECT_EQ(r, p);
    EXPECT_EQ(memory_stats(0).pending_blocks, before.pending_blocks);
    free(0, q);
    free(0, r);
    EXPECT_NO_THROW(caching_allocator(0).check_invariants());
  }
}

TEST(CudaAllocator, EmptyCacheWaitsForOtherStreams) {
  TANDEM_REQUIRE_GPU();
  const cudaStream_t mine = test_stream(4);
  const cudaStream_t other = test_stream(2);
  empty_cache();
  const AllocatorStats before = memory_stats(0);
  void* p = allocate(0, 30 * kMiB, mine);
  Gate gate(other);
  record_stream(0, p, other);
  free(0, p);
  const OpenLater opener(gate, std::chrono::milliseconds(50));
  empty_cache();  // waits for `other`, then gives the segment back
  EXPECT_EQ(memory_stats(0).reserved, before.reserved);
  EXPECT_EQ(memory_stats(0).pending_blocks, 0u);
}

TEST(CudaAllocator, AllocationsFollowTheCurrentStream) {
  TANDEM_REQUIRE_GPU();
  EXPECT_EQ(current_stream(0), compute_stream(0));
  EXPECT_NE(copy_stream(0), compute_stream(0));
  {
    const StreamGuard guard(0, copy_stream(0));
    EXPECT_EQ(current_stream(0), copy_stream(0));
    void* p = device_allocate(kGpu0, 4096);
    EXPECT_EQ(caching_allocator(0).block_stream(p), reinterpret_cast<StreamId>(copy_stream(0)));
    device_free(kGpu0, p, 4096);
  }
  EXPECT_EQ(current_stream(0), compute_stream(0));
  void* p = device_allocate(kGpu0, 4096);
  EXPECT_EQ(caching_allocator(0).block_stream(p), reinterpret_cast<StreamId>(compute_stream(0)));
  device_free(kGpu0, p, 4096);
}

TEST(CudaAllocator, ManyThreadsAllocateAndFree) {
  TANDEM_REQUIRE_GPU();
  const std::size_t in_use = memory_stats(0).in_use;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      std::vector<void*> held;
      for (int i = 0; i < 300; ++i) {
        const std::size_t n = static_cast<std::size_t>((i * 7919 + t * 104729) % (3 * kMiB)) + 1;
        held.push_back(allocate(0, n, compute_stream(0)));
        if (held.size() > 8) {
          free(0, held.front());
          held.erase(held.begin());
        }
      }
      for (void* p : held) free(0, p);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(memory_stats(0).in_use, in_use);
  EXPECT_NO_THROW(caching_allocator(0).check_invariants());
}

TEST(CudaAllocator, DevicesAndPeerAccessAsTheRuntimeSays) {
  TANDEM_REQUIRE_GPU();
  const int n = device_count();
  for (int i = 0; i < n; ++i) {
    const GpuInfo info = gpu_info(i);
    std::vector<int> expected;
    for (int j = 0; j < n; ++j) {
      int can = 0;
      if (i != j) TANDEM_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, i, j));
      if (can) expected.push_back(j);
      EXPECT_EQ(can_access_peer(i, j), can != 0) << i << " -> " << j;
    }
    EXPECT_EQ(info.peers, expected) << "cuda:" << i;
  }
  EXPECT_THROW(check_device(Device(DeviceType::CUDA, n)), Error);
  EXPECT_NO_THROW(check_device(Device(DeviceType::CUDA, n - 1)));
}

TEST(CudaAllocator, CopiesBetweenGpus) {
  TANDEM_REQUIRE_GPU();
  if (device_count() < 2) GTEST_SKIP() << "needs 2 GPUs; " << device_count() << " visible";
  const Device gpu1{DeviceType::CUDA, 1};
  const std::size_t n = 2 * kMiB + 5;
  std::vector<std::uint8_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::uint8_t>(i * 13);
  void* a = device_allocate(kGpu0, n);
  void* b = device_allocate(gpu1, n);
  device_copy(a, kGpu0, host.data(), kCPU, n);
  device_copy(b, gpu1, a, kGpu0, n);
  std::vector<std::uint8_t> back(n, 0);
  device_copy(back.data(), kCPU, b, gpu1, n);
  EXPECT_EQ(std::memcmp(back.data(), host.data(), n), 0);
  device_free(kGpu0, a, n);
  device_free(gpu1, b, n);
}

}  // namespace
}  // namespace tandem::cuda
