// Share table cells, their text layout, and the slowest device.
#include "tandem/report/share.h"

#include <algorithm>
#include <cstdio>

namespace tandem::report {

std::vector<double> phase_seconds(const DeviceTotals& d) {
  return {d.data_s, d.forward_s, d.backward_s, d.reduction_s, d.optimizer_s, d.wait_s};
}

std::optional<std::size_t> slowest_device(const std::vector<DeviceTotals>& devices) {
  if (devices.empty()) return std::nullopt;
  std::size_t slowest = 0;
  for (std::size_t i = 1; i < devices.size(); ++i) {
    if (devices[i].busy_s() > devices[slowest].busy_s()) slowest = i;
  }
  return slowest;
}

std::string format_count(std::int64_t value) {
  const std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string format_fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string format_percent(double fraction, int decimals) {
  return format_fixed(100 * fraction, decimals) + "%";
}

ShareTable share_table(const std::vector<DeviceTotals>& devices) {
  ShareTable table;
  table.header = {"device", "samples", "samples %", "busy s", "busy %", "data s",
                  "forward s", "backward s", "reduce s", "optim s", "wait s", "peak MiB"};
  DeviceTotals total{.name = "total"};
  for (const DeviceTotals& d : devices) {
    total.samples += d.samples;
    total.forward_s += d.forward_s;
    total.backward_s += d.backward_s;
    total.reduction_s += d.reduction_s;
    total.optimizer_s += d.optimizer_s;
    total.wait_s += d.wait_s;
    total.data_s = std::max(total.data_s, d.data_s);  // every device waits for the same batches
    total.peak_bytes += d.peak_bytes;  // every device at its peak at once, at most
  }
  const auto row = [&](const DeviceTotals& d) {
    const double samples = total.samples > 0 ? static_cast<double>(d.samples) /
                                                   static_cast<double>(total.samples)
                                             : 0;
    const double busy = total.busy_s() > 0 ? d.busy_s() / total.busy_s() : 0;
    std::vector<std::string> cells = {d.name, format_count(d.samples), format_percent(samples),
                                      format_fixed(d.busy_s(), 3), format_percent(busy)};
    for (const double s : phase_seconds(d)) cells.push_back(format_fixed(s, 3));
    cells.push_back(d.peak_bytes > 0
                        ? format_fixed(static_cast<double>(d.peak_bytes) / (1024.0 * 1024.0), 1)
                        : std::string("-"));
    table.rows.push_back(std::move(cells));
  };
  for (const DeviceTotals& d : devices) row(d);
  row(total);
  return table;
}

std::vector<std::string> share_table_lines(const ShareTable& table) {
  std::vector<std::size_t> widths(table.header.size(), 0);
  const auto widen = [&](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], cells[i].size());
    }
  };
  widen(table.header);
  for (const auto& r : table.rows) widen(r);
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t i = 0; i < cells.size() && i < widths.size(); ++i) {
      if (i > 0) out += "  ";
      const std::string pad(widths[i] - cells[i].size(), ' ');
      out += i == 0 ? cells[i] + pad : pad + cells[i];  // names left, figures right
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  };
  std::vector<std::string> lines = {line(table.header)};
  for (const auto& r : table.rows) lines.push_back(line(r));
  return lines;
}

}  // namespace tandem::report
