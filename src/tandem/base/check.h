// TANDEM_CHECK: the one check macro. Throws tandem::Error carrying file:line and a message built
// from its arguments. Not for hot inner loops (use plain asserts there, if anything).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tandem {

// Every error tandem raises on bad input or misuse. what() is one line a user can act on.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
[[noreturn]] void throw_error(const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace tandem

// TANDEM_CHECK(cond, "linear: input ", shape, " does not match ...")
#define TANDEM_CHECK(cond, ...)                                                      \
  do {                                                                               \
    if (!(cond)) [[unlikely]] {                                                      \
      ::tandem::detail::throw_error(__FILE__, __LINE__,                              \
                                    ::tandem::detail::concat(__VA_ARGS__));          \
    }                                                                                \
  } while (0)

// TANDEM_FAIL("message ", value): unconditional error.
#define TANDEM_FAIL(...) \
  ::tandem::detail::throw_error(__FILE__, __LINE__, ::tandem::detail::concat(__VA_ARGS__))
