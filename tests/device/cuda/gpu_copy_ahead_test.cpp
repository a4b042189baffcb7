// CopyAhead on a real GPU (skipping, saying why, without one): its scope makes the copy stream
// current, the compute stream waits for the marked copies, and memory the copies allocated is not
// handed out again while compute work that uses it is queued. A missing GPU is refused anywhere.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

#include "gpu_support.h"
#include "tandem/device/cuda/caching_allocator.h"
#include "tandem/device/cuda/copy_ahead.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/stream.h"

namespace tandem::cuda {
namespace {

TEST(CopyAhead, RefusesAGpuThatIsNotThere) {
  const int missing = device_count();
  try {
    CopyAhead copy(missing);
    FAIL() << "CopyAhead(" << missing << ") succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:" + std::to_string(missing) + " does not exist"),
              std::string::npos)
        << e.what();
  }
}

TEST(CopyAheadGpu, ItsScopeMakesTheCopyStreamCurrent) {
  TANDEM_REQUIRE_GPU();
  CopyAhead copy(0);
  EXPECT_EQ(current_stream(0), compute_stream(0));
  {
    const auto scope = copy.scope();
    EXPECT_EQ(current_stream(0), copy_stream(0));
  }
  EXPECT_EQ(current_stream(0), compute_stream(0));
}

TEST(CopyAheadGpu, TheComputeStreamWaitsForTheMarkedCopies) {
  TANDEM_REQUIRE_GPU();
  CopyAhead copy(0);
  Event after(0);
  {
    Gate gate(copy_stream(0));  // a copy still under way
    copy.done();
    copy.order_current_stream_after();
    after.record(compute_stream(0));
    EXPECT_FALSE(after.query());
    gate.open();
    after.synchronize();
  }
  EXPECT_TRUE(after.query());
}

TEST(CopyAheadGpu, CopiedMemoryIsNotReusedWhileTheComputeStreamStillUsesIt) {
  TANDEM_REQUIRE_GPU();
  CopyAhead copy(0);
  constexpr std::size_t kBytes = std::size_t{3} << 20;
  void* first = allocate(0, kBytes, copy_stream(0));
  copy.done();
  copy.order_current_stream_after();
  copy.used_on_current_stream(first);
  {
    Gate gate(compute_stream(0));  // compute work reading `first` is still queued
    free(0, first);
    void* second = allocate(0, kBytes, copy_stream(0));
    EXPECT_NE(second, first);
    free(0, second);
  }
}

}  // namespace
}  // namespace tandem::cuda
