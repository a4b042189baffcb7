// The GPU usage sampler: one thread, one reading per GPU per period, sums kept for the summary.
#include "tandem/train/gpu_usage.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tandem::train {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

GpuUsageSampler::GpuUsageSampler(std::vector<Gpu> gpus, GpuReader read,
                                 std::chrono::milliseconds period)
    : gpus_(std::move(gpus)),
      read_(std::move(read)),
      period_(period),
      totals_(gpus_.size()),
      power_samples_(gpus_.size(), 0) {
  for (std::size_t g = 0; g < gpus_.size(); ++g) totals_[g].device = gpus_[g].device;
  thread_ = std::thread([this] { run(); });
}

GpuUsageSampler::~GpuUsageSampler() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_signal_.notify_all();
  thread_.join();
}

void GpuUsageSampler::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    std::vector<std::optional<cuda::NvmlReading>> readings;
    for (const Gpu& gpu : gpus_) readings.push_back(read_(gpu.pci_bus_id));
    const double now = unix_now();
    lock.lock();
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      if (!readings[g]) continue;
      const cuda::NvmlReading& r = *readings[g];
      pending_.push_back({.device = gpus_[g].device, .reading = r, .time = now});
      GpuUsageSummary& t = totals_[g];
      ++t.samples;
      t.mean_gpu_percent += r.gpu_percent;
      t.max_gpu_percent = std::max(t.max_gpu_percent, r.gpu_percent);
      t.mean_memory_percent += r.memory_percent;
      t.peak_memory_used = std::max(t.peak_memory_used, r.memory_used);
      t.memory_total = r.memory_total;
      if (r.power_watts) {
        t.mean_power_watts = t.mean_power_watts.value_or(0.0) + *r.power_watts;
        ++power_samples_[g];
      }
    }
    stop_signal_.wait_for(lock, period_, [this] { return stopping_; });
  }
}

std::vector<GpuSample> GpuUsageSampler::take() {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<GpuSample> out;
  out.swap(pending_);
  return out;
}

std::vector<GpuUsageSummary> GpuUsageSampler::summary() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<GpuUsageSummary> out = totals_;
  for (std::size_t g = 0; g < out.size(); ++g) {
    GpuUsageSummary& s = out[g];
    if (s.samples > 0) {
      s.mean_gpu_percent /= static_cast<double>(s.samples);
      s.mean_memory_percent /= static_cast<double>(s.samples);
    }
    if (s.mean_power_watts) *s.mean_power_watts /= static_cast<double>(power_samples_[g]);
  }
  return out;
}

std::string describe(const GpuUsageSummary& s) {
  if (s.samples == 0) return s.device + "  no readings";
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  char text[256];
  std::snprintf(text, sizeof text,
                "%s  kernels busy %.0f%% (max %u%%), memory busy %.0f%%, memory %.1f of %.1f GiB "
                "at peak",
                s.device.c_str(), s.mean_gpu_percent, s.max_gpu_percent, s.mean_memory_percent,
                static_cast<double>(s.peak_memory_used) / kGiB,
                static_cast<double>(s.memory_total) / kGiB);
  std::string out = text;
  if (s.mean_power_watts) out += ", " + std::to_string(std::lround(*s.mean_power_watts)) + " W";
  return out + " (" + std::to_string(s.samples) + " readings)";
}

}  // namespace tandem::train
