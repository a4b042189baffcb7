// Test support: the message of the tandem::Error a callable throws, and a substring expectation,
// for the bad-input tests of every layer.
#pragma once

#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "tandem/base/check.h"

namespace tandem::testing {

// The message of the Error `f` throws; a test failure (and "(no error)") when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a tandem::Error";
  return "(no error)";
}

inline void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

}  // namespace tandem::testing
