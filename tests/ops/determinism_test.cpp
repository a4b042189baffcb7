// The deterministic-algorithms switch: on by default, and a scope's setting put back after it.
#include <gtest/gtest.h>

#include "tandem/ops/determinism.h"

namespace tandem {
namespace {

TEST(DeterministicAlgorithms, OnByDefaultAndRestoredAfterAScope) {
  EXPECT_TRUE(ops::deterministic_algorithms());
  {
    const ops::DeterministicAlgorithms fastest(false);
    EXPECT_FALSE(ops::deterministic_algorithms());
    {
      const ops::DeterministicAlgorithms exact(true);
      EXPECT_TRUE(ops::deterministic_algorithms());
    }
    EXPECT_FALSE(ops::deterministic_algorithms());
  }
  EXPECT_TRUE(ops::deterministic_algorithms());
}

}  // namespace
}  // namespace tandem
