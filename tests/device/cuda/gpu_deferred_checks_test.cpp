// Deferred GPU checks: a failed flag is reported at the thread's next wait for the GPU (a copy to
// the host), once; a passed one says nothing; another thread's waits leave a thread's checks alone;
// and a thread that never waits cannot pile up more than kMaxPendingChecks.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "errors.h"
#include "gpu_support.h"
#include "tandem/device/allocator.h"
#include "tandem/device/cuda/deferred_checks.h"

namespace tandem::cuda {
namespace {

const Device kGpu0(DeviceType::CUDA, 0);

// A device flag holding `value`, and the check that reads it.
DeferredCheck check_of(std::uint64_t value, std::string words) {
  void* flag = device_allocate(kGpu0, sizeof value);
  device_copy(flag, kGpu0, &value, kCPU, sizeof value);
  std::shared_ptr<const void> keep(flag, [](const void* p) {
    device_free(kGpu0, const_cast<void*>(p), sizeof(std::uint64_t));
  });
  return {.device = 0,
          .flag = flag,
          .keep = keep,
          .message = [words](std::uint64_t v) { return words + " " + std::to_string(v); }};
}

// A wait for cuda:0 as the ops see it: a copy of a few bytes to the host.
void wait_for_gpu() {
  static void* scratch = device_allocate(kGpu0, 8);
  std::uint64_t out = 0;
  device_copy(&out, kCPU, scratch, kGpu0, sizeof out);
}

TEST(DeferredChecks, AFailedCheckIsReportedAtTheNextWaitOnce) {
  TANDEM_REQUIRE_GPU();
  defer_check(check_of(~std::uint64_t{0}, "passed"));
  defer_check(check_of(7, "first failure"));
  defer_check(check_of(9, "second failure"));
  EXPECT_EQ(pending_checks(), 3u);
  testing::expect_contains(testing::error_of([] { wait_for_gpu(); }), "first failure 7");
  EXPECT_EQ(pending_checks(), 0u);
  EXPECT_NO_THROW(wait_for_gpu());
}

TEST(DeferredChecks, AnotherThreadsWaitsLeaveThisThreadsChecksAlone) {
  TANDEM_REQUIRE_GPU();
  defer_check(check_of(3, "mine"));
  std::thread other([] {
    EXPECT_NO_THROW(wait_for_gpu());
    EXPECT_EQ(pending_checks(), 0u);
  });
  other.join();
  EXPECT_EQ(pending_checks(), 1u);
  testing::expect_contains(testing::error_of([] { wait_for_gpu(); }), "mine 3");
}

TEST(DeferredChecks, AThreadThatNeverWaitsResolvesThemPastTheLimit) {
  TANDEM_REQUIRE_GPU();
  for (std::size_t i = 0; i < kMaxPendingChecks; ++i) {
    defer_check(check_of(~std::uint64_t{0}, "passed"));
  }
  EXPECT_EQ(pending_checks(), kMaxPendingChecks);
  defer_check(check_of(~std::uint64_t{0}, "passed"));  // one more: all resolved at once
  EXPECT_EQ(pending_checks(), 0u);
}

}  // namespace
}  // namespace tandem::cuda
