// The small vocabulary every chart shares: XML escaping, compact number text, "nice" axis ranges
// and ticks, and the colour palette. Not a chart (charts.h) and not a general XML writer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::report {

// `text` with & < > " ' replaced by entities: safe as element text and as an attribute value.
std::string xml_escape(std::string_view text);

// A coordinate or figure with at most `decimals` decimals, trailing zeros dropped ("12.5", "3").
std::string format_number(double value, int decimals = 1);

// A value range rounded out to steps of 1, 2, 2.5 or 5 times a power of ten, and its ticks.
struct Axis {
  double lo = 0;
  double hi = 1;
  double step = 0.2;
  std::vector<double> ticks;  // lo, lo + step, ..., hi
  // The tick's label, with as many decimals as the step needs.
  std::string label(double value) const;
};

// The axis spanning [lo, hi] with about `target_ticks` intervals: lo >= axis.lo, hi <= axis.hi.
// A single value (lo == hi) gets a range around it; non-finite bounds give [0, 1]. `min_step`
// keeps ticks apart (1 for counts such as epochs).
Axis nice_axis(double lo, double hi, int target_ticks = 5, double min_step = 0);

// "<svg ... viewBox="0 0 W H">" with the chart's title as its accessible name and as a heading
// line at the top; the caller appends the body and "</svg>".
std::string svg_begin(double width, double height, const std::string& title);

// A legend laid out in rows of at most `width` units from (x, y): a colour swatch and a label per
// entry. `rows` tells how many rows it took (each kLegendRow high).
struct LegendEntry {
  std::string label;
  std::string colour;
  double opacity = 1.0;
};
inline constexpr double kLegendRow = 18;
std::string legend(const std::vector<LegendEntry>& entries, double x, double y, double width,
                   int& rows);
// The rows legend() will need, for sizing the chart before drawing it.
int legend_rows(const std::vector<LegendEntry>& entries, double width);

// A text's width in viewBox units at the charts' 12-unit font (an estimate: no font metrics).
double text_width(std::string_view text, double font_size = 12);

// Colour `index` of an 8-colour palette that stays distinguishable for colour-blind readers
// (Okabe and Ito), cycling.
const char* palette(std::size_t index);

}  // namespace tandem::report
