// Heat maps (the confusion matrix): cells shaded by their share of their row's largest count,
// counts written in the cells while they fit.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tandem/report/charts.h"
#include "tandem/report/svg.h"

namespace tandem::report {
namespace {

constexpr double kLeft = 84;
constexpr double kTop = 70;
constexpr double kGrid = 400;  // the matrix's side
constexpr std::size_t kMaxNumbered = 20;  // larger matrices are shaded without numbers

// White to the palette's blue, as "#rrggbb".
std::string shade(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const auto mix = [t](int to) { return static_cast<int>(std::lround(255 + (to - 255) * t)); };
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "#%02x%02x%02x", mix(0x00), mix(0x72), mix(0xB2));
  return buffer;
}

}  // namespace

std::string heat_map(const std::vector<std::vector<std::int64_t>>& counts,
                     const std::vector<std::string>& labels, const std::string& title,
                     const std::string& row_title, const std::string& column_title) {
  const std::size_t n = counts.size();
  const double cell = n ? kGrid / static_cast<double>(n) : kGrid;
  const double width = kLeft + kGrid + 16;
  const double height = kTop + kGrid + 16;
  const auto label = [&](std::size_t i) {
    return xml_escape(i < labels.size() ? labels[i] : std::to_string(i));
  };
  std::string out = svg_begin(width, height, title);
  out += "<text class=\"axis\" text-anchor=\"middle\" x=\"" + format_number(kLeft + kGrid / 2) +
         "\" y=\"" + format_number(kTop - 30) + "\">" + xml_escape(column_title) + "</text>";
  out += "<text class=\"axis\" text-anchor=\"middle\" transform=\"translate(16 " +
         format_number(kTop + kGrid / 2) + ") rotate(-90)\">" + xml_escape(row_title) + "</text>";
  if (n == 0) {
    out += "<text class=\"empty\" text-anchor=\"middle\" x=\"" + format_number(kLeft + kGrid / 2) +
           "\" y=\"" + format_number(kTop + kGrid / 2) + "\">no evaluation yet</text>";
  }
  const bool numbered = n <= kMaxNumbered;
  const double font = std::min(12.0, cell * 0.38);
  for (std::size_t r = 0; r < n; ++r) {
    const double y = kTop + static_cast<double>(r) * cell;
    if (numbered) {
      out += "<text class=\"tick\" text-anchor=\"end\" x=\"" + format_number(kLeft - 6) + "\" y=\"" +
             format_number(y + cell / 2 + 4) + "\">" + label(r) + "</text>";
      out += "<text class=\"tick\" text-anchor=\"middle\" x=\"" +
             format_number(kLeft + (static_cast<double>(r) + 0.5) * cell) + "\" y=\"" +
             format_number(kTop - 8) + "\">" + label(r) + "</text>";
    }
    std::int64_t row_max = 0;
    for (const std::int64_t v : counts[r]) row_max = std::max(row_max, v);
    for (std::size_t c = 0; c < counts[r].size() && c < n; ++c) {
      const std::int64_t v = counts[r][c];
      const double t = row_max > 0 ? static_cast<double>(v) / static_cast<double>(row_max) : 0;
      const double x = kLeft + static_cast<double>(c) * cell;
      out += "<rect class=\"cell\" x=\"" + format_number(x, 2) + "\" y=\"" + format_number(y, 2) +
             "\" width=\"" + format_number(cell, 2) + "\" height=\"" + format_number(cell, 2) +
             "\" fill=\"" + shade(t) + "\"><title>" + xml_escape(row_title) + " " + label(r) + ", " +
             xml_escape(column_title) + " " + label(c) + ": " + std::to_string(v) + "</title></rect>";
      if (numbered) {
        out += "<text text-anchor=\"middle\" x=\"" + format_number(x + cell / 2) + "\" y=\"" +
               format_number(y + cell / 2 + font / 3) + "\" font-size=\"" + format_number(font) +
               "\" fill=\"" + (t > 0.55 ? "#fff" : "#222") + "\">" + std::to_string(v) + "</text>";
      }
    }
  }
  return out + "</svg>";
}

}  // namespace tandem::report
