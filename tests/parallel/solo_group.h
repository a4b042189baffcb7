// A world of one process for the cross-process reducer's tests: Gloo groups of one rank over a
// file store in a private directory (several may share it under distinct job names).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "../data/data_test_util.h"
#include "tandem/dist/init.h"

namespace tandem::parallel::testing {

inline std::unique_ptr<dist::ProcessGroup> solo_group(const data::testing::TempDir& dir,
                                                      const std::string& job) {
  return dist::init_process_group(
      dist::WorldInfo{},
      {.timeout = std::chrono::seconds(20), .store = "file:" + dir.path().string(), .job = job});
}

}  // namespace tandem::parallel::testing
