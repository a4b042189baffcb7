// Helpers of the CUDA kernel tests: the skip without a GPU (gpu_skip.h), random inputs made on the
// CPU and copied to cuda:0, and the comparison of a GPU result with the CPU kernel's.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "gpu_skip.h"
#include "tandem/base/rng.h"
#include "tandem/tensor/factories.h"
#include "tandem/tensor/tensor.h"

namespace tandem::testing {

inline const Device kGpu(DeviceType::CUDA, 0);

// Uniform in [lo, hi) on the CPU, float32 unless said; the same numbers for the same seed.
inline Tensor random_cpu(const Shape& shape, std::uint64_t seed, double lo = -1.0, double hi = 1.0,
                         DType dtype = DType::Float32) {
  Generator g(seed);
  Tensor t = empty(shape, {.dtype = DType::Float64});
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = lo + (hi - lo) * g.uniform();
  return dtype == DType::Float64 ? t : t.to(dtype);
}

inline Tensor on_gpu(const Tensor& cpu) { return cpu.to(kGpu); }

// Every element of gpu (copied back) within atol + rtol * |cpu| of cpu; shapes and dtypes equal.
// Reports the first differing index.
inline ::testing::AssertionResult near_cpu(const Tensor& gpu, const Tensor& cpu, double atol = 1e-5,
                                           double rtol = 1e-4) {
  if (!gpu.defined() || !cpu.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (!gpu.device().is_cuda())
    return ::testing::AssertionFailure() << "result is on " << gpu.device() << ", not on a GPU";
  if (gpu.shape() != cpu.shape())
    return ::testing::AssertionFailure() << "shape " << show(gpu.shape()) << " vs "
                                         << show(cpu.shape());
  if (gpu.dtype() != cpu.dtype())
    return ::testing::AssertionFailure() << "dtype " << gpu.dtype() << " vs " << cpu.dtype();
  const Tensor a = gpu.to(kCPU).to(DType::Float64).contiguous();
  const Tensor b = cpu.to(DType::Float64).contiguous();
  const double* pa = a.data<double>();
  const double* pb = b.data<double>();
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const bool both_nan = std::isnan(pa[i]) && std::isnan(pb[i]);
    if (!both_nan && !(std::abs(pa[i] - pb[i]) <= atol + rtol * std::abs(pb[i]))) {
      return ::testing::AssertionFailure() << "element " << i << " of " << a.numel() << ": gpu "
                                           << pa[i] << ", cpu " << pb[i];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tandem::testing
