// SyntheticDataset: images or feature vectors made up from a seed, for benchmarks and tests.
// Sample i is a pure function of (seed, split, i): its class is drawn uniformly, and each element
// is a fixed per-class pattern (+1 or -1 per element) plus uniform noise, so a model can learn it.
#pragma once

#include <cstdint>

#include "tandem/data/dataset.h"

namespace tandem::data {

struct SyntheticOptions {
  Shape shape = {1, 28, 28};  // one sample's shape
  std::int64_t classes = 10;
  std::int64_t count = 60000;
  std::uint64_t seed = 0;
  Split split = Split::Train;  // Test draws different samples from the same class patterns
  DType dtype = DType::UInt8;  // UInt8: pixels in [0, 255]; Float32: values in about [-1.5, 1.5]
};

class SyntheticDataset : public Dataset {
 public:
  explicit SyntheticDataset(SyntheticOptions options);
  std::int64_t size() const override { return options_.count; }
  Example get(std::int64_t index) const override;
  Batch get_batch(std::span<const std::int64_t> indices,
                  const BatchAllocator& alloc = {}) const override;
  std::int64_t num_classes() const override { return options_.classes; }
  const SyntheticOptions& options() const { return options_; }

 private:
  // Writes sample `index` (numel(shape) elements) to `out`; returns its class.
  std::int64_t fill(std::int64_t index, void* out) const;
  SyntheticOptions options_;
  std::int64_t sample_numel_;
};

}  // namespace tandem::data
