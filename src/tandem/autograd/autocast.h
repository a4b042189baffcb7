// Autocast, per thread, as torch.autocast: while an AutocastGuard for bfloat16 is alive, the
// differentiable conv2d, linear and matmul take float32 operands, compute in bfloat16 with float32
// accumulation and return float32; everything else (activations, pooling, batch norm, the loss,
// the optimizer's master weights) stays float32. The casts are recorded, so gradients reach the
// float32 parameters as float32. Biases are added in float32 after the product.
// Not a general mixed-precision engine: no float16, no loss scaling (bfloat16 needs none).
#pragma once

#include <cstdint>
#include <string_view>

#include "tandem/tensor/tensor.h"

namespace tandem {

enum class Precision : std::uint8_t { Float32, BFloat16 };

std::string_view precision_name(Precision precision);  // "fp32", "bf16"

// This thread's autocast precision (Float32: no autocast).
Precision autocast_precision();

// Whether autocast turns a product of a and b into a bfloat16 one on this thread: bfloat16
// autocast is on and both are float32.
bool autocast_to_bf16(const Tensor& a, const Tensor& b);

class AutocastGuard {
 public:
  explicit AutocastGuard(Precision precision);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  Precision previous_;
};

}  // namespace tandem
