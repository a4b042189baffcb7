// Generator: a counter-based Philox4x32-10 random generator. Its whole state is (seed, stream,
// offset), so it can be saved in a checkpoint, restored exactly, and split into independent
// streams (one per sample, per replica, ...) without sharing anything between threads.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace tandem {

struct GeneratorState {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  std::uint64_t offset = 0;  // number of 32-bit draws consumed
  bool operator==(const GeneratorState&) const = default;
};

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0, std::uint64_t stream = 0) : state_{seed, stream, 0} {}

  std::uint32_t next_u32();
  std::uint64_t next_u64();
  float uniform();                 // [0, 1)
  double uniform_double();         // [0, 1)
  float normal();                  // standard normal (Box-Muller)
  std::int64_t randint(std::int64_t low, std::int64_t high);  // [low, high)

  GeneratorState state() const { return state_; }
  void set_state(const GeneratorState& state);
  void manual_seed(std::uint64_t seed) { set_state({seed, state_.stream, 0}); }

 private:
  void refill();
  GeneratorState state_;
  std::array<std::uint32_t, 4> block_{};
  std::uint64_t block_index_ = ~std::uint64_t{0};  // offset / 4 of the cached block
};

// The process-wide default generator (for init and dropout when none is given), like torch's.
// Code that may run on several threads at once (DataParallel replicas) draws from it only while
// holding default_generator_mutex().
Generator& default_generator();
std::mutex& default_generator_mutex();
void manual_seed(std::uint64_t seed);

// Philox4x32-10 on one 128-bit counter with a 64-bit key.
std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> counter, std::uint64_t key);

}  // namespace tandem
