// How DataParallel divides a global batch: AutoBalancer times each device's steps and sets the
// split proportions in proportion to measured throughput, re-checking periodically; helpers turn
// proportions into shares. The gradient weighting is exact whatever the split (weights = shares).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tandem/data/sampler.h"

namespace tandem::parallel {

// By default the measurement never stops: each window of measure_steps steps updates a running
// time per sample of each device (the newest window weighing `smoothing`), and the split follows
// it when it has moved by more than min_change. Measured on the seed CNN, cpu:2, batch 64 (this
// VM's two vCPUs at 190 and 234 us per image): windows of 8 steps taken 200 steps apart left the
// split even for the first 218 steps when the first window missed the difference (the faster
// replica waiting 1.65 ms of each 8 ms step); windows of 16 steps each used alone re-split 16-18
// times an epoch, between 32:32 and 38:26, chasing noise.
struct AutoSplitOptions {
  std::int64_t warmup_steps = 2;    // first steps not measured (primitive creation, page faults)
  std::int64_t measure_steps = 16;  // steps summed per measurement
  std::int64_t recheck_every = 0;   // steps between a measurement's end and the next one's start
  double smoothing = 0.25;          // weight of the newest measurement, in (0, 1]; 1: it alone
  // Re-balance only when a share moves by more than this: on identical cores, single step times
  // vary by 10-20% from noise alone, and chasing it costs more than it gains. Summed over
  // measure_steps the noise is a few percent, while this VM's two vCPUs were seen to differ by
  // about 20% in speed for minutes at a time (shares of 0.45 and 0.55: a move of 0.045).
  double min_change = 0.025;
};

// New proportions (summing to 1) proportional to each device's throughput samples / seconds.
// A device without a measurement (no samples or no time) keeps its current share.
std::vector<double> balanced_proportions(const std::vector<std::int64_t>& samples,
                                         const std::vector<double>& seconds,
                                         const std::vector<double>& current);

class AutoBalancer {
 public:
  AutoBalancer(std::size_t devices, AutoSplitOptions options);

  const std::vector<double>& proportions() const { return proportions_; }
  // Records one step: samples and compute seconds per device. The proportions only change when
  // may_change (at an accumulation-cycle boundary); returns true when they did.
  bool record(const std::vector<std::int64_t>& samples, const std::vector<double>& seconds,
              bool may_change);

 private:
  AutoSplitOptions options_;
  std::vector<double> proportions_;
  std::int64_t steps_ = 0;           // steps recorded so far
  std::int64_t next_measure_ = 0;    // first step of the next measurement
  std::int64_t measured_steps_ = 0;  // steps in the current measurement
  std::vector<std::int64_t> samples_;
  std::vector<double> seconds_;
  std::vector<double> per_sample_;  // running seconds per sample of each device; 0: none yet
};

// Shares of `batch` samples in `proportions`, with at least one sample for every device when the
// batch has that many (a device without samples could never be timed).
data::BatchShares split_at_least_one(std::int64_t batch, const std::vector<double>& proportions);

}  // namespace tandem::parallel
