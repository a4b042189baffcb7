// The process-wide deterministic-algorithms switch (determinism.h).
#include "tandem/ops/determinism.h"

#include <atomic>

namespace tandem::ops {
namespace {

std::atomic<bool> deterministic{true};

}  // namespace

void set_deterministic_algorithms(bool on) {
  deterministic.store(on, std::memory_order_relaxed);
}

bool deterministic_algorithms() { return deterministic.load(std::memory_order_relaxed); }

}  // namespace tandem::ops
