// The CSV parser: one pass over the text, fields located by their line and column.
#include "tandem/data/formats/csv.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <system_error>

#include "tandem/data/formats/bytes.h"
#include "tandem/tensor/factories.h"

namespace tandem::data {
namespace {

struct Field {
  std::string_view text;  // trimmed of spaces and tabs
  std::size_t column;     // 1-based character column where the trimmed text starts
};

bool is_blank(char c) { return c == ' ' || c == '\t'; }

std::vector<Field> split_fields(std::string_view line, char delimiter) {
  std::vector<Field> fields;
  std::size_t start = 0;
  for (;;) {
    std::size_t end = line.find(delimiter, start);
    if (end == std::string_view::npos) end = line.size();
    std::size_t b = start, e = end;
    while (b < e && is_blank(line[b])) ++b;
    while (e > b && is_blank(line[e - 1])) --e;
    fields.push_back({line.substr(b, e - b), b + 1});
    if (end == line.size()) break;
    start = end + 1;
  }
  return fields;
}

enum class NumberStatus : std::uint8_t { Ok, NotANumber, OutOfRange };

NumberStatus parse_double(std::string_view text, double& value) {
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);
  if (text.empty()) return NumberStatus::NotANumber;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value, std::chars_format::general);
  if (ptr != end) return NumberStatus::NotANumber;
  if (ec == std::errc::result_out_of_range) return NumberStatus::OutOfRange;
  if (ec != std::errc()) return NumberStatus::NotANumber;
  return NumberStatus::Ok;
}

bool all_numbers(const std::vector<Field>& fields) {
  for (const Field& f : fields) {
    double v = 0;
    if (parse_double(f.text, v) == NumberStatus::NotANumber) return false;
  }
  return true;
}

}  // namespace

CsvTable parse_csv(std::string_view text, std::string_view name, const CsvOptions& options) {
  TANDEM_CHECK(
      options.delimiter != '\n' && options.delimiter != '\r' && !is_blank(options.delimiter), name,
      ": the delimiter cannot be a line end, space or tab");
  TANDEM_CHECK(options.num_classes >= 0, name, ": num_classes ", options.num_classes,
               " is negative");
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  CsvTable table;
  std::size_t pos = 0;
  std::int64_t line_no = 0;
  std::int64_t columns = -1;    // field count of every row
  std::int64_t first_line = 0;  // the line that set it
  std::size_t label_col = 0;
  std::int64_t max_label = -1;
  while (pos < text.size()) {
    ++line_no;
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::vector<Field> fields = split_fields(line, options.delimiter);
    if (columns < 0) {
      columns = static_cast<std::int64_t>(fields.size());
      first_line = line_no;
      TANDEM_CHECK(columns >= 2, name, ":", line_no, ":1: ", columns,
                   " column(s); need at least one feature and a label: '", printable(line), "'");
      const std::int64_t lc =
          options.label_column < 0 ? columns + options.label_column : options.label_column;
      TANDEM_CHECK(lc >= 0 && lc < columns, name, ":", line_no, ":1: label column ",
                   options.label_column, " is outside the ", columns, " columns of the first row");
      label_col = static_cast<std::size_t>(lc);
      table.features = columns - 1;
      const bool header = options.header == CsvHeader::Present ||
                          (options.header == CsvHeader::Auto && !all_numbers(fields));
      if (header) {
        for (const Field& f : fields) table.header.emplace_back(f.text);
        continue;
      }
    }
    if (static_cast<std::int64_t>(fields.size()) != columns) {
      const std::size_t col = static_cast<std::int64_t>(fields.size()) > columns
                                  ? fields[static_cast<std::size_t>(columns)].column
                                  : line.size() + 1;
      TANDEM_FAIL(name, ":", line_no, ":", col, ": row has ", fields.size(), " fields, expected ",
                  columns, " (as on line ", first_line, "): '", printable(line), "'");
    }
    for (std::size_t j = 0; j < fields.size(); ++j) {
      const Field& f = fields[j];
      double v = 0;
      const NumberStatus status = parse_double(f.text, v);
      const auto where = [&] {
        return tandem::detail::concat(name, ":", line_no, ":", f.column, ": field ", j + 1, " '",
                                      printable(f.text), "'");
      };
      TANDEM_CHECK(status != NumberStatus::NotANumber, where(),
                   f.text.empty() ? " is empty" : " is not a number");
      TANDEM_CHECK(status != NumberStatus::OutOfRange, where(), " is out of range");
      TANDEM_CHECK(std::isfinite(v), where(), " is not a finite number");
      if (j == label_col) {
        // The class count is the largest label + 1 and sizes the model's output layer, so a
        // label is bounded like any other size read from a file.
        TANDEM_CHECK(v >= 0 && v < static_cast<double>(kMaxCsvClasses) && v == std::floor(v),
                     where(), ": a label must be a non-negative integer below ", kMaxCsvClasses);
        const auto label = static_cast<std::int64_t>(v);
        TANDEM_CHECK(options.num_classes == 0 || label < options.num_classes, where(),
                     ": label outside [0, ", options.num_classes, ")");
        table.labels.push_back(label);
        max_label = std::max(max_label, label);
      } else {
        TANDEM_CHECK(std::fabs(v) <= std::numeric_limits<float>::max(), where(),
                     " is outside the float32 range");
        table.values.push_back(static_cast<float>(v));
      }
    }
    ++table.rows;
  }
  TANDEM_CHECK(columns >= 0, name, ":1: empty file (no rows)");
  TANDEM_CHECK(table.rows > 0, name, ":", first_line, ": no data rows after the header");
  table.num_classes = options.num_classes ? options.num_classes : max_label + 1;
  return table;
}

TensorDataset csv_dataset(const std::filesystem::path& path, const CsvOptions& options) {
  const std::vector<std::uint8_t> bytes = read_file(path);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  CsvTable table = parse_csv(text, path.string(), options);
  // data: (N, F) float32
  return TensorDataset(from_vector(table.values, {table.rows, table.features}),
                       from_vector(table.labels, {table.rows}), table.num_classes);
}

}  // namespace tandem::data
