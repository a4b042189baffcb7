// The logits of the PyTorch snippets quoted in the softmax and cross-entropy tests:
// sin(i * 0.7 + 0.3) * 2 for i = 0..11, as (3, 4).
#pragma once

#include <cmath>
#include <vector>

#include "tandem/tandem.h"

namespace tandem::testing {

inline Tensor snippet_logits(DType dtype) {
  std::vector<double> v(12);
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = std::sin(static_cast<double>(i) * 0.7 + 0.3) * 2;
  }
  return from_vector(v, {3, 4}, {.dtype = dtype});
}

}  // namespace tandem::testing
