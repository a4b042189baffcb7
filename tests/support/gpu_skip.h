// TANDEM_REQUIRE_GPU(): the first line of every test that needs a GPU. Without one the test is
// reported skipped with the reason discovery gives; never a silent pass. CUDA-free.
#pragma once

#include <gtest/gtest.h>

#include "tandem/device/cuda/discovery.h"

#define TANDEM_REQUIRE_GPU()                                                   \
  do {                                                                         \
    if (!::tandem::cuda::is_available())                                       \
      GTEST_SKIP() << "no CUDA GPU: " << ::tandem::cuda::unavailable_reason(); \
  } while (0)

// TANDEM_REQUIRE_GPUS(n): as above, for tests that need n GPUs or more (NCCL between GPUs).
#define TANDEM_REQUIRE_GPUS(n)                                                          \
  do {                                                                                  \
    TANDEM_REQUIRE_GPU();                                                               \
    if (::tandem::cuda::device_count() < (n))                                           \
      GTEST_SKIP() << "needs " << (n) << " CUDA GPUs, this machine has "                \
                   << ::tandem::cuda::device_count();                                   \
  } while (0)
