// metrics.jsonl: one JSON object per line, "kind": "step" after each optimizer step and
// "kind": "epoch" after each evaluation, each flushed as written so a crash loses at most a line.
// Not a report generator: the HTML report reads this file.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace tandem::train {

// What one device (replica) did in a step or an epoch.
struct DeviceFigures {
  std::string device;  // "cpu", "cpu:1", "cuda:0"
  std::int64_t samples = 0;
  double seconds = 0;  // time spent in its forward + backward
  double images_per_s() const { return seconds > 0 ? static_cast<double>(samples) / seconds : 0; }
};

struct StepMetrics {
  std::int64_t step = 0;   // optimizer steps done, counting this one
  std::int64_t epoch = 0;  // 1-based epoch the step belongs to
  double loss = 0;
  double lr = 0;
  double images_per_s = 0;  // this step's samples over its wall time (data wait included)
  std::vector<DeviceFigures> devices;
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
};

std::string to_json_line(const StepMetrics& m);
std::string to_json_line(const EpochMetrics& m);

enum class MetricsOpen : std::uint8_t { Truncate, Append };

class MetricsWriter {
 public:
  MetricsWriter(const std::string& path, MetricsOpen mode);
  void write(const StepMetrics& m);
  void write(const EpochMetrics& m);
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
