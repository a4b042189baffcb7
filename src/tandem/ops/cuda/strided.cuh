// Element offsets of up to K strided operands that walk one shape together, on the GPU: the
// kernels' answer to the CPU's strided_loop. Up to 8 dimensions; passed to kernels by value.
// CUDA code only.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "tandem/base/check.h"
#include "tandem/base/shape.h"
#include "tandem/tensor/tensor.h"

namespace tandem::ops::cuda {

constexpr int kMaxDims = 8;

template <int K>
struct StridedWalk {
  int ndim = 0;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[K][kMaxDims] = {};

  // The element offsets (in elements) of linear index i (row-major over sizes) in every operand.
  __device__ void offsets(std::int64_t i, std::int64_t (&out)[K]) const {
    for (int k = 0; k < K; ++k) out[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const std::int64_t idx = i % sizes[d];
      i /= sizes[d];
      for (int k = 0; k < K; ++k) out[k] += idx * strides[k][d];
    }
  }
};

// The walk over `shape`, operand k with strides[k] (each as long as shape).
template <int K>
StridedWalk<K> make_walk(const Shape& shape, std::initializer_list<Strides> strides,
                         const char* op) {
  TANDEM_CHECK(shape.size() <= static_cast<std::size_t>(kMaxDims), op, ": ", shape.size(),
               " dimensions; the CUDA kernels take at most ", kMaxDims);
  TANDEM_CHECK(strides.size() == static_cast<std::size_t>(K), op, ": ", strides.size(),
               " stride lists for ", K, " operands");
  StridedWalk<K> w;
  const int ndim = static_cast<int>(shape.size());
  w.ndim = ndim;
  for (int d = 0; d < ndim && d < kMaxDims; ++d) w.sizes[d] = shape[static_cast<std::size_t>(d)];
  const Strides* s = strides.begin();
  for (int k = 0; k < K; ++k, ++s) {
    for (int d = 0; d < ndim && d < kMaxDims; ++d) {
      w.strides[k][d] = (*s)[static_cast<std::size_t>(d)];
    }
  }
  return w;
}

// Strides of t seen as having shape `out` under broadcasting (broadcast dims get stride 0).
inline Strides broadcast_strides(const Tensor& t, const Shape& out) {
  Strides s(out.size(), 0);
  const std::size_t lead = out.size() - t.shape().size();
  for (std::size_t i = 0; i < t.shape().size(); ++i) {
    s[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  }
  return s;
}

}  // namespace tandem::ops::cuda
