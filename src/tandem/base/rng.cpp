// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
#include "tandem/base/rng.h"

#include <cmath>
#include <numbers>

#include "tandem/base/check.h"

namespace tandem {

std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> c, std::uint64_t key) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{kMul0} * c[0];
    const std::uint64_t p1 = std::uint64_t{kMul1} * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<std::uint32_t>(p0)};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return c;
}

void Generator::refill() {
  const std::uint64_t index = state_.offset / 4;
  block_ = philox4x32({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                       static_cast<std::uint32_t>(state_.stream),
                       static_cast<std::uint32_t>(state_.stream >> 32)},
                      state_.seed);
  block_index_ = index;
}

std::uint32_t Generator::next_u32() {
  if (state_.offset / 4 != block_index_) refill();
  return block_[state_.offset++ % 4];
}

std::uint64_t Generator::next_u64() {
  const std::uint64_t hi = next_u32();
  return (hi << 32) | next_u32();
}

float Generator::uniform() { return static_cast<float>(next_u32() >> 8) * 0x1.0p-24f; }

double Generator::uniform_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

float Generator::normal() {
  const double u1 = 1.0 - uniform_double();  // (0, 1]
  const double u2 = uniform_double();
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                            std::cos(2.0 * std::numbers::pi * u2));
}

std::int64_t Generator::randint(std::int64_t low, std::int64_t high) {
  TANDEM_CHECK(high > low, "randint: empty range [", low, ", ", high, ")");
  const std::uint64_t range = static_cast<std::uint64_t>(high - low);
  // Rejection sampling removes modulo bias.
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % range);
  std::uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return low + static_cast<std::int64_t>(x % range);
}

void Generator::set_state(const GeneratorState& state) {
  state_ = state;
  block_index_ = ~std::uint64_t{0};
}

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

std::mutex& default_generator_mutex() {
  static std::mutex mutex;
  return mutex;
}

void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace tandem
