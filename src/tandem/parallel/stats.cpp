// Summing, printing and JSON of the per-device accounting.
#include "tandem/parallel/stats.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace tandem::nn {

DeviceStats& DeviceStats::operator+=(const DeviceStats& other) {
  samples += other.samples;
  forward_s += other.forward_s;
  backward_s += other.backward_s;
  reduction_s += other.reduction_s;
  optimizer_s += other.optimizer_s;
  wait_s += other.wait_s;
  peak_bytes = std::max(peak_bytes, other.peak_bytes);
  return *this;
}

namespace {

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

// Replicas are named with their index, cpu:0 included (Device::str() spells that one "cpu").
std::string name_of(const Device& d) {
  return d.is_cpu() ? "cpu:" + std::to_string(d.index) : d.str();
}

std::string pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

}  // namespace

std::string format_table(const DataParallelStats& stats) {
  DeviceStats total;
  std::size_t peak_sum = 0;
  for (const DeviceStats& d : stats.devices) {
    total += d;
    peak_sum += d.peak_bytes;
  }
  total.peak_bytes = peak_sum;  // the total row: every replica at its peak at once, at most
  std::ostringstream out;
  out << pad("device", 8) << pad("samples", 10) << pad("forward", 10) << pad("backward", 10)
      << pad("reduce", 10) << pad("optim", 10) << pad("wait", 10) << pad("peak MiB", 10)
      << pad("samples%", 10) << pad("busy%", 8) << "\n";
  auto row = [&](const std::string& name, const DeviceStats& d) {
    const double sample_share =
        total.samples ? 100.0 * static_cast<double>(d.samples) / static_cast<double>(total.samples)
                      : 0.0;
    const double busy_share = total.busy_s() > 0.0 ? 100.0 * d.busy_s() / total.busy_s() : 0.0;
    out << pad(name, 8) << pad(std::to_string(d.samples), 10) << pad(fixed(d.forward_s, 3), 10)
        << pad(fixed(d.backward_s, 3), 10) << pad(fixed(d.reduction_s, 3), 10)
        << pad(fixed(d.optimizer_s, 3), 10) << pad(fixed(d.wait_s, 3), 10)
        << pad(fixed(static_cast<double>(d.peak_bytes) / (1024.0 * 1024.0), 1), 10)
        << pad(fixed(sample_share, 1), 10) << pad(fixed(busy_share, 1), 8) << "\n";
  };
  for (const DeviceStats& d : stats.devices) row(name_of(d.device), d);
  row("total", total);
  return out.str();
}

std::string to_json(const DataParallelStats& stats) {
  std::int64_t total_samples = 0;
  for (const DeviceStats& d : stats.devices) total_samples += d.samples;
  std::ostringstream out;
  out << "{\"micro_steps\":" << stats.micro_steps
      << ",\"optimizer_steps\":" << stats.optimizer_steps
      << ",\"threads_per_replica\":" << stats.threads_per_replica << ",\"devices\":[";
  for (std::size_t i = 0; i < stats.devices.size(); ++i) {
    const DeviceStats& d = stats.devices[i];
    const double proportion = i < stats.proportions.size() ? stats.proportions[i] : 0.0;
    const double share =
        total_samples ? static_cast<double>(d.samples) / static_cast<double>(total_samples) : 0.0;
    out << (i ? "," : "") << "{\"device\":\"" << name_of(d.device) << "\",\"samples\":" << d.samples
        << ",\"forward_s\":" << fixed(d.forward_s, 6)
        << ",\"backward_s\":" << fixed(d.backward_s, 6)
        << ",\"reduction_s\":" << fixed(d.reduction_s, 6)
        << ",\"optimizer_s\":" << fixed(d.optimizer_s, 6) << ",\"wait_s\":" << fixed(d.wait_s, 6)
        << ",\"peak_bytes\":" << d.peak_bytes
        << ",\"share\":" << fixed(share, 6) << ",\"proportion\":" << fixed(proportion, 6) << "}";
  }
  out << "]}";
  return out.str();
}

}  // namespace tandem::nn
