// The NVML loader: a missing library and one without NVML's entry points leave it unavailable
// with a reason naming the library or the entry point, and reading then fails cleanly; on a GPU
// machine whose driver ships NVML, the reading of cuda:0 agrees with the CUDA runtime's figures.
#include <gtest/gtest.h>

#include <string>

#include "gpu_skip.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/nvml.h"

namespace tandem::cuda {
namespace {

TEST(Nvml, AMissingLibraryIsUnavailableWithTheLoadersReason) {
  const Nvml nvml("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(nvml.available());
  EXPECT_NE(nvml.reason().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos)
      << nvml.reason();
}

TEST(Nvml, ALibraryWithoutNvmlNamesTheMissingEntryPoint) {
  const Nvml nvml("libz.so.1");  // loads (tandem links zlib), but is not NVML
  EXPECT_FALSE(nvml.available());
  EXPECT_EQ(nvml.reason(), "nvmlInit_v2 is not in libz.so.1");
}

TEST(Nvml, ReadingWithoutNvmlFailsWithTheReason) {
  Nvml nvml("/nonexistent/libnvidia-ml.so.1");
  std::string why;
  EXPECT_FALSE(nvml.read("0000:00:00.0", &why).has_value());
  EXPECT_NE(why.find("NVML is not available"), std::string::npos) << why;
  EXPECT_FALSE(nvml.read("0000:00:00.0").has_value());  // why is optional
}

TEST(Nvml, TheReadingOfCuda0AgreesWithTheCudaRuntime) {
  TANDEM_REQUIRE_GPU();
  Nvml nvml;
  if (!nvml.available()) GTEST_SKIP() << "no NVML on this GPU machine: " << nvml.reason();
  const GpuInfo info = gpu_info(0);
  std::string why;
  const auto reading = nvml.read(info.pci_bus_id, &why);
  ASSERT_TRUE(reading.has_value()) << why;
  EXPECT_LE(reading->gpu_percent, 100u);
  EXPECT_LE(reading->memory_percent, 100u);
  EXPECT_GT(reading->memory_used, 0u);
  // NVML's total and cudaMemGetInfo's differ by what the driver reserves: within 10%.
  EXPECT_NEAR(static_cast<double>(reading->memory_total), static_cast<double>(info.total_memory),
              0.1 * static_cast<double>(info.total_memory));
  if (reading->power_watts) {
    EXPECT_GT(*reading->power_watts, 0.0);
  }
  EXPECT_FALSE(nvml.read("ffff:ff:1f.7").has_value());  // no such GPU
}

}  // namespace
}  // namespace tandem::cuda
