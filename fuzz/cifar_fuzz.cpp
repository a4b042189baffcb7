// libFuzzer target: the CIFAR-10 batch reader on arbitrary bytes. Only tandem::Error may come
// out; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tandem/data/formats/cifar.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  try {
    const std::int64_t records = tandem::data::parse_cifar(in, "fuzz.bin");
    std::vector<std::uint8_t> pixels;
    std::vector<std::int64_t> labels;
    tandem::data::append_cifar(in, pixels, labels);
    if (static_cast<std::int64_t>(labels.size()) != records ||
        pixels.size() != labels.size() * 3072) {
      __builtin_trap();
    }
    for (auto l : labels) {
      if (l < 0 || l >= 10) __builtin_trap();
    }
  } catch (const tandem::Error&) {
  }
  return 0;
}
