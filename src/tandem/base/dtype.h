// Element types a tensor can hold, their sizes and names, and the bfloat16 storage type.
// Float64 exists for reference kernels and finite-difference gradient checks.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

namespace tandem {

enum class DType : std::uint8_t { Float32, Float64, BFloat16, Int64, UInt8 };

std::size_t element_size(DType dtype);
std::string_view dtype_name(DType dtype);  // "float32" ...
std::string_view safetensors_dtype_name(DType dtype);  // "F32", "F64", "BF16", "I64", "U8"
bool is_floating(DType dtype);
std::ostream& operator<<(std::ostream& out, DType dtype);

// bfloat16: the top 16 bits of an IEEE float32; conversion rounds to nearest even.
struct BFloat16 {
  std::uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float value) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(value);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
      bits = static_cast<std::uint16_t>((u >> 16) | 0x40);  // keep NaN a (quiet) NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = static_cast<std::uint16_t>(u >> 16);
    }
  }
  explicit operator float() const { return std::bit_cast<float>(std::uint32_t{bits} << 16); }
};

// Maps a C++ type to its DType at compile time.
template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::Int64; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::UInt8; };

}  // namespace tandem
