// The map-style Dataset interface (size, get) with an optional batched fast path, the Example and
// Batch types, collation of examples into a batch, and TensorDataset (all samples in memory).
// Letters: N samples in a dataset, B samples in a batch; "..." is one sample's shape.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "tandem/base/check.h"
#include "tandem/tensor/tensor.h"

namespace tandem::data {

enum class Split : std::uint8_t { Train, Test };

// One sample. data: (...) any dtype; target: () int64, the class index.
struct Example {
  Tensor data;
  Tensor target;
};

// B samples collated. data: (B, ...) contiguous; target: (B) int64.
struct Batch {
  Tensor data;
  Tensor target;
};

// How the host tensors of a batch are allocated: page-locked when `pinned` and the pinned-memory
// hook is installed (see pinned_memory.h), plain memory otherwise.
struct BatchAllocator {
  bool pinned = false;
  Tensor empty(const Shape& shape, DType dtype) const;
};

// An error tied to one sample: what() reads "<context>, sample <index>: <detail>".
class SampleError : public Error {
 public:
  SampleError(std::int64_t index, const std::string& detail, const std::string& context = "");
  std::int64_t index() const { return index_; }
  const std::string& detail() const { return detail_; }

 private:
  std::int64_t index_;
  std::string detail_;
};

// A user's dataset implements size() and get(); that is all the DataLoader needs.
//   struct MyDataset : tandem::data::Dataset {
//     std::int64_t size() const override { return 1000; }
//     Example get(std::int64_t i) const override { return {features(i), scalar_tensor(label(i),
//     {.dtype = DType::Int64})}; }
//   };
// get() and get_batch() are called from several loader threads at once, so they must not change
// shared state (they are const; keep them so).
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  // Sample `index`, 0 <= index < size().
  virtual Example get(std::int64_t index) const = 0;
  // The samples `indices` collated into one batch, allocated through `alloc`. The default calls
  // get() for each and collates; an error in one sample is rethrown as a SampleError naming it.
  // In-memory datasets override this to copy rows straight into the batch. The returned tensors
  // must not share memory with the dataset (transforms may change them in place).
  virtual Batch get_batch(std::span<const std::int64_t> indices,
                          const BatchAllocator& alloc = {}) const;
  // Number of classes the targets come from; 0 when unknown.
  virtual std::int64_t num_classes() const { return 0; }
};

// Stacks examples whose data share one shape and dtype: data (B, ...), target (B) int64.
// Throws a SampleError (index = position in `examples`) naming the first one that differs.
Batch collate(std::span<const Example> examples, const BatchAllocator& alloc = {});

// Every sample in memory as two tensors. data: (N, ...) any dtype; targets: (N) any integer type
// (stored as int64). With num_classes > 0 every target is checked to lie in [0, num_classes).
class TensorDataset : public Dataset {
 public:
  TensorDataset(const Tensor& data, const Tensor& targets, std::int64_t num_classes = 0);

  std::int64_t size() const override { return data_.size(0); }
  Example get(std::int64_t index) const override;  // views into the dataset's memory
  Batch get_batch(std::span<const std::int64_t> indices,
                  const BatchAllocator& alloc = {}) const override;
  std::int64_t num_classes() const override { return num_classes_; }

  const Tensor& data() const { return data_; }        // (N, ...) contiguous
  const Tensor& targets() const { return targets_; }  // (N) int64 contiguous

 private:
  Tensor data_;
  Tensor targets_;
  std::int64_t num_classes_ = 0;
};

}  // namespace tandem::data
