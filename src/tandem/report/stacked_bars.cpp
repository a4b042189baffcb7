// Horizontal stacked bars on one shared scale, with a segment legend and each bar's total.
#include <algorithm>
#include <cmath>

#include "tandem/report/charts.h"
#include "tandem/report/svg.h"

namespace tandem::report {
namespace {

constexpr double kWidth = 560;
constexpr double kLeft = 96;    // bar labels
constexpr double kRight = 70;   // totals
constexpr double kBar = 22;
constexpr double kGap = 14;

double positive(double v) { return std::isfinite(v) && v > 0 ? v : 0; }

}  // namespace

std::string stacked_bars(const std::vector<StackedBar>& bars,
                         const std::vector<std::string>& segment_names, const std::string& title,
                         const std::string& unit) {
  std::vector<LegendEntry> entries;
  for (std::size_t i = 0; i < segment_names.size(); ++i) entries.push_back({segment_names[i], palette(i)});
  const double plot_width = kWidth - kLeft - kRight;
  const int rows = legend_rows(entries, kWidth - 16);
  const double top = 30 + rows * kLegendRow + 8;
  const double height = top + std::max<double>(1, static_cast<double>(bars.size())) * (kBar + kGap) + 8;
  double longest = 0;
  for (const StackedBar& b : bars) {
    double total = 0;
    for (const double v : b.values) total += positive(v);
    longest = std::max(longest, total);
  }
  std::string out = svg_begin(kWidth, height, title);
  int drawn_rows = 0;
  out += legend(entries, 8, 28, kWidth - 16, drawn_rows);
  if (bars.empty() || longest <= 0) {
    out += "<text class=\"empty\" x=\"" + format_number(kLeft) + "\" y=\"" +
           format_number(top + kBar / 2 + 4) + "\">no data yet</text>";
  }
  for (std::size_t b = 0; b < bars.size(); ++b) {
    const StackedBar& bar = bars[b];
    const double y = top + static_cast<double>(b) * (kBar + kGap);
    out += "<text text-anchor=\"end\" x=\"" + format_number(kLeft - 8) + "\" y=\"" +
           format_number(y + kBar / 2 + 4) + "\"" + (bar.highlight ? " class=\"strong\"" : "") + ">" +
           xml_escape(bar.label) + "</text>";
    double x = kLeft, total = 0;
    for (std::size_t s = 0; s < bar.values.size(); ++s) {
      const double v = positive(bar.values[s]);
      total += v;
      if (v <= 0 || longest <= 0) continue;
      const double w = v / longest * plot_width;
      const std::string name = s < segment_names.size() ? segment_names[s] : "";
      out += "<rect x=\"" + format_number(x, 2) + "\" y=\"" + format_number(y) + "\" width=\"" +
             format_number(w, 2) + "\" height=\"" + format_number(kBar) + "\" fill=\"" + palette(s) +
             "\"><title>" + xml_escape(bar.label) + ", " + xml_escape(name) + ": " +
             format_number(v, 3) + " " + xml_escape(unit) + "</title></rect>";
      x += w;
    }
    out += "<text class=\"tick\" x=\"" + format_number(x + 6) + "\" y=\"" +
           format_number(y + kBar / 2 + 4) + "\">" + format_number(total, 2) + " " +
           xml_escape(unit) + "</text>";
  }
  return out + "</svg>";
}

}  // namespace tandem::report
