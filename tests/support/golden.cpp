// Location of the golden files.
#include "golden.h"

namespace tandem::testing {

std::string golden_path(const std::string& name) { return std::string(TANDEM_GOLDEN_DIR) + "/" + name; }

}  // namespace tandem::testing
