// Parsing and printing of device names.
#include "tandem/device/device.h"

#include <charconv>

#include "tandem/base/check.h"

namespace tandem {

Device::Device(std::string_view spelling) {
  const auto colon = spelling.find(':');
  const std::string_view kind = spelling.substr(0, colon);
  if (kind == "cpu") {
    type = DeviceType::CPU;
  } else if (kind == "cuda") {
    type = DeviceType::CUDA;
  } else {
    TANDEM_FAIL("device: unknown device type '", spelling, "' (expected cpu, cpu:N, cuda or cuda:N)");
  }
  index = 0;
  if (colon != std::string_view::npos) {
    const std::string_view digits = spelling.substr(colon + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    TANDEM_CHECK(ec == std::errc() && end == digits.data() + digits.size() && index >= 0 &&
                     !digits.empty(),
                 "device: bad device index in '", spelling, "'");
  }
}

std::string Device::str() const {
  if (type == DeviceType::CPU) return index == 0 ? "cpu" : "cpu:" + std::to_string(index);
  return "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& out, const Device& device) { return out << device.str(); }

}  // namespace tandem
