// Batch transforms for the DataLoader: ToFloat, Normalize, RandomCrop, RandomHorizontalFlip and
// Compose. Each works on a whole batch at once; a random one draws from a generator per sample
// derived from (seed, epoch, sample index, place in the pipeline), never from shared state, so
// results do not depend on which thread ran them. Letters: B batch, C channels, H x W image.
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tandem/base/rng.h"
#include "tandem/data/dataset.h"

namespace tandem::data {

// The generator of one sample for one transform: Generator(key, stream = index), where the key
// mixes seed, epoch and slot. Independent for every (seed, epoch, index, slot).
Generator sample_generator(std::uint64_t seed, std::int64_t epoch, std::int64_t index,
                           std::uint64_t slot);

// What a transform knows besides the batch.
struct TransformContext {
  std::span<const std::int64_t> indices;  // dataset index of each sample in the batch (B)
  std::uint64_t seed = 0;
  std::int64_t epoch = 0;
  std::uint64_t slot = 0;   // this transform's place in the pipeline (set by Compose)
  bool owns_input = false;  // the input batch is the caller's own scratch: may be changed in place
  BatchAllocator alloc;     // for new output tensors
  Generator generator(std::size_t b) const {
    return sample_generator(seed, epoch, indices[b], slot);
  }
};

// A transform maps a batch (B, ...) to a batch of B samples. It changes its input in place only
// when ctx.owns_input says it may (see writable()); otherwise the input is left as it was.
class Transform {
 public:
  virtual ~Transform() = default;
  virtual Tensor apply(const Tensor& batch, const TransformContext& ctx) const = 0;
  virtual std::string name() const = 0;
};

// A shared, immutable transform of any type; converts implicitly from each of them, so a list
// reads {ToFloat(), Normalize({0.5f}, {0.5f})}.
class AnyTransform {
 public:
  template <typename T>
  requires std::derived_from<T, Transform> AnyTransform(T transform)  // NOLINT: implicit by design
      : impl_(std::make_shared<const T>(std::move(transform))) {}
  explicit AnyTransform(std::shared_ptr<const Transform> impl);
  const Transform& operator*() const { return *impl_; }
  const Transform* operator->() const { return impl_.get(); }

 private:
  std::shared_ptr<const Transform> impl_;
};

// Applies its steps in order; step i runs in slot mix(ctx.slot, i + 1).
class Compose final : public Transform {
 public:
  Compose() = default;
  explicit Compose(std::vector<AnyTransform> steps) : steps_(std::move(steps)) {}
  Tensor apply(const Tensor& batch, const TransformContext& ctx) const override;
  std::string name() const override;
  bool empty() const { return steps_.empty(); }

 private:
  std::vector<AnyTransform> steps_;
};

// uint8 (B, ...) -> float32 (B, ...) divided by 255 (torchvision's ToTensor scaling).
class ToFloat final : public Transform {
 public:
  Tensor apply(const Tensor& batch, const TransformContext& ctx) const override;
  std::string name() const override { return "ToFloat"; }
};

// float32 (B, C, ...): (x - mean[c]) / std[c]; mean and std have C entries, or one for all.
class Normalize final : public Transform {
 public:
  Normalize(std::vector<float> mean, std::vector<float> std);
  Tensor apply(const Tensor& batch, const TransformContext& ctx) const override;
  std::string name() const override;

 private:
  std::vector<float> mean_;
  std::vector<float> std_;
};

// (B, C, H, W) any dtype -> (B, C, height, width): zero-pads each side by `padding`, then cuts a
// window at a uniformly drawn position (row first, then column, as torchvision does).
class RandomCrop final : public Transform {
 public:
  explicit RandomCrop(std::int64_t size, std::int64_t padding = 0)
      : RandomCrop(size, size, padding) {}
  RandomCrop(std::int64_t height, std::int64_t width, std::int64_t padding);
  Tensor apply(const Tensor& batch, const TransformContext& ctx) const override;
  std::string name() const override;

 private:
  std::int64_t height_, width_, padding_;
};

// (B, ..., W) any dtype: mirrors each sample along its last dimension with probability p.
class RandomHorizontalFlip final : public Transform {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor apply(const Tensor& batch, const TransformContext& ctx) const override;
  std::string name() const override;

 private:
  double p_;
};

// `batch` itself when ctx.owns_input and it is contiguous (a transform may then change it in
// place); otherwise a contiguous copy allocated through ctx.alloc.
Tensor writable(const Tensor& batch, const TransformContext& ctx);

// Runs a transform on one sample (...) as a batch of one, as the loader would for `index`.
Tensor apply_to_sample(const Transform& transform, const Tensor& sample, std::int64_t index,
                       std::uint64_t seed = 0, std::int64_t epoch = 0);

}  // namespace tandem::data
