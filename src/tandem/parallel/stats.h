// Per-device accounting of DataParallel, always on: samples and wall-clock seconds per phase on
// each replica's thread, and peak memory, for one step and summed over a run, with a text table
// ("each device's share of the work") and a JSON object for metrics.jsonl. CPU replicas share one
// host heap: a replica's memory is what its thread allocated (activations, gradients, the
// optimizer's state on replica 0), charged through a MemoryAccount; shared parameters count for
// none of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tandem/device/device.h"

namespace tandem::nn {

struct DeviceStats {
  Device device;
  std::int64_t samples = 0;
  double forward_s = 0.0;    // staging the slice, forward and loss
  double backward_s = 0.0;   // backward, without the bucket reductions this thread performed
  double reduction_s = 0.0;  // summing gradient buckets (this replica completed them last)
  double optimizer_s = 0.0;  // the optimizer update (the master's device) and parameter broadcast
  double wait_s = 0.0;       // waiting for other replicas: collectives and the end of the step
  std::size_t peak_bytes = 0;  // the most memory this replica held at once (summing: the max);
                               // a GPU replica: its GPU's, shared by the replicas of one GPU
  double busy_s() const { return forward_s + backward_s + reduction_s + optimizer_s; }
  DeviceStats& operator+=(const DeviceStats& other);
};

struct DataParallelStats {
  std::int64_t micro_steps = 0;      // forward_backward() calls
  std::int64_t optimizer_steps = 0;  // step() calls
  std::vector<DeviceStats> devices;
  std::vector<double> proportions;  // the current split, summing to 1
  int threads_per_replica = 1;
};

// A fixed-width table, one row per device plus a total: samples, seconds per phase, and each
// device's share of the samples and of the busy time.
std::string format_table(const DataParallelStats& stats);
// {"micro_steps":..,"optimizer_steps":..,"threads_per_replica":..,"devices":[{"device":"cpu:0",
//  "samples":..,"forward_s":..,...,"share":..}]} on one line.
std::string to_json(const DataParallelStats& stats);

}  // namespace tandem::nn
