// What the report shows, read back from a run's metrics.jsonl alone (so a crashed run has a
// report too): the run's (re)starts, step and epoch records, per-device time accounting summed
// over the steps, and the last evaluation's confusion matrix. Not the writer (train/metrics.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::report {

// A "kind":"run" line: written each time a run starts or resumes.
struct RunStart {
  std::int64_t step = 0;  // steps already done (0, or where a resume continued)
  double time = 0;        // Unix seconds
  std::string model;
  std::int64_t parameters = 0;
  std::string data;
  std::string input;  // "1x28x28"
  std::int64_t classes = 0;
  std::int64_t train_samples = 0;
  std::int64_t test_samples = 0;
  std::string layout;  // "cpu:0,cpu:1": one process's devices
  std::int64_t device_count = 0;
  std::int64_t ranks = 1;  // processes of a distributed job, each with that layout
  std::int64_t batch_size = 0;  // global
  std::int64_t epochs = 0;
  std::int64_t steps_per_epoch = 0;
  std::int64_t total_steps = 0;
  std::string optimizer;
  double lr = 0;
  std::string schedule;
};

struct StepRecord {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  double loss = 0;
  double lr = 0;
  double images_per_s = 0;
  double seconds = 0;  // the step's wall time, waiting for data included
  std::int64_t samples = 0;
  std::optional<double> accuracy;  // of the training batch
  double time = 0;
};

struct EpochRecord {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  bool complete = true;
  double loss = 0;
  double lr = 0;
  double images_per_s = 0;
  double seconds = 0;
  std::optional<double> train_accuracy;
  std::optional<double> test_loss;
  std::optional<double> test_accuracy;
};

// One device's (replica's, or with a "rank" one rank's device's) time over the steps read.
struct DeviceTotals {
  std::string name;
  std::int64_t samples = 0;
  double data_s = 0;       // waiting for the batch (the whole step waits)
  double forward_s = 0;
  double backward_s = 0;
  double reduction_s = 0;  // reduction / communication
  double optimizer_s = 0;
  double wait_s = 0;       // waiting for the other devices
  std::int64_t peak_bytes = 0;  // the most memory it held at once (0: not measured)
  double busy_s() const { return forward_s + backward_s + reduction_s + optimizer_s; }
  double total_s() const { return data_s + busy_s() + wait_s; }
};

// A "gpu" line: one NVML reading of one GPU, taken while `step` ran.
struct GpuRecord {
  std::int64_t step = 0;
  std::string device;         // "cuda:0"
  double gpu_percent = 0;     // of the sample period with a kernel running
  double memory_percent = 0;  // of the sample period with device memory read or written
  double memory_used = 0;     // bytes, every process's
  double memory_total = 0;
  std::optional<double> power_w;
  double time = 0;
};

struct RunData {
  std::vector<RunStart> starts;  // in file order; empty for a file written before run lines
  std::vector<StepRecord> steps;
  std::vector<EpochRecord> epochs;
  std::vector<GpuRecord> gpu;  // empty for a run without GPUs or without NVML
  std::vector<DeviceTotals> devices;  // in order of first appearance
  std::vector<std::vector<std::int64_t>> confusion;  // (L, L) of the last evaluation; may be empty
  std::int64_t confusion_epoch = 0;
  std::size_t lines = 0;          // non-empty lines read
  std::size_t skipped_lines = 0;  // lines that did not parse (a crash cuts the last one short)
  std::size_t first_skipped = 0;  // 1-based line number of the first of them
  double wall_seconds = 0;        // summed over the (re)starts: first to last line of each

  const RunStart* latest_start() const { return starts.empty() ? nullptr : &starts.back(); }
  // The last epoch record with a test accuracy; nullptr when none was evaluated.
  const EpochRecord* last_evaluated() const;
  double training_seconds() const;  // sum of the steps' wall time
  std::int64_t samples() const;     // sum of the steps' samples
};

// Parses metrics.jsonl text. Lines that do not parse, or whose fields have the wrong type, are
// counted in skipped_lines and otherwise ignored; unknown kinds and fields are ignored.
RunData parse_metrics(std::string_view text);
// Reads and parses `path`; an error naming it when it cannot be read.
RunData read_metrics(const std::string& path);

}  // namespace tandem::report
