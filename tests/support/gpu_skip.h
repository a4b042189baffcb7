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
