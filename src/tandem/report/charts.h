// The report's charts, each a self-contained <svg> element with a viewBox (it scales to the width
// of its container): line chart, pie, horizontal stacked bars, heat map. Every label is escaped;
// empty and one-point inputs give a readable chart. Not the page around them (html.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::report {

// ---- line chart ----

struct Series {
  std::string label;
  std::vector<double> x, y;  // same length; non-finite points are left out (the line breaks)
  std::string colour;        // empty: the palette's colour for the series' index
  bool markers = false;      // a dot per point (always drawn for a series of few points)
  double opacity = 1.0;      // < 1 for raw data under its smoothed line
};

struct LineChartOptions {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool y_percent = false;    // y values are fractions, ticks read 0%..100%
  bool y_from_zero = false;  // the y axis starts at 0 whatever the data
  bool x_integer = false;    // x values are counts (epochs): ticks at whole numbers only
};

std::string line_chart(const std::vector<Series>& series, const LineChartOptions& options);

// Longer series are averaged into at most this many points before drawing.
inline constexpr std::size_t kMaxLinePoints = 600;

// ---- pie ----

struct Slice {
  std::string label;
  double value = 0;      // negative and non-finite values count as 0
  std::string detail;    // shown after the percentage in the legend ("1,024 samples")
};

// Each slice's part of the turn, as fractions in [0, 1]: arc i runs from start to end, arc 0
// starts at 0, each starts where the previous ends, and the last ends at exactly 1 (all empty
// when every value is 0).
struct Arc {
  double start = 0;
  double end = 0;
};
std::vector<Arc> pie_arcs(const std::vector<Slice>& slices);

std::string pie_chart(const std::vector<Slice>& slices, const std::string& title);

// ---- stacked bars ----

struct StackedBar {
  std::string label;
  std::vector<double> values;  // one per segment name, in that order
  bool highlight = false;      // drawn with a bold label (the slowest device)
};

// Horizontal bars on one scale, one per entry, each cut into coloured segments; `unit` follows
// the totals ("s").
std::string stacked_bars(const std::vector<StackedBar>& bars,
                         const std::vector<std::string>& segment_names, const std::string& title,
                         const std::string& unit);

// ---- heat map ----

// counts: (L, L) [row][column]; each row is shaded against its own largest cell. Labels name
// the rows and columns (0..L-1 when empty).
std::string heat_map(const std::vector<std::vector<std::int64_t>>& counts,
                     const std::vector<std::string>& labels, const std::string& title,
                     const std::string& row_title, const std::string& column_title);

}  // namespace tandem::report
