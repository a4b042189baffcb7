// Thread-local autocast precision.
#include "tandem/autograd/autocast.h"

namespace tandem {
namespace {
thread_local Precision g_precision = Precision::Float32;
}

std::string_view precision_name(Precision precision) {
  return precision == Precision::BFloat16 ? "bf16" : "fp32";
}

Precision autocast_precision() { return g_precision; }

bool autocast_to_bf16(const Tensor& a, const Tensor& b) {
  return g_precision == Precision::BFloat16 && a.dtype() == DType::Float32 &&
         b.dtype() == DType::Float32;
}

AutocastGuard::AutocastGuard(Precision precision) : previous_(g_precision) {
  g_precision = precision;
}

AutocastGuard::~AutocastGuard() { g_precision = previous_; }

}  // namespace tandem
