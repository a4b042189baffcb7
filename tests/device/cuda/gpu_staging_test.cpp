// Copies from the host to a GPU through the pinned staging blocks: they return while the GPU's
// stream is still busy (no wait), the host memory can be overwritten at once without changing what
// arrives, a block is reused only after its copy has run (asking whether it has leaves no error
// behind), and a copy above the staging limit still arrives (synchronously).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gpu_support.h"
#include "tandem/device/allocator.h"
#include "tandem/device/cuda/pinned_staging.h"

namespace tandem::cuda {
namespace {

const Device kGpu0(DeviceType::CUDA, 0);

std::vector<std::int32_t> read_back(const void* gpu, std::size_t count) {
  std::vector<std::int32_t> out(count);
  device_copy(out.data(), kCPU, gpu, kGpu0, count * sizeof(std::int32_t));
  return out;
}

TEST(PinnedStaging, CopiesToTheGpuReturnAtOnceAndCarryTheValuesOfTheirCall) {
  TANDEM_REQUIRE_GPU();
  constexpr std::size_t kCount = 50000, kCopies = 8;
  std::vector<void*> targets;
  for (std::size_t k = 0; k < kCopies; ++k) {
    targets.push_back(device_allocate(kGpu0, kCount * sizeof(std::int32_t)));
  }
  std::vector<std::int32_t> host(kCount);
  {
    const Gate gate(compute_stream(0));  // the stream cannot start any of the copies yet
    for (std::size_t k = 0; k < kCopies; ++k) {
      for (std::size_t i = 0; i < kCount; ++i) host[i] = static_cast<std::int32_t>(k * kCount + i);
      device_copy(targets[k], kGpu0, host.data(), kCPU, kCount * sizeof(std::int32_t));
    }
    for (auto& v : host) v = -1;  // the copies are still queued: this must not reach the GPU
    // Every copy still waits behind the gate, so each holds a block of its own.
    EXPECT_GE(pinned_staging().stats(0).blocks, kCopies);
    // Each later copy found the earlier blocks "not ready": an answer, which must not be left as
    // the thread's last error (the next kernel launch's check would report it).
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }  // opens the gate and lets the stream finish
  for (std::size_t k = 0; k < kCopies; ++k) {
    const std::vector<std::int32_t> got = read_back(targets[k], kCount);
    EXPECT_EQ(got.front(), static_cast<std::int32_t>(k * kCount)) << "copy " << k;
    EXPECT_EQ(got.back(), static_cast<std::int32_t>(k * kCount + kCount - 1)) << "copy " << k;
  }
  // The copies have run: their blocks serve new copies instead of new blocks.
  const std::size_t blocks_after = pinned_staging().stats(0).blocks;
  for (std::size_t k = 0; k < kCopies; ++k) {
    device_copy(targets[k], kGpu0, host.data(), kCPU, kCount * sizeof(std::int32_t));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(compute_stream(0)));
  }
  EXPECT_EQ(pinned_staging().stats(0).blocks, blocks_after);
  EXPECT_LE(pinned_staging().stats(0).bytes, PinnedStaging::kMaxHeldBytes);
  for (void* p : targets) device_free(kGpu0, p, kCount * sizeof(std::int32_t));
}

TEST(PinnedStaging, ACopyAboveTheStagingLimitArrivesToo) {
  TANDEM_REQUIRE_GPU();
  const std::size_t count = PinnedStaging::kMaxCopyBytes / sizeof(std::int32_t) + 1024;
  std::vector<std::int32_t> host(count);
  for (std::size_t i = 0; i < count; ++i) host[i] = static_cast<std::int32_t>(i * 3);
  void* gpu = device_allocate(kGpu0, count * sizeof(std::int32_t));
  device_copy(gpu, kGpu0, host.data(), kCPU, count * sizeof(std::int32_t));
  const std::vector<std::int32_t> got = read_back(gpu, count);
  EXPECT_EQ(got, host);
  device_free(kGpu0, gpu, count * sizeof(std::int32_t));
}

}  // namespace
}  // namespace tandem::cuda
