// Samplers and the weighted batch split.
#include "tandem/data/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tandem/base/rng.h"
#include "tandem/data/mix.h"

namespace tandem::data {
namespace {

// The slot that keys shuffling, apart from every transform's slot.
constexpr std::uint64_t kShuffleSlot = 0x53485546464C45ull;  // "SHUFFLE"

std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  std::iota(out.begin(), out.end(), std::int64_t{0});
  return out;
}

}  // namespace

std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch) {
  TANDEM_CHECK(n >= 0, "permutation: negative length ", n);
  std::vector<std::int64_t> out = iota(n);
  Generator g(mix(mix(seed, static_cast<std::uint64_t>(epoch)), kShuffleSlot), 0);
  for (std::int64_t i = n - 1; i > 0; --i) {
    std::swap(out[static_cast<std::size_t>(i)], out[static_cast<std::size_t>(g.randint(0, i + 1))]);
  }
  return out;
}

SequentialSampler::SequentialSampler(std::int64_t n) : n_(n) {
  TANDEM_CHECK(n >= 0, "SequentialSampler: negative size ", n);
}

std::vector<std::int64_t> SequentialSampler::indices(std::int64_t, std::uint64_t) const {
  return iota(n_);
}

RandomSampler::RandomSampler(std::int64_t n) : n_(n) {
  TANDEM_CHECK(n >= 0, "RandomSampler: negative size ", n);
}

std::vector<std::int64_t> RandomSampler::indices(std::int64_t epoch, std::uint64_t seed) const {
  return permutation(n_, seed, epoch);
}

DistributedSampler::DistributedSampler(std::int64_t n, DistributedSamplerOptions options)
    : n_(n), options_(options) {
  TANDEM_CHECK(n >= 0, "DistributedSampler: negative size ", n);
  TANDEM_CHECK(options.world_size >= 1, "DistributedSampler: world_size ", options.world_size,
               " must be at least 1");
  TANDEM_CHECK(options.rank >= 0 && options.rank < options.world_size, "DistributedSampler: rank ",
               options.rank, " is outside [0, ", options.world_size, ")");
}

std::int64_t DistributedSampler::size() const {
  const std::int64_t w = options_.world_size;
  return options_.tail == Tail::Pad ? (n_ + w - 1) / w : n_ / w;
}

std::vector<std::int64_t> DistributedSampler::indices(std::int64_t epoch,
                                                      std::uint64_t seed) const {
  std::vector<std::int64_t> order = options_.shuffle ? permutation(n_, seed, epoch) : iota(n_);
  const std::int64_t per_rank = size();
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(per_rank));
  for (std::int64_t k = 0; k < per_rank; ++k) {
    // Positions past n exist only with Tail::Pad (and n > 0): they wrap to the start.
    const std::int64_t pos = options_.rank + k * options_.world_size;
    out.push_back(order[static_cast<std::size_t>(pos < n_ ? pos : pos % n_)]);
  }
  return out;
}

BatchShares split_batch(std::int64_t batch_size, std::span<const double> proportions) {
  TANDEM_CHECK(batch_size >= 0, "split_batch: negative batch size ", batch_size);
  TANDEM_CHECK(!proportions.empty(), "split_batch: no proportions given");
  double sum = 0.0;
  for (std::size_t i = 0; i < proportions.size(); ++i) {
    TANDEM_CHECK(std::isfinite(proportions[i]) && proportions[i] >= 0.0, "split_batch: proportion ",
                 i, " = ", proportions[i], " must be finite and non-negative");
    sum += proportions[i];
  }
  TANDEM_CHECK(sum > 0.0, "split_batch: proportions are all zero");
  const std::size_t n = proportions.size();
  BatchShares shares;
  shares.total = batch_size;
  shares.counts.resize(n);
  std::vector<double> remainder(n);
  std::int64_t assigned = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double quota = static_cast<double>(batch_size) * (proportions[i] / sum);
    const double whole = std::floor(quota);
    shares.counts[i] = static_cast<std::int64_t>(whole);
    remainder[i] = quota - whole;
    assigned += shares.counts[i];
  }
  // Largest remainders first, ties to the lower index; rounding in the quotas can leave the floors
  // a sample over the batch, which comes back from the smallest remainders with a share.
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return remainder[a] > remainder[b]; });
  for (std::size_t k = 0; assigned < batch_size; k = (k + 1) % n) {
    if (proportions[order[k]] > 0.0) {
      ++shares.counts[order[k]];
      ++assigned;
    }
  }
  for (std::size_t k = 0; assigned > batch_size; k = (k + 1) % n) {
    const std::size_t i = order[n - 1 - k];
    if (shares.counts[i] > 0) {
      --shares.counts[i];
      --assigned;
    }
  }
  shares.offsets.resize(n);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < n; ++i) {
    shares.offsets[i] = offset;
    offset += shares.counts[i];
  }
  return shares;
}

std::vector<Batch> split(const Batch& batch, const BatchShares& shares) {
  TANDEM_CHECK(batch.data.defined() && batch.target.defined(), "split: batch is undefined");
  TANDEM_CHECK(batch.data.dim() >= 1 && batch.data.size(0) == shares.total &&
                   batch.target.dim() == 1 && batch.target.size(0) == shares.total,
               "split: batch data ", show(batch.data.shape()), " and target ",
               show(batch.target.shape()), " do not hold the ", shares.total,
               " samples the shares split");
  std::vector<Batch> out;
  out.reserve(shares.counts.size());
  for (std::size_t i = 0; i < shares.counts.size(); ++i) {
    const std::int64_t start = shares.offsets[i], count = shares.counts[i];
    Shape shape = batch.data.shape();
    shape[0] = count;
    out.push_back({make_view(batch.data, shape, batch.data.strides(),
                             batch.data.offset() + start * batch.data.stride(0)),
                   make_view(batch.target, {count}, batch.target.strides(),
                             batch.target.offset() + start * batch.target.stride(0))});
  }
  return out;
}

}  // namespace tandem::data
