// CUDA graphs: a capture runs nothing and a replay runs the captured work on the current stream,
// again at each replay; memory allocated during the capture is cached for the capture stream, not
// the compute stream, and stays the graph's through empty_cache(); a capture that waits for the
// GPU, or copies from the host, fails with the reason and leaves the device usable; checks
// deferred during the capture speak after each replay, not after the capture.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "errors.h"
#include "gpu_support.h"
#include "tandem/device/allocator.h"
#include "tandem/device/cuda/caching_allocator.h"
#include "tandem/device/cuda/deferred_checks.h"
#include "tandem/device/cuda/graph.h"
#include "tandem/device/cuda/memory.h"

namespace tandem::cuda {
namespace {

const Device kGpu0(DeviceType::CUDA, 0);

std::uint32_t read_word(const void* device_ptr) {
  std::uint32_t out = 0;
  device_copy(&out, kCPU, device_ptr, kGpu0, sizeof out);
  return out;
}

// A 4-byte word on cuda:0 holding `value` (device_free(kGpu0, p, 4) when done).
void* gpu_word(std::uint32_t value) {
  void* p = device_allocate(kGpu0, 4);
  device_copy(p, kGpu0, &value, kCPU, 4);
  return p;
}

TEST(CudaGraph, ACaptureRunsNothingAndEachReplayRunsTheWork) {
  TANDEM_REQUIRE_GPU();
  void* a = gpu_word(7);
  void* b = gpu_word(0);
  auto graph = CapturedGraph::capture(0, [&] {
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(b, a, 4, cudaMemcpyDeviceToDevice, current_stream(0)));
  });
  EXPECT_EQ(read_word(b), 0u) << "the capture ran the copy";
  EXPECT_GE(graph->nodes(), 1u);
  graph->replay();
  EXPECT_EQ(read_word(b), 7u);
  const std::uint32_t nine = 9;
  device_copy(a, kGpu0, &nine, kCPU, 4);
  graph->replay();  // the same addresses, their new contents
  EXPECT_EQ(read_word(b), 9u);
  device_free(kGpu0, a, 4);
  device_free(kGpu0, b, 4);
}

TEST(CudaGraph, MemoryAllocatedDuringTheCaptureIsCachedForTheCaptureStream) {
  TANDEM_REQUIRE_GPU();
  void* inside = nullptr;
  cudaStream_t capture_stream = nullptr;
  auto graph = CapturedGraph::capture(0, [&] {
    capture_stream = current_stream(0);
    inside = device_allocate(kGpu0, 1 << 16);
    TANDEM_CUDA_CHECK(cudaMemsetAsync(inside, 0, 1 << 16, capture_stream));
  });
  EXPECT_NE(capture_stream, compute_stream(0)) << "the capture ran on the compute stream";
  EXPECT_EQ(caching_allocator(0).block_stream(inside),
            reinterpret_cast<StreamId>(capture_stream));
  graph->replay();
  device_free(kGpu0, inside, 1 << 16);
  // An eager allocation of the same size does not get the graph's block.
  void* eager = device_allocate(kGpu0, 1 << 16);
  EXPECT_EQ(caching_allocator(0).block_stream(eager),
            reinterpret_cast<StreamId>(compute_stream(0)));
  device_free(kGpu0, eager, 1 << 16);
}

TEST(CudaGraph, ATemporaryFreedDuringTheCaptureStaysTheGraphsThroughEmptyCache) {
  TANDEM_REQUIRE_GPU();
  constexpr std::size_t kBytes = 32 << 20;  // a large segment of its own
  void* a = gpu_word(5);
  void* b = gpu_word(0);
  // Earlier tests' cached segments go first, so that the only free segment left is the graph's.
  empty_cache();
  // a -> temporary -> b; the temporary is freed inside the capture, as activations are.
  auto graph = CapturedGraph::capture(0, [&] {
    void* temp = device_allocate(kGpu0, kBytes);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(temp, a, 4, cudaMemcpyDeviceToDevice, current_stream(0)));
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(b, temp, 4, cudaMemcpyDeviceToDevice, current_stream(0)));
    device_free(kGpu0, temp, kBytes);
  });
  const std::size_t reserved = memory_stats(0).reserved;
  empty_cache();  // must not give the graph's temporary back to the driver
  EXPECT_EQ(memory_stats(0).reserved, reserved);
  graph->replay();
  EXPECT_EQ(read_word(b), 5u);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  graph.reset();  // the graph gone, its memory may go back
  empty_cache();
  EXPECT_LE(memory_stats(0).reserved + kBytes, reserved);
  device_free(kGpu0, a, 4);
  device_free(kGpu0, b, 4);
}

TEST(CudaGraph, ACaptureThatWaitsForTheGpuFailsAndLeavesTheDeviceUsable) {
  TANDEM_REQUIRE_GPU();
  const std::string error = testing::error_of([] {
    (void)CapturedGraph::capture(
        0, [] { TANDEM_CUDA_CHECK(cudaStreamSynchronize(current_stream(0))); });
  });
  testing::expect_contains(error, "CUDA graph capture on cuda:0 failed");
  // A copy from the host is refused by name: its replay would read the host memory's later bytes.
  void* target = device_allocate(kGpu0, 4);
  const std::uint32_t one = 1;
  testing::expect_contains(testing::error_of([&] {
                             (void)CapturedGraph::capture(
                                 0, [&] { device_copy(target, kGpu0, &one, kCPU, 4); });
                           }),
                           "a copy of 4 bytes from the host to cuda:0 while a CUDA graph is being "
                           "captured");
  device_free(kGpu0, target, 4);
  void* p = device_allocate(kGpu0, 4);
  const std::uint32_t five = 5;
  device_copy(p, kGpu0, &five, kCPU, 4);
  EXPECT_EQ(read_word(p), 5u);
  device_free(kGpu0, p, 4);
  // And a later capture works.
  auto graph = CapturedGraph::capture(0, [] {});
  EXPECT_NO_THROW(graph->replay());
}

TEST(CudaGraph, ChecksDeferredDuringTheCaptureSpeakAfterEachReplay) {
  TANDEM_REQUIRE_GPU();
  void* source = device_allocate(kGpu0, 8);
  void* flag = device_allocate(kGpu0, 8);
  std::shared_ptr<const void> keep(flag, [](const void* p) {
    device_free(kGpu0, const_cast<void*>(p), 8);
  });
  const std::uint64_t passed = ~std::uint64_t{0};
  device_copy(source, kGpu0, &passed, kCPU, 8);
  auto graph = CapturedGraph::capture(0, [&] {
    // The "check kernel": the flag takes the source's value.
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(flag, source, 8, cudaMemcpyDeviceToDevice, current_stream(0)));
    defer_check({.device = 0, .flag = flag, .keep = keep, .message = [](std::uint64_t v) {
                   return "replayed check failed with " + std::to_string(v);
                 }});
  });
  EXPECT_EQ(pending_checks(), 0u) << "the capture's check stayed pending before any replay";
  graph->replay();
  EXPECT_EQ(pending_checks(), 1u);
  EXPECT_NO_THROW(read_word(source));  // the wait resolves it: passed
  const std::uint64_t failed = 3;
  device_copy(source, kGpu0, &failed, kCPU, 8);
  graph->replay();
  testing::expect_contains(testing::error_of([&] { read_word(source); }),
                           "replayed check failed with 3");
  device_free(kGpu0, source, 8);
}

}  // namespace
}  // namespace tandem::cuda
