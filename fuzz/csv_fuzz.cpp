// libFuzzer target: the CSV reader on arbitrary text, with options picked by the first byte
// (label column, header mode, delimiter). Only tandem::Error may come out; the table it returns
// must be consistent and finite.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tandem/data/formats/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t pick = data[0];
  static constexpr char kDelimiters[] = {',', ';', '|', ':'};
  const tandem::data::CsvOptions options{
      .label_column = (pick & 4) ? -1 - (pick & 3) : (pick & 3),
      .header = static_cast<tandem::data::CsvHeader>((pick >> 3) % 3),
      .delimiter = kDelimiters[(pick >> 5) & 3],
      .num_classes = (pick & 0x80) ? 10 : 0};
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const tandem::data::CsvTable t = tandem::data::parse_csv(text, "fuzz.csv", options);
    if (t.rows < 1 || t.features < 1 ||
        t.values.size() != static_cast<std::size_t>(t.rows * t.features) ||
        t.labels.size() != static_cast<std::size_t>(t.rows) || t.num_classes < 1) {
      __builtin_trap();
    }
    for (float v : t.values) {
      if (!std::isfinite(v)) __builtin_trap();
    }
    for (auto l : t.labels) {
      if (l < 0 || l >= t.num_classes) __builtin_trap();
    }
  } catch (const tandem::Error&) {
  }
  return 0;
}
