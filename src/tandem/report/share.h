// Each device's share of the work: the table the report shows and `tandem train` prints at its
// end (the same cells, so the two agree), and which device was the slowest. Not a chart.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tandem/report/run_data.h"

namespace tandem::report {

// The phases of a device's time, in the order the report stacks them, and their names.
inline constexpr const char* kPhaseNames[] = {"waiting for data", "forward", "backward",
                                              "reduction / communication", "optimizer",
                                              "waiting for others"};
std::vector<double> phase_seconds(const DeviceTotals& d);

// The device that was busy longest (the one the others wait for); none without devices.
std::optional<std::size_t> slowest_device(const std::vector<DeviceTotals>& devices);

// Header row, one row per device, and a total row; every cell already formatted.
struct ShareTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
ShareTable share_table(const std::vector<DeviceTotals>& devices);

// The table as fixed-width text lines (right-aligned columns), for the terminal.
std::vector<std::string> share_table_lines(const ShareTable& table);

// "12,345"
std::string format_count(std::int64_t value);
// "%.<decimals>f" of 100 * fraction, and a "%".
std::string format_percent(double fraction, int decimals = 1);
// "%.<decimals>f"
std::string format_fixed(double value, int decimals);

}  // namespace tandem::report
