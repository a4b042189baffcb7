// The NCCL RankCollective's refusals, on any machine with fewer than two GPUs: a CPU device, and
// GPUs NCCL cannot join, whose error says the way out (--gpu-reduction host). Summing on two GPUs
// is checked by parallel/cuda/nccl_collective_gpu_test.cpp.
#include <gtest/gtest.h>

#include "errors.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/parallel/nccl_collective.h"

namespace tandem::testing {
namespace {

TEST(NcclCollective, RefusesCpuDevicesAndSaysTheWayOutWhenNcclCannotStart) {
  if (cuda::device_count() >= 2) GTEST_SKIP() << "two GPUs are visible: NCCL would start";
  const Device gpu0(DeviceType::CUDA, 0), gpu1(DeviceType::CUDA, 1);
  expect_contains(error_of([] { (void)parallel::make_nccl_collective({kCPU, kCPU}); }),
                  "DataParallel: NCCL sums GPU replicas only, not cpu");
  const std::string message = error_of([&] { (void)parallel::make_nccl_collective({gpu0, gpu1}); });
  if (!parallel::nccl_collective_built()) {
    expect_contains(message, "tandem was built without NCCL");
  } else {
    expect_contains(message, "nccl: ncclCommInitAll over cuda:0, cuda:1 failed");
  }
  expect_contains(message, "; --gpu-reduction host (nn::GpuReduction::Host) sums the GPUs' "
                           "gradients through the host instead [");
}

}  // namespace
}  // namespace tandem::testing
