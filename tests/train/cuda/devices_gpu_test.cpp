// --devices on a machine with GPUs: auto takes every GPU (the build has the CUDA kernels), one
// replica each, and `cuda` means the same GPUs.
#include <gtest/gtest.h>

#include <vector>

#include "gpu_skip.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/train/devices.h"

namespace tandem::train {
namespace {

TEST(DevicesGpu, AutoTakesEveryGpu) {
  TANDEM_REQUIRE_GPU();
  ASSERT_TRUE(ops::cuda::built()) << "test_train_cuda is only built with the CUDA kernels";
  std::vector<Device> every_gpu;
  for (int i = 0; i < cuda_device_count(); ++i) every_gpu.emplace_back(DeviceType::CUDA, i);
  EXPECT_TRUE(auto_uses_gpus());
  EXPECT_EQ(parse_devices("auto").devices, every_gpu);
  EXPECT_EQ(parse_devices("cuda").devices, every_gpu);
}

}  // namespace
}  // namespace tandem::train
