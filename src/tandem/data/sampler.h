// Samplers: the order in which an epoch visits a dataset's indices. Sequential, random (a fresh
// permutation per epoch), and distributed (rank r of w takes a disjoint shard; every rank gets the
// same count). Also the weighted split of one global batch into per-device shares.
// A sampler is a pure function of (epoch, seed): nothing to reset, save or forget.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tandem/data/dataset.h"

namespace tandem::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // Indices visited per epoch.
  virtual std::int64_t size() const = 0;
  // The indices of `epoch`, in visiting order; `seed` is the loader's.
  virtual std::vector<std::int64_t> indices(std::int64_t epoch, std::uint64_t seed) const = 0;
};

// A uniformly random permutation of [0, n), fixed by (seed, epoch) (Fisher-Yates on Philox).
std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch);

// 0, 1, ..., n-1 every epoch.
class SequentialSampler final : public Sampler {
 public:
  explicit SequentialSampler(std::int64_t n);
  std::int64_t size() const override { return n_; }
  std::vector<std::int64_t> indices(std::int64_t epoch, std::uint64_t seed) const override;

 private:
  std::int64_t n_;
};

// permutation(n, seed, epoch): a new order every epoch.
class RandomSampler final : public Sampler {
 public:
  explicit RandomSampler(std::int64_t n);
  std::int64_t size() const override { return n_; }
  std::vector<std::int64_t> indices(std::int64_t epoch, std::uint64_t seed) const override;

 private:
  std::int64_t n_;
};

// What the distributed sampler does with the n % world_size samples that do not split evenly.
enum class Tail : std::uint8_t {
  Pad,   // repeat samples from the start so every rank gets ceil(n / w); no sample is lost
  Drop,  // leave the last n % w out so every rank gets floor(n / w); no sample is repeated
};

struct DistributedSamplerOptions {
  std::int64_t rank = 0;
  std::int64_t world_size = 1;
  bool shuffle = true;  // one permutation per (seed, epoch), the same on every rank
  Tail tail = Tail::Pad;
};

// Rank r takes positions r, r + w, r + 2w, ... of the (shuffled, padded or cut) epoch order, so the
// shards are disjoint (except the Pad repeats) and all ranks get the same number of samples, hence
// the same number of batches: no rank waits at an epoch's end for one that has finished.
class DistributedSampler final : public Sampler {
 public:
  DistributedSampler(std::int64_t n, DistributedSamplerOptions options);
  std::int64_t size() const override;
  std::vector<std::int64_t> indices(std::int64_t epoch, std::uint64_t seed) const override;

 private:
  std::int64_t n_;
  DistributedSamplerOptions options_;
};

// A global batch split into per-device shares. counts sum to the batch; offsets are where each
// share starts. weight(i) = counts[i] / total is the exact factor for share i's mean gradient.
struct BatchShares {
  std::vector<std::int64_t> counts;
  std::vector<std::int64_t> offsets;
  std::int64_t total = 0;
  double weight(std::size_t i) const {
    return total ? static_cast<double>(counts.at(i)) / static_cast<double>(total) : 0.0;
  }
};

// Splits `batch_size` samples in the given proportions (non-negative, finite, not all zero) by
// largest remainder: each share gets floor(batch * p_i / sum p), and the samples left over go to
// the largest fractional parts (ties to the lower index).
BatchShares split_batch(std::int64_t batch_size, std::span<const double> proportions);

// Views of `batch` (rows [offset, offset + count) of data and target), one per share.
std::vector<Batch> split(const Batch& batch, const BatchShares& shares);

}  // namespace tandem::data
