// AutoBalancer's measure / smooth / re-balance cycle and the split helpers.
#include "tandem/parallel/split.h"

#include <algorithm>
#include <cmath>

#include "tandem/base/check.h"

namespace tandem::parallel {

std::vector<double> balanced_proportions(const std::vector<std::int64_t>& samples,
                                         const std::vector<double>& seconds,
                                         const std::vector<double>& current) {
  const std::size_t n = current.size();
  TANDEM_CHECK(samples.size() == n && seconds.size() == n, "balanced_proportions: ", samples.size(),
               " sample counts and ", seconds.size(), " times for ", n, " devices");
  double current_sum = 0.0;
  for (double p : current) current_sum += p;
  TANDEM_CHECK(current_sum > 0.0, "balanced_proportions: current proportions are all zero");
  // Throughput of the measured devices; the unmeasured keep their current fraction of the batch.
  std::vector<double> out(n, 0.0);
  double measured_share = 0.0, throughput_sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    if (samples[i] > 0 && seconds[i] > 0.0) {
      measured_share += current[i] / current_sum;
      throughput_sum += static_cast<double>(samples[i]) / seconds[i];
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (samples[i] > 0 && seconds[i] > 0.0) {
      out[i] = measured_share * (static_cast<double>(samples[i]) / seconds[i]) / throughput_sum;
    } else {
      out[i] = current[i] / current_sum;
    }
  }
  return out;
}

AutoBalancer::AutoBalancer(std::size_t devices, AutoSplitOptions options)
    : options_(options),
      proportions_(devices, 1.0 / static_cast<double>(devices)),
      next_measure_(options.warmup_steps),
      samples_(devices, 0),
      seconds_(devices, 0.0),
      per_sample_(devices, 0.0) {
  TANDEM_CHECK(devices > 0, "AutoBalancer: no devices");
  TANDEM_CHECK(options.warmup_steps >= 0 && options.measure_steps >= 1 &&
                   options.recheck_every >= 0 && options.min_change >= 0.0 &&
                   options.smoothing > 0.0 && options.smoothing <= 1.0,
               "AutoBalancer: invalid options (warmup_steps ", options.warmup_steps,
               ", measure_steps ", options.measure_steps, ", recheck_every ", options.recheck_every,
               ", min_change ", options.min_change, ", smoothing ", options.smoothing, ")");
}

bool AutoBalancer::record(const std::vector<std::int64_t>& samples,
                          const std::vector<double>& seconds, bool may_change) {
  TANDEM_CHECK(samples.size() == proportions_.size() && seconds.size() == proportions_.size(),
               "AutoBalancer: a step with ", samples.size(), " devices, expected ",
               proportions_.size());
  const std::int64_t step = steps_++;
  if (step < next_measure_) return false;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    samples_[i] += samples[i];
    seconds_[i] += seconds[i];
  }
  if (++measured_steps_ < options_.measure_steps || !may_change) return false;
  // The running times per sample; a device's first measurement starts its own.
  std::vector<std::int64_t> known(per_sample_.size(), 0);
  for (std::size_t i = 0; i < per_sample_.size(); ++i) {
    if (samples_[i] > 0 && seconds_[i] > 0.0) {
      const double now = seconds_[i] / static_cast<double>(samples_[i]);
      double& running = per_sample_[i];
      running = running > 0.0 ? running + options_.smoothing * (now - running) : now;
    }
    known[i] = per_sample_[i] > 0.0 ? 1 : 0;
  }
  const std::vector<double> next = balanced_proportions(known, per_sample_, proportions_);
  measured_steps_ = 0;
  std::fill(samples_.begin(), samples_.end(), 0);
  std::fill(seconds_.begin(), seconds_.end(), 0.0);
  next_measure_ = steps_ + options_.recheck_every;
  double moved = 0.0;
  for (std::size_t i = 0; i < next.size(); ++i) {
    moved = std::max(moved, std::abs(next[i] - proportions_[i]));
  }
  if (moved <= options_.min_change) return false;
  proportions_ = next;
  return true;
}

data::BatchShares split_at_least_one(std::int64_t batch, const std::vector<double>& proportions) {
  data::BatchShares shares = data::split_batch(batch, proportions);
  const std::size_t n = shares.counts.size();
  if (batch >= static_cast<std::int64_t>(n)) {
    for (std::size_t i = 0; i < n; ++i) {
      if (shares.counts[i] > 0) continue;
      const auto largest = std::max_element(shares.counts.begin(), shares.counts.end());
      --*largest;
      shares.counts[i] = 1;
    }
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < n; ++i) {
      shares.offsets[i] = offset;
      offset += shares.counts[i];
    }
  }
  return shares;
}

}  // namespace tandem::parallel
