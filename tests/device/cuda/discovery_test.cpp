// GPU discovery's answers in every build: the reason when there is no GPU, the error naming what
// exists for a GPU that does not, the backend table; on a GPU, each GPU's figures.
#include "tandem/device/cuda/discovery.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "tandem/base/check.h"
#include "tandem/device/allocator.h"
#include "tandem/device/cuda/memory.h"

namespace tandem::cuda {
namespace {

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CudaDiscovery, BuildsAsConfigured) {
  EXPECT_EQ(built(), TANDEM_TEST_CUDA_BUILT == 1);
  EXPECT_EQ(backend_available(DeviceType::CUDA), built());  // the backend registered itself
  if (built()) {
    EXPECT_GE(runtime_version(), 12000);
  } else {
    EXPECT_EQ(runtime_version(), 0);
  }
}

TEST(CudaDiscovery, WithoutAGpuSaysWhyAndListsNone) {
  if (is_available()) GTEST_SKIP() << "a CUDA GPU is visible; this checks the no-GPU answers";
  EXPECT_EQ(device_count(), 0);
  EXPECT_TRUE(devices().empty());
  const std::string reason = unavailable_reason();
  EXPECT_FALSE(reason.empty());
  if (!built()) {
    EXPECT_EQ(reason, "built without CUDA");
  } else {
    EXPECT_NE(reason, "built without CUDA");  // the runtime's own words, e.g. no driver
  }
  EXPECT_THROW(gpu_info(0), Error);
  EXPECT_THROW(memory_stats(0), Error);
  EXPECT_NO_THROW(empty_cache());
  const std::string e = error_of([] { check_device(Device("cuda:0")); });
  EXPECT_NE(e.find("cuda"), std::string::npos) << e;
  EXPECT_NE(e.find("not"), std::string::npos) << e;
}

TEST(CudaDiscovery, AGpuThatDoesNotExistIsAnErrorNamingWhatExists) {
  const int count = device_count();
  const std::string e = error_of([&] { check_index(count); });
  EXPECT_NE(e.find("cuda:" + std::to_string(count) + " does not exist"), std::string::npos) << e;
  if (count == 0) {
    EXPECT_NE(e.find(unavailable_reason()), std::string::npos) << e;
  } else {
    EXPECT_NE(
        e.find(std::to_string(count) + (count == 1 ? " GPU is visible" : " GPUs are visible")),
        std::string::npos)
        << e;
    EXPECT_NE(e.find("cuda:0"), std::string::npos) << e;
    EXPECT_NO_THROW(check_index(count - 1));
  }
  EXPECT_THROW(check_index(-1), Error);
  EXPECT_THROW(check_device(Device(DeviceType::CUDA, count)), Error);
}

TEST(CudaDiscovery, ReadsCudaVisibleDevices) {
  (void)device_count();  // the runtime has read the variable by now; changing it cannot matter
  const char* saved = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string saved_value = saved ? saved : "";
  ::setenv("CUDA_VISIBLE_DEVICES", "1,0", 1);
  EXPECT_EQ(visible_devices_variable(), std::optional<std::string>("1,0"));
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(visible_devices_variable(), std::nullopt);
  if (saved) ::setenv("CUDA_VISIBLE_DEVICES", saved_value.c_str(), 1);
}

TEST(CudaDiscovery, ReportsEachGpu) {
  if (!is_available()) GTEST_SKIP() << "no CUDA GPU: " << unavailable_reason();
  ASSERT_EQ(devices().size(), static_cast<std::size_t>(device_count()));
  EXPECT_TRUE(unavailable_reason().empty());
  EXPECT_GT(driver_version(), 0);
  for (int i = 0; i < device_count(); ++i) {
    const GpuInfo info = gpu_info(i);
    EXPECT_EQ(info.index, i);
    EXPECT_FALSE(info.name.empty());
    EXPECT_FALSE(info.pci_bus_id.empty());
    EXPECT_GT(info.total_memory, 0u);
    EXPECT_GT(info.free_memory, 0u);
    EXPECT_LE(info.free_memory, info.total_memory);
    EXPECT_GE(info.major, 5);
    EXPECT_GT(info.multiprocessors, 0);
    for (const int peer : info.peers) {
      EXPECT_NE(peer, i);
      EXPECT_TRUE(can_access_peer(i, peer));
    }
    EXPECT_FALSE(can_access_peer(i, i));
    std::printf("cuda:%d %s, %s, compute %d.%d, %d SMs, %s total, %s free, %zu peer(s)\n", i,
                info.name.c_str(), info.pci_bus_id.c_str(), info.major, info.minor,
                info.multiprocessors, format_bytes(info.total_memory).c_str(),
                format_bytes(info.free_memory).c_str(), info.peers.size());
  }
}

}  // namespace
}  // namespace tandem::cuda
