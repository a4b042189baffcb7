// metrics.jsonl: one JSON object per line, "kind": "run" when a run starts or resumes (what it
// trains on what), "kind": "step" after each optimizer step, "kind": "epoch" after each
// evaluation and "kind": "gpu" for each NVML reading of a GPU (train/gpu_usage.h), written with
// the step it was taken during; each flushed as written so a crash loses at most a line. Not a report generator:
// report/ rebuilds report.html from this file alone.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "tandem/report/run_data.h"
#include "tandem/train/gpu_usage.h"

namespace tandem::train {

// What one device (replica) did in a step or an epoch.
struct DeviceFigures {
  std::string device;  // "cpu", "cpu:1", "cuda:0"
  std::int64_t samples = 0;
  double seconds = 0;  // time spent in its forward + backward
  // Where its time went, in seconds (the report stacks them per device).
  double forward_s = 0;    // forward and loss
  double backward_s = 0;
  double reduction_s = 0;  // gradient reduction / communication
  double optimizer_s = 0;  // the optimizer update (on the device that runs it)
  double wait_s = 0;       // waiting for the other devices
  std::int64_t peak_bytes = 0;  // the most memory it held at once (0: not measured); sums: max
  double images_per_s() const { return seconds > 0 ? static_cast<double>(samples) / seconds : 0; }
  DeviceFigures& operator+=(const DeviceFigures& other);  // sums every figure; keeps the name
};

// What a run trains, on what, written once per start (and per resume) as the "run" line: the
// struct the report reads it back into.
using RunMetrics = report::RunStart;

struct StepMetrics {
  std::int64_t step = 0;   // optimizer steps done, counting this one
  std::int64_t epoch = 0;  // 1-based epoch the step belongs to
  double loss = 0;
  double lr = 0;
  double images_per_s = 0;  // this step's samples over its wall time (data wait included)
  std::vector<DeviceFigures> devices;
  double seconds = 0;  // the step's wall time
  double data_s = 0;   // of which waiting for the batch
  std::optional<double> accuracy;  // of the training batch, a fraction
  double time = 0;     // Unix seconds
};

struct EpochMetrics {
  std::int64_t step = 0;
  std::int64_t epoch = 0;   // 1-based; the epoch just finished (or cut short by --max-steps)
  bool complete = true;     // false when --max-steps or a signal ended it early
  double loss = 0;          // mean training loss over the epoch's samples
  double lr = 0;
  double images_per_s = 0;  // the epoch's training samples over its training wall time
  double seconds = 0;
  std::optional<double> test_loss;      // absent when this epoch was not evaluated
  std::optional<double> test_accuracy;  // a fraction in [0, 1]
  std::vector<DeviceFigures> devices;
  std::optional<double> train_accuracy;  // over the epoch's training samples
  double data_s = 0;                     // waiting for batches
  std::vector<std::vector<std::int64_t>> confusion;  // (L, L) [target][predicted]; empty unless evaluated
  double time = 0;                       // Unix seconds
};

std::string to_json_line(const RunMetrics& m);
std::string to_json_line(const StepMetrics& m);
std::string to_json_line(const EpochMetrics& m);
std::string to_json_line(const GpuSample& s, std::int64_t step);

enum class MetricsOpen : std::uint8_t { Truncate, Append };

class MetricsWriter {
 public:
  MetricsWriter(const std::string& path, MetricsOpen mode);
  void write(const RunMetrics& m);
  void write(const StepMetrics& m);
  void write(const EpochMetrics& m);
  void write(const GpuSample& s, std::int64_t step);
  const std::string& path() const { return path_; }

 private:
  void write_line(const std::string& line);
  std::string path_;
  std::ofstream out_;
};

// Drops the lines of `path` whose "step" is beyond `step` (what a resumed run will redo); a
// missing file is left missing. The file is rewritten atomically.
void truncate_metrics_after(const std::string& path, std::int64_t step);

}  // namespace tandem::train
