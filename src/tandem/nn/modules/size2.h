// Size2: a (height, width) pair that a single integer also converts to, so module constructors and
// options read as PyTorch's `kernel_size=3` or `kernel_size=(3, 5)`: Conv2d(3, 16, 3) or
// {.kernel_size = {3, 5}}.
#pragma once

#include <array>
#include <cstdint>
#include <ostream>

namespace tandem::nn {

struct Size2 {
  std::int64_t h = 0;
  std::int64_t w = 0;
  Size2(std::int64_t both) : h(both), w(both) {}  // NOLINT: implicit on purpose
  Size2(std::int64_t height, std::int64_t width) : h(height), w(width) {}
  std::array<std::int64_t, 2> array() const { return {h, w}; }
  bool operator==(const Size2&) const = default;
};

inline std::ostream& operator<<(std::ostream& out, const Size2& s) {
  return out << "(" << s.h << ", " << s.w << ")";
}

}  // namespace tandem::nn
