// Printing of tensors for tests and debugging: shape, dtype, device and (up to 64) values.
#include <iomanip>

#include "tandem/tensor/tensor.h"

namespace tandem {

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  if (!t.defined()) return out << "Tensor(undefined)";
  out << "Tensor(shape=" << to_string(t.shape()) << ", dtype=" << t.dtype()
      << ", device=" << t.device();
  if (t.requires_grad()) out << ", requires_grad";
  out << ")\n[";
  const auto values = t.to_vector<double>();
  const std::size_t shown = std::min<std::size_t>(values.size(), 64);
  for (std::size_t i = 0; i < shown; ++i) out << (i ? ", " : "") << std::setprecision(6) << values[i];
  if (shown < values.size()) out << ", ... (" << values.size() << " values)";
  return out << "]";
}

}  // namespace tandem
