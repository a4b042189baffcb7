// Builds the message of a failed TANDEM_CHECK: the message first, then where it was raised.
#include "tandem/base/check.h"

#include <cstring>

namespace tandem::detail {

void throw_error(const char* file, int line, const std::string& message) {
  const char* base = std::strstr(file, "tandem/");
  std::ostringstream out;
  out << message << " [" << (base ? base : file) << ":" << line << "]";
  throw Error(out.str());
}

}  // namespace tandem::detail
