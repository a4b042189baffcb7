// CSV of numeric features plus one integer label column (the seeds' 100-feature example): one
// row per sample, an optional header row. Errors name file:line:column, the field and its text.
// Not a general CSV reader: no quoting, no missing values, no text columns.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/data/dataset.h"

namespace tandem::data {

enum class CsvHeader : std::uint8_t {
  Auto,     // the first row is a header when any of its fields is not a number
  Present,  // the first row is a header
  Absent,   // every row is data
};

// Labels lie in [0, kMaxCsvClasses): the class count sizes a model's output layer.
inline constexpr std::int64_t kMaxCsvClasses = 65536;

struct CsvOptions {
  std::int64_t label_column = -1;  // 0-based; negative counts from the end (-1: the last column)
  CsvHeader header = CsvHeader::Auto;
  char delimiter = ',';
  std::int64_t num_classes = 0;  // labels must lie in [0, num_classes); 0: max label + 1
};

// A parsed table: F = columns - 1 features per row.
struct CsvTable {
  std::int64_t rows = 0;
  std::int64_t features = 0;
  std::vector<float> values;         // (rows, features) row-major
  std::vector<std::int64_t> labels;  // (rows)
  std::vector<std::string> header;   // column names, when there was a header row
  std::int64_t num_classes = 0;
};

// Parses CSV text. Rows must all have the first row's field count; every feature must be a finite
// number within float32 range; every label a non-negative integer. Blank lines are skipped; CRLF
// line ends and a UTF-8 byte order mark are accepted.
CsvTable parse_csv(std::string_view text, std::string_view name, const CsvOptions& options = {});

// A CSV file as a dataset: data (N, F) float32, targets (N) int64.
TensorDataset csv_dataset(const std::filesystem::path& path, const CsvOptions& options = {});

}  // namespace tandem::data
