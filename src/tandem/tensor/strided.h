// StridedLoop: walks the elements of up to three same-shaped strided operands in logical
// (row-major) order, calling f(offset_0, offset_1, ...) with element offsets. Dimensions are
// coalesced first, so contiguous operands become one flat loop.
#pragma once

#include <array>
#include <cstdint>

#include "tandem/base/shape.h"

namespace tandem {

template <std::size_t N>
struct StridedOperands {
  Shape shape;
  std::array<Strides, N> strides;
};

// Merges adjacent dimensions that are contiguous with each other in every operand, and drops
// size-1 dimensions.
template <std::size_t N>
StridedOperands<N> coalesce(const Shape& shape, const std::array<Strides, N>& strides) {
  StridedOperands<N> out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !out.shape.empty();
    for (std::size_t k = 0; k < N && merge; ++k) {
      merge = out.strides[k].back() == strides[k][d] * shape[d];
    }
    if (merge) {
      out.shape.back() *= shape[d];
      for (std::size_t k = 0; k < N; ++k) out.strides[k].back() = strides[k][d];
    } else {
      out.shape.push_back(shape[d]);
      for (std::size_t k = 0; k < N; ++k) out.strides[k].push_back(strides[k][d]);
    }
  }
  return out;
}

// Calls f(std::array<int64, N> offsets) for every element, innermost dimension fastest.
template <std::size_t N, typename F>
void strided_loop(const Shape& shape, const std::array<Strides, N>& strides,
                  const std::array<std::int64_t, N>& base, F&& f) {
  const StridedOperands<N> ops = coalesce(shape, strides);
  const std::size_t rank = ops.shape.size();
  if (numel(shape) == 0) return;
  if (rank == 0) {
    f(base);
    return;
  }
  Shape index(rank, 0);
  std::array<std::int64_t, N> offs = base;
  const std::int64_t inner = ops.shape[rank - 1];
  std::array<std::int64_t, N> inner_stride;
  for (std::size_t k = 0; k < N; ++k) inner_stride[k] = ops.strides[k][rank - 1];
  while (true) {
    std::array<std::int64_t, N> o = offs;
    for (std::int64_t i = 0; i < inner; ++i) {
      f(o);
      for (std::size_t k = 0; k < N; ++k) o[k] += inner_stride[k];
    }
    std::size_t d = rank - 1;
    while (true) {
      if (d == 0) return;
      --d;
      ++index[d];
      for (std::size_t k = 0; k < N; ++k) offs[k] += ops.strides[k][d];
      if (index[d] < ops.shape[d]) break;
      for (std::size_t k = 0; k < N; ++k) offs[k] -= ops.strides[k][d] * ops.shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace tandem
