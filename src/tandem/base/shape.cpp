// Shape arithmetic shared by every layer.
#include "tandem/base/shape.h"

#include <algorithm>

#include "tandem/base/check.h"

namespace tandem {

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

std::string to_string(const Shape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + ")";
}

std::ostream& operator<<(std::ostream& out, ShapePrinter p) { return out << to_string(p.shape); }

Shape infer_shape(const Shape& shape, std::int64_t count, const char* op) {
  Shape out = shape;
  std::int64_t known = 1;
  int infer_at = -1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TANDEM_CHECK(infer_at < 0, op, ": only one dimension can be -1 in ", to_string(shape));
      infer_at = static_cast<int>(i);
    } else {
      TANDEM_CHECK(out[i] >= 0, op, ": invalid dimension ", out[i], " in ", to_string(shape));
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    TANDEM_CHECK(known > 0 && count % known == 0, op, ": shape ", to_string(shape),
                 " is invalid for ", count, " elements");
    out[infer_at] = count / known;
  }
  TANDEM_CHECK(numel(out) == count, op, ": shape ", to_string(shape), " is invalid for ", count,
               " elements");
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    TANDEM_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", to_string(a), " and ",
                 to_string(b), " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::int64_t wrap_dim(std::int64_t dim, std::int64_t rank, const char* op) {
  const std::int64_t r = std::max<std::int64_t>(rank, 1);
  TANDEM_CHECK(dim >= -r && dim < r, op, ": dimension ", dim, " is out of range for a tensor of ",
               rank, " dimensions");
  return dim < 0 ? dim + r : dim;
}

}  // namespace tandem
