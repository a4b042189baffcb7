// Dataset's default batch path, collation, and TensorDataset's row-copying fast path.
#include "tandem/data/dataset.h"

#include <cstring>
#include <vector>

#include "tandem/data/pinned_memory.h"

namespace tandem::data {

Tensor BatchAllocator::empty(const Shape& shape, DType dtype) const {
  return empty_host(shape, dtype, pinned);
}

namespace {

std::string sample_error_message(std::int64_t index, const std::string& detail,
                                 const std::string& context) {
  return detail::concat(context, context.empty() ? "" : ", ", "sample ", index, ": ", detail);
}

// The class index held by a one-element integer tensor.
std::int64_t target_value(const Tensor& target, const char* who) {
  TANDEM_CHECK(target.defined(), who, ": target is undefined");
  TANDEM_CHECK(target.numel() == 1, who, ": target must hold one class index, got shape ",
               show(target.shape()));
  TANDEM_CHECK(target.dtype() == DType::Int64 || target.dtype() == DType::UInt8, who,
               ": target must be int64 (or uint8), got ", target.dtype());
  return static_cast<std::int64_t>(target.item());
}

}  // namespace

SampleError::SampleError(std::int64_t index, const std::string& detail, const std::string& context)
    : Error(sample_error_message(index, detail, context)), index_(index), detail_(detail) {}

Batch Dataset::get_batch(std::span<const std::int64_t> indices, const BatchAllocator& alloc) const {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (std::int64_t index : indices) {
    try {
      TANDEM_CHECK(index >= 0 && index < size(), "index out of range [0, ", size(), ")");
      examples.push_back(get(index));
    } catch (const std::exception& e) {
      throw SampleError(index, e.what());
    }
  }
  try {
    return collate(examples, alloc);
  } catch (const SampleError& e) {
    throw SampleError(indices[static_cast<std::size_t>(e.index())], e.detail());
  }
}

Batch collate(std::span<const Example> examples, const BatchAllocator& alloc) {
  const auto count = static_cast<std::int64_t>(examples.size());
  TANDEM_CHECK(count > 0, "collate: no examples");
  const Example& first = examples[0];
  if (!first.data.defined()) throw SampleError(0, "collate: data is undefined");
  if (!first.data.device().is_cpu()) {
    throw SampleError(0, detail::concat("collate: data is on ", first.data.device(),
                                        "; datasets produce CPU tensors"));
  }
  Shape batch_shape{count};
  batch_shape.insert(batch_shape.end(), first.data.shape().begin(), first.data.shape().end());
  Batch batch{alloc.empty(batch_shape, first.data.dtype()), alloc.empty({count}, DType::Int64)};
  const std::int64_t row = first.data.numel();
  auto* targets = batch.target.data<std::int64_t>();
  for (std::int64_t b = 0; b < count; ++b) {
    const Example& ex = examples[static_cast<std::size_t>(b)];
    try {
      TANDEM_CHECK(ex.data.defined(), "collate: data is undefined");
      TANDEM_CHECK(ex.data.shape() == first.data.shape() && ex.data.dtype() == first.data.dtype(),
                   "collate: data ", show(ex.data.shape()), " ", ex.data.dtype(),
                   " differs from the batch's first sample, ", show(first.data.shape()), " ",
                   first.data.dtype());
      TANDEM_CHECK(ex.data.device().is_cpu(), "collate: data is on ", ex.data.device(),
                   "; datasets produce CPU tensors");
      copy_into(
          make_view(batch.data, ex.data.shape(), contiguous_strides(ex.data.shape()), b * row),
          ex.data);
      targets[b] = target_value(ex.target, "collate");
    } catch (const SampleError&) {
      throw;
    } catch (const std::exception& e) {
      throw SampleError(b, e.what());
    }
  }
  return batch;
}

TensorDataset::TensorDataset(const Tensor& data, const Tensor& targets, std::int64_t num_classes)
    : num_classes_(num_classes) {
  TANDEM_CHECK(data.defined() && targets.defined(), "TensorDataset: data and targets must be set");
  TANDEM_CHECK(data.dim() >= 1, "TensorDataset: data must have a sample dimension, got shape ",
               show(data.shape()));
  TANDEM_CHECK(targets.dim() == 1 && targets.size(0) == data.size(0), "TensorDataset: targets ",
               show(targets.shape()), " must be (N) with N = ", data.size(0), " (data ",
               show(data.shape()), ")");
  TANDEM_CHECK(targets.dtype() == DType::Int64 || targets.dtype() == DType::UInt8,
               "TensorDataset: targets must be integers (int64 or uint8), got ", targets.dtype());
  TANDEM_CHECK(num_classes >= 0, "TensorDataset: num_classes ", num_classes, " is negative");
  Tensor host = copy_to(data, kCPU);
  data_ = host.is_contiguous() ? host : contiguous_copy(host);
  targets_ = contiguous_copy(convert_dtype(copy_to(targets, kCPU), DType::Int64));
  const auto* t = targets_.data<std::int64_t>();
  for (std::int64_t i = 0; i < targets_.numel(); ++i) {
    TANDEM_CHECK(t[i] >= 0 && (num_classes == 0 || t[i] < num_classes), "TensorDataset: target ",
                 t[i], " of sample ", i, " is outside [0, ",
                 (num_classes ? std::to_string(num_classes) : std::string("inf")), ")");
  }
}

Example TensorDataset::get(std::int64_t index) const {
  TANDEM_CHECK(index >= 0 && index < size(), "TensorDataset: index ", index, " out of range [0, ",
               size(), ")");
  Shape sample(data_.shape().begin() + 1, data_.shape().end());
  const std::int64_t row = numel(sample);
  Strides strides = contiguous_strides(sample);
  return {make_view(data_, std::move(sample), std::move(strides), data_.offset() + index * row),
          make_view(targets_, {}, {}, targets_.offset() + index)};
}

Batch TensorDataset::get_batch(std::span<const std::int64_t> indices,
                               const BatchAllocator& alloc) const {
  const auto count = static_cast<std::int64_t>(indices.size());
  Shape shape = data_.shape();
  shape[0] = count;
  Batch batch{alloc.empty(shape, data_.dtype()), alloc.empty({count}, DType::Int64)};
  const std::size_t row_bytes =
      static_cast<std::size_t>(data_.numel() / std::max<std::int64_t>(size(), 1)) *
      element_size(data_.dtype());
  const auto* src = static_cast<const std::uint8_t*>(data_.raw_data());
  auto* dst = static_cast<std::uint8_t*>(batch.data.raw_data());
  const auto* targets = targets_.data<std::int64_t>();
  auto* out_targets = batch.target.data<std::int64_t>();
  for (std::int64_t b = 0; b < count; ++b) {
    const std::int64_t index = indices[static_cast<std::size_t>(b)];
    if (index < 0 || index >= size()) {
      throw SampleError(index,
                        detail::concat("TensorDataset: index out of range [0, ", size(), ")"));
    }
    if (row_bytes) {
      std::memcpy(dst + static_cast<std::size_t>(b) * row_bytes,
                  src + static_cast<std::size_t>(index) * row_bytes, row_bytes);
    }
    out_targets[b] = targets[index];
  }
  return batch;
}

}  // namespace tandem::data
