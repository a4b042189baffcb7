// libFuzzer target: the IDX reader (with gzip inflation) on arbitrary bytes, alone and as an
// images + labels pair. Only tandem::Error may come out; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tandem/data/formats/bytes.h"
#include "tandem/data/formats/idx.h"

namespace {

// Inflation stops here, so a tiny gzip bomb cannot exhaust the fuzzer's memory.
constexpr std::size_t kFuzzInflateLimit = std::size_t{16} << 20;

void parse_one(std::span<const std::uint8_t> in) {
  try {
    std::vector<std::uint8_t> inflated;
    if (tandem::data::is_gzip(in)) {
      inflated = tandem::data::gunzip(in, "fuzz.gz", kFuzzInflateLimit);
      in = inflated;
    }
    const tandem::data::IdxHeader h = tandem::data::parse_idx(in, "fuzz.idx");
    // The header's promise: exactly the product of the sizes follows.
    std::size_t count = 1;
    for (auto d : h.dims) count *= static_cast<std::size_t>(d);
    if (h.data_offset + count != in.size()) __builtin_trap();
  } catch (const tandem::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  parse_one(in);
  if (size < 1) return 0;
  // Byte 0 splits the rest into an image file and a label file.
  const std::size_t rest = size - 1;
  const std::size_t cut = rest * data[0] / 255;
  try {
    const tandem::data::TensorDataset ds =
        tandem::data::idx_dataset(in.subspan(1, cut), "images", in.subspan(1 + cut), "labels", 10);
    if (ds.data().dim() != 4 || ds.targets().size(0) != ds.size()) __builtin_trap();
  } catch (const tandem::Error&) {
  }
  return 0;
}
