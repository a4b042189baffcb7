// Integer mixing for deriving independent generator keys from (seed, epoch, index, ...):
// splitmix64's finaliser. Internal to the data layer; not a random generator itself.
#pragma once

#include <cstdint>

namespace tandem::data {

constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Combines two values into one well-spread key; not symmetric, so mix(a, b) != mix(b, a).
constexpr std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  return mix64(a ^ (mix64(b) + 0x632BE59BD9B4E019ull));
}

}  // namespace tandem::data
