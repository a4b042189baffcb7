// GPU usage during training, as the hardware reports it: a thread reads each GPU of the run
// through NVML (device/cuda/nvml.h) every period, and the trainer takes the readings into
// metrics.jsonl ("kind": "gpu" lines, next to the step they were taken during) and prints their
// summary at the end, beside tandem's own per-device shares of the work. The reader is a
// function, so the sampling and summaries are tested without a GPU.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tandem/device/cuda/nvml.h"

namespace tandem::train {

struct GpuSample {
  std::string device;  // "cuda:0"
  cuda::NvmlReading reading;
  double time = 0;  // Unix seconds
};

// Over every sample of one GPU.
struct GpuUsageSummary {
  std::string device;
  std::int64_t samples = 0;
  double mean_gpu_percent = 0;
  unsigned max_gpu_percent = 0;
  double mean_memory_percent = 0;
  std::uint64_t peak_memory_used = 0;  // bytes
  std::uint64_t memory_total = 0;
  std::optional<double> mean_power_watts;  // over the samples that had one
};

// Reads the GPU at a PCI bus id; nullopt when that reading failed (the sample is skipped).
using GpuReader = std::function<std::optional<cuda::NvmlReading>(const std::string& pci_bus_id)>;

class GpuUsageSampler {
 public:
  struct Gpu {
    std::string device;      // its name in the metrics
    std::string pci_bus_id;  // what the reader is given
  };
  // Starts sampling every `period` (the first reading at once).
  GpuUsageSampler(std::vector<Gpu> gpus, GpuReader read, std::chrono::milliseconds period);
  ~GpuUsageSampler();  // stops and joins the thread
  GpuUsageSampler(const GpuUsageSampler&) = delete;
  GpuUsageSampler& operator=(const GpuUsageSampler&) = delete;

  std::vector<GpuSample> take();                // the samples since the last take()
  std::vector<GpuUsageSummary> summary() const;  // one per GPU, over every sample so far

 private:
  void run();

  std::vector<Gpu> gpus_;
  GpuReader read_;
  std::chrono::milliseconds period_;
  mutable std::mutex mutex_;
  std::condition_variable stop_signal_;
  bool stopping_ = false;
  std::vector<GpuSample> pending_;  // not yet taken
  std::vector<GpuUsageSummary> totals_;  // sums until summary() divides
  std::vector<std::int64_t> power_samples_;
  std::thread thread_;
};

// One line of the summary table: "cuda:0  kernels busy 87% (max 100%), memory busy 41%, memory
// 12.3 of 140.4 GiB at peak, 312 W" (figures a GPU did not report are left out).
std::string describe(const GpuUsageSummary& s);

}  // namespace tandem::train
