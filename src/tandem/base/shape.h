// Shapes and strides: small vectors of int64, their element counts, contiguous strides,
// broadcasting, and the "(64, 784)" spelling every error message uses.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tandem {

using Shape = std::vector<std::int64_t>;
using Strides = std::vector<std::int64_t>;

std::int64_t numel(const Shape& shape);
Strides contiguous_strides(const Shape& shape);
std::string to_string(const Shape& shape);  // "(64, 784)"; "()" for a scalar

// Resolves one -1 entry so that numel(result) == count; checks everything else. `op` names the
// caller in errors.
Shape infer_shape(const Shape& shape, std::int64_t count, const char* op);

// NumPy broadcasting of two shapes; throws naming `op` when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Wraps a possibly negative dimension index into [0, rank); throws naming `op` when out of range.
std::int64_t wrap_dim(std::int64_t dim, std::int64_t rank, const char* op);

struct ShapePrinter {
  const Shape& shape;
};
std::ostream& operator<<(std::ostream& out, ShapePrinter p);
inline ShapePrinter show(const Shape& shape) { return {shape}; }

}  // namespace tandem
