// Runs a generic lambda with the C++ type of a DType: visit_dtype(dt, [&]<typename T>() {...}).
// visit_floating accepts only float32/float64 (the types kernels compute in).
#pragma once

#include <cstdint>

#include "tandem/base/check.h"
#include "tandem/base/dtype.h"

namespace tandem {

template <typename F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::BFloat16: return f.template operator()<BFloat16>();
    case DType::Int64: return f.template operator()<std::int64_t>();
    case DType::UInt8: return f.template operator()<std::uint8_t>();
  }
  TANDEM_FAIL("unknown dtype");
}

template <typename F>
decltype(auto) visit_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    default: TANDEM_FAIL(op, ": expected a float32 or float64 tensor, got ", dtype);
  }
}

// Converts any element type to double and back (bfloat16 through float).
template <typename T>
inline double to_double(T v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}
template <typename T>
inline T from_double(double v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace tandem
