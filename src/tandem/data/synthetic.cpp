// Synthetic samples: class from Philox, pattern from a hash of (seed, class, element), noise from
// Philox (one 32-bit draw gives four 8-bit noise values).
#include "tandem/data/synthetic.h"

#include <algorithm>

#include "tandem/base/rng.h"
#include "tandem/data/mix.h"
#include "tandem/tensor/factories.h"

namespace tandem::data {
namespace {

constexpr std::uint64_t kSyntheticSlot = 0x53594E5448ull;  // "SYNTH"

}  // namespace

SyntheticDataset::SyntheticDataset(SyntheticOptions options) : options_(std::move(options)) {
  TANDEM_CHECK(options_.classes >= 1, "SyntheticDataset: classes ", options_.classes,
               " must be at least 1");
  TANDEM_CHECK(options_.count >= 0, "SyntheticDataset: count ", options_.count, " is negative");
  TANDEM_CHECK(!options_.shape.empty(), "SyntheticDataset: empty sample shape");
  for (auto d : options_.shape) {
    TANDEM_CHECK(d > 0, "SyntheticDataset: shape ", show(options_.shape),
                 " has a non-positive size");
  }
  TANDEM_CHECK(options_.dtype == DType::UInt8 || options_.dtype == DType::Float32,
               "SyntheticDataset: dtype must be uint8 or float32, got ", options_.dtype);
  sample_numel_ = numel(options_.shape);
}

std::int64_t SyntheticDataset::fill(std::int64_t index, void* out) const {
  TANDEM_CHECK(index >= 0 && index < options_.count, "SyntheticDataset: index ", index,
               " out of range [0, ", options_.count, ")");
  const std::uint64_t split_key = options_.split == Split::Train ? 0 : 1;
  Generator g(mix(mix(options_.seed, split_key), kSyntheticSlot),
              static_cast<std::uint64_t>(index));
  const std::int64_t label = g.randint(0, options_.classes);
  const std::uint64_t pattern_key =
      mix(mix(options_.seed, kSyntheticSlot), static_cast<std::uint64_t>(label));
  std::uint32_t noise = 0;
  for (std::int64_t e = 0; e < sample_numel_; ++e) {
    if (e % 4 == 0) noise = g.next_u32();
    const int n8 = static_cast<int>((noise >> (8 * (e % 4))) & 0xff);  // [0, 255]
    const bool up = (mix64(pattern_key + static_cast<std::uint64_t>(e)) & 1) != 0;
    if (options_.dtype == DType::UInt8) {
      // 128 +- 48 for the pattern, +- 80 for the noise: [0, 255] after clamping.
      const int v = 128 + (up ? 48 : -48) + (n8 * 160) / 255 - 80;
      static_cast<std::uint8_t*>(out)[e] = static_cast<std::uint8_t>(std::clamp(v, 0, 255));
    } else {
      static_cast<float*>(out)[e] =
          (up ? 0.5f : -0.5f) + (static_cast<float>(n8) / 255.0f * 2.0f - 1.0f);
    }
  }
  return label;
}

Example SyntheticDataset::get(std::int64_t index) const {
  Tensor data = empty(options_.shape, {.dtype = options_.dtype});
  const std::int64_t label = fill(index, data.raw_data());
  return {std::move(data), scalar_tensor(static_cast<double>(label), {.dtype = DType::Int64})};
}

Batch SyntheticDataset::get_batch(std::span<const std::int64_t> indices,
                                  const BatchAllocator& alloc) const {
  const auto count = static_cast<std::int64_t>(indices.size());
  Shape shape{count};
  shape.insert(shape.end(), options_.shape.begin(), options_.shape.end());
  Batch batch{alloc.empty(shape, options_.dtype), alloc.empty({count}, DType::Int64)};
  auto* base = static_cast<std::uint8_t*>(batch.data.raw_data());
  const std::size_t row = static_cast<std::size_t>(sample_numel_) * element_size(options_.dtype);
  auto* targets = batch.target.data<std::int64_t>();
  for (std::int64_t b = 0; b < count; ++b) {
    const std::int64_t index = indices[static_cast<std::size_t>(b)];
    try {
      targets[b] = fill(index, base + static_cast<std::size_t>(b) * row);
    } catch (const std::exception& e) {
      throw SampleError(index, e.what());
    }
  }
  return batch;
}

}  // namespace tandem::data
