// Tests of device names and the backend table on a CPU-only build.
#include <gtest/gtest.h>

#include "tandem/base/check.h"
#include "tandem/device/allocator.h"
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
