// The GPU usage sampler over a made-up reader (no GPU or NVML needed): readings arrive for every
// GPU, take() hands each out once, failed readings are skipped, the summary averages and keeps
// peaks, and each reading becomes a "gpu" line of metrics.jsonl.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "tandem/train/gpu_usage.h"
#include "tandem/train/metrics.h"

namespace tandem::train {
namespace {

using namespace std::chrono_literals;

// Polls until `sampler` has handed out at least `n` samples in all; returns them.
std::vector<GpuSample> take_at_least(GpuUsageSampler& sampler, std::size_t n) {
  std::vector<GpuSample> all;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (all.size() < n && std::chrono::steady_clock::now() < deadline) {
    for (GpuSample& s : sampler.take()) all.push_back(std::move(s));
    std::this_thread::sleep_for(1ms);
  }
  return all;
}

TEST(GpuUsage, EveryGpuIsReadEachPeriodAndEachSampleIsTakenOnce) {
  std::atomic<int> calls{0};
  GpuUsageSampler sampler(
      {{"cuda:0", "bus-a"}, {"cuda:1", "bus-b"}},
      [&](const std::string& bus) -> std::optional<cuda::NvmlReading> {
        ++calls;
        if (bus == "bus-b") return std::nullopt;  // this GPU's readings fail: skipped
        return cuda::NvmlReading{.gpu_percent = 80, .memory_used = 5, .memory_total = 10};
      },
      1ms);
  const std::vector<GpuSample> samples = take_at_least(sampler, 3);
  ASSERT_GE(samples.size(), 3u);
  for (const GpuSample& s : samples) {
    EXPECT_EQ(s.device, "cuda:0");
    EXPECT_EQ(s.reading.gpu_percent, 80u);
    EXPECT_GT(s.time, 1.6e9);  // Unix seconds
  }
  EXPECT_GE(calls.load(), 6);
  const std::vector<GpuUsageSummary> summary = sampler.summary();
  ASSERT_EQ(summary.size(), 2u);
  EXPECT_EQ(summary[1].device, "cuda:1");
  EXPECT_EQ(summary[1].samples, 0);
  EXPECT_EQ(describe(summary[1]), "cuda:1  no readings");
}

TEST(GpuUsage, TheSummaryAveragesBusyTimeAndKeepsThePeakMemory) {
  std::atomic<unsigned> n{0};
  GpuUsageSampler sampler(
      {{"cuda:0", "bus"}},
      [&](const std::string&) -> std::optional<cuda::NvmlReading> {
        const unsigned k = n++;
        if (k >= 4) return std::nullopt;  // four readings: 10, 20, 30, 40 percent
        return cuda::NvmlReading{.gpu_percent = 10 * (k + 1),
                                 .memory_percent = 50,
                                 .memory_used = (k + 1) * (1ull << 30),
                                 .memory_total = 8ull << 30,
                                 .power_watts = 100.0 + 100.0 * (k % 2)};
      },
      1ms);
  take_at_least(sampler, 4);
  const GpuUsageSummary s = sampler.summary().at(0);
  EXPECT_EQ(s.samples, 4);
  EXPECT_DOUBLE_EQ(s.mean_gpu_percent, 25.0);
  EXPECT_EQ(s.max_gpu_percent, 40u);
  EXPECT_DOUBLE_EQ(s.mean_memory_percent, 50.0);
  EXPECT_EQ(s.peak_memory_used, 4ull << 30);
  ASSERT_TRUE(s.mean_power_watts.has_value());
  EXPECT_DOUBLE_EQ(*s.mean_power_watts, 150.0);
  EXPECT_EQ(describe(s),
            "cuda:0  kernels busy 25% (max 40%), memory busy 50%, memory 4.0 of 8.0 GiB at peak, "
            "150 W (4 readings)");
}

TEST(GpuUsage, AReadingIsAGpuLineOfTheMetricsWithItsStep) {
  const GpuSample sample{.device = "cuda:0",
                         .reading = {.gpu_percent = 97, .memory_percent = 12, .memory_used = 3,
                                     .memory_total = 4},
                         .time = 1.7e9};
  const nlohmann::json j = nlohmann::json::parse(to_json_line(sample, 42));
  EXPECT_EQ(j.at("kind"), "gpu");
  EXPECT_EQ(j.at("step"), 42);
  EXPECT_EQ(j.at("device"), "cuda:0");
  EXPECT_EQ(j.at("gpu_percent"), 97);
  EXPECT_EQ(j.at("memory_percent"), 12);
  EXPECT_EQ(j.at("memory_used"), 3);
  EXPECT_EQ(j.at("memory_total"), 4);
  EXPECT_FALSE(j.contains("power_w"));  // not reported: left out
  EXPECT_DOUBLE_EQ(j.at("time").get<double>(), 1.7e9);
}

}  // namespace
}  // namespace tandem::train
