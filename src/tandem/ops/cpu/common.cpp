// Operand checks shared by the CPU kernels.
#include "tandem/ops/cpu/common.h"

namespace tandem::ops::cpu {

void check_operands(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    TANDEM_CHECK(t->device().is_cpu(), op, ": tensor of shape ", show(t->shape()), " is on ",
                 t->device(), ", but this build runs ", op, " only on the cpu");
    if (!first) {
      first = t;
    } else {
      TANDEM_CHECK(t->dtype() == first->dtype(), op, ": dtypes differ (", first->dtype(), " and ",
                   t->dtype(), ")");
    }
  }
}

}  // namespace tandem::ops::cpu
