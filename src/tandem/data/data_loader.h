// DataLoader: batches of a Dataset, in order, from the calling thread or from worker threads with
// a bounded prefetch queue; shuffling that changes every epoch by itself and is the same for any
// number of workers; a position (epoch, batch, seed) that can be saved and restored mid-epoch.
//   DataLoader loader(train, {.batch_size = 64, .shuffle = true, .num_workers = 2,
//                             .transforms = {ToFloat(), Normalize({0.2860f}, {0.3530f})}});
//   for (auto& [data, target] : loader) { ... }   // data (64, 1, 28, 28) float32, target (64)
//   int64
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "tandem/data/dataset.h"
#include "tandem/data/sampler.h"
#include "tandem/data/transforms.h"

namespace tandem::data {

struct DataLoaderOptions {
  std::int64_t batch_size = 1;
  bool shuffle = false;     // a new permutation every epoch, from (seed, epoch)
  bool drop_last = false;   // leave out a last batch smaller than batch_size
  int num_workers = 0;      // worker threads; 0 builds batches in the calling thread
  int prefetch_factor = 2;  // batches in flight per worker (the queue holds workers * this)
  // Page-locked batch memory when a pinned-memory hook is installed (the CUDA layer's); plain
  // memory otherwise, without error. See pinned_memory.h.
  bool pin_memory = false;
  // Where batches are delivered. A GPU: each batch, once made (on its worker thread), is copied
  // there on the GPU's copy stream, so the copies overlap the training's GPU work; the iterator
  // hands a batch out after ordering the calling thread's stream after its copy.
  Device device = kCPU;
  std::uint64_t seed = 0;                // keys shuffling and random transforms
  std::vector<AnyTransform> transforms;  // applied to each batch in order
  // Overrides the order (e.g. a DistributedSampler); then `shuffle` must stay false.
  std::shared_ptr<const Sampler> sampler;
};

// Where a loader stands: the next batch it yields is batch `batch` of epoch `epoch`. Saved in a
// checkpoint and restored with load_state(), the loader yields exactly the batches an
// uninterrupted run would have yielded from there on.
struct LoaderState {
  std::int64_t epoch = 0;
  std::int64_t batch = 0;
  std::uint64_t seed = 0;
  bool operator==(const LoaderState&) const = default;
};

namespace internal {
struct LoaderCore;
}

class DataLoader {
 public:
  using Options = DataLoaderOptions;
  class Iterator;

  DataLoader(std::shared_ptr<const Dataset> dataset, Options options = {});
  // Takes a copy of a dataset object (the in-memory datasets share their tensors, so this is
  // cheap).
  template <typename D>
  requires std::derived_from<D, Dataset> DataLoader(D dataset, Options options = {})
      : DataLoader(std::shared_ptr<const Dataset>(std::make_shared<const D>(std::move(dataset))),
                   std::move(options)) {}
  // Stops the workers (joining them) even if an epoch is under way.
  ~DataLoader();
  DataLoader(DataLoader&&) noexcept;
  DataLoader& operator=(DataLoader&&) noexcept;
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts an epoch: the one after the last, or the one load_state() named, from its batch. Any
  // epoch still running (its iterator abandoned) stops first and counts as finished.
  Iterator begin();
  std::default_sentinel_t end() const { return {}; }

  std::int64_t size() const;         // batches per epoch
  std::int64_t num_samples() const;  // samples per epoch (the sampler's size)
  const Dataset& dataset() const;
  const Options& options() const;
  // True when batches really are page-locked (pin_memory asked and a hook installed).
  bool pins_memory() const;

  // Between batches (in the loop body or outside it): the position of the next batch.
  LoaderState state() const;
  // Sets the position (and seed); stops an epoch under way. batch may equal size(): the epoch
  // is then over and the next begin() starts epoch + 1.
  void load_state(const LoaderState& state);

 private:
  std::shared_ptr<internal::LoaderCore> core_;
};

// An input iterator over one epoch. Moving it is fine; destroying it before the end abandons the
// epoch (its workers stop). An exception from a worker comes out of ++ (or begin()), naming the
// epoch, batch and sample, after the batches before it were delivered.
class DataLoader::Iterator {
 public:
  using iterator_concept = std::input_iterator_tag;
  using value_type = Batch;
  using difference_type = std::ptrdiff_t;

  Iterator() = default;
  Iterator(Iterator&& other) noexcept;
  Iterator& operator=(Iterator&& other) noexcept;
  ~Iterator();

  Batch& operator*() const { return batch_; }
  Batch* operator->() const { return &batch_; }
  Iterator& operator++();
  void operator++(int) { ++*this; }
  bool operator==(std::default_sentinel_t) const { return done_; }

 private:
  friend class DataLoader;
  Iterator(std::shared_ptr<internal::LoaderCore> core, std::uint64_t run);
  void release();

  std::shared_ptr<internal::LoaderCore> core_;
  std::uint64_t run_ = 0;
  mutable Batch batch_;  // handed out by reference, as a container's element would be
  bool done_ = true;
};

}  // namespace tandem::data
