// Element types on the GPU: the storage type of each DType (bfloat16 as its 16 bits), conversions
// through double with the CPU's rules (bfloat16 rounds to nearest even, NaN stays NaN), and device
// math overloaded for float and double. CUDA code only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tandem/base/check.h"
#include "tandem/base/dispatch.h"
#include "tandem/base/dtype.h"

namespace tandem::ops::cuda {

// Runs f.template operator()<S>() with S the storage type of dtype: visit_dtype's type, with
// bfloat16 as its 16 bits (uint16_t), which device code can hold.
template <typename F>
decltype(auto) visit_stored(DType dtype, F&& f) {
  return visit_dtype(dtype, [&]<typename T>() -> decltype(auto) {
    using S = std::conditional_t<std::is_same_v<T, BFloat16>, std::uint16_t, T>;
    return f.template operator()<S>();
  });
}

// Runs f.template operator()<T>() for the types arithmetic runs in (float32, float64, int64,
// uint8); bfloat16 is storage only, an error naming op.
template <typename F>
decltype(auto) visit_arithmetic(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Int64: return f.template operator()<std::int64_t>();
    case DType::UInt8: return f.template operator()<std::uint8_t>();
    case DType::BFloat16: break;
  }
  TANDEM_FAIL(op, ": bfloat16 arithmetic is not supported; convert to float32 first");
}

__host__ __device__ inline float bf16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

__host__ __device__ inline std::uint16_t float_to_bf16_bits(float value) {
  std::uint32_t u;
  memcpy(&u, &value, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return static_cast<std::uint16_t>((u >> 16) | 0x40);  // a quiet NaN
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

// A stored element as double (uint16_t is bfloat16 only when dtype says so).
template <typename S>
__host__ __device__ inline double stored_to_double(S v, DType dtype) {
  if constexpr (std::is_same_v<S, std::uint16_t>) {
    (void)dtype;
    return static_cast<double>(bf16_bits_to_float(v));
  } else {
    (void)dtype;
    return static_cast<double>(v);
  }
}

template <typename S>
__host__ __device__ inline S stored_from_double(double v, DType dtype) {
  (void)dtype;
  if constexpr (std::is_same_v<S, std::uint16_t>) {
    return float_to_bf16_bits(static_cast<float>(v));
  } else {
    return static_cast<S>(v);
  }
}

template <typename S>
inline S host_stored_from_double(double v, DType dtype) {
  return stored_from_double<S>(v, dtype);
}

// Device math for float and double.
__device__ inline float dev_exp(float v) { return expf(v); }
__device__ inline double dev_exp(double v) { return exp(v); }
__device__ inline float dev_log(float v) { return logf(v); }
__device__ inline double dev_log(double v) { return log(v); }
__device__ inline float dev_sqrt(float v) { return sqrtf(v); }
__device__ inline double dev_sqrt(double v) { return sqrt(v); }
__device__ inline float dev_abs(float v) { return fabsf(v); }
__device__ inline double dev_abs(double v) { return fabs(v); }
__device__ inline float dev_tanh(float v) { return tanhf(v); }
__device__ inline double dev_tanh(double v) { return tanh(v); }
__device__ inline float dev_erf(float v) { return erff(v); }
__device__ inline double dev_erf(double v) { return erf(v); }
__device__ inline float dev_pow(float v, float e) { return powf(v, e); }
__device__ inline double dev_pow(double v, double e) { return pow(v, e); }
// Integer types never reach the math (the floating-only entry points check), but the templates
// are instantiated for them.
template <typename T>
__device__ inline T dev_exp(T v) { return v; }
template <typename T>
__device__ inline T dev_log(T v) { return v; }
template <typename T>
__device__ inline T dev_sqrt(T v) { return v; }
template <typename T>
__device__ inline T dev_abs(T v) { return v < T(0) ? T(0) - v : v; }
template <typename T>
__device__ inline T dev_tanh(T v) { return v; }
template <typename T>
__device__ inline T dev_erf(T v) { return v; }
template <typename T>
__device__ inline T dev_pow(T v, T) { return v; }

}  // namespace tandem::ops::cuda
