// Escaping, number text, axes and the palette shared by the charts.
#include "tandem/report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tandem::report {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string format_number(double value, int decimals) {
  if (!std::isfinite(value)) return "0";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  std::string text = buffer;
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  if (text == "-0") text = "0";
  return text;
}

std::string Axis::label(double value) const {
  int decimals = 0;
  for (double s = step; decimals < 8 && std::fabs(s - std::round(s)) > 1e-9 * std::max(1.0, s);
       s *= 10) {
    ++decimals;
  }
  return format_number(value, decimals);
}

Axis nice_axis(double lo, double hi, int target_ticks, double min_step) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (lo > hi) std::swap(lo, hi);
  if (lo == hi) {
    const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = std::max((hi - lo) / std::max(1, target_ticks), min_step);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * power;
  for (const double m : {1.0, 2.0, 2.5, 5.0}) {
    if (min_step > 0 && std::fmod(m * power, min_step) > 1e-9) continue;  // 2.5 epochs
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  }
  Axis axis;
  axis.step = step;
  // The small tolerance keeps a bound that is already a multiple of the step where it is.
  axis.lo = std::floor(lo / step + 1e-9) * step;
  axis.hi = std::ceil(hi / step - 1e-9) * step;
  const auto count = static_cast<int>(std::llround((axis.hi - axis.lo) / step));
  for (int i = 0; i <= count; ++i) axis.ticks.push_back(axis.lo + step * i);
  return axis;
}

std::string svg_begin(double width, double height, const std::string& title) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 " +
         format_number(width) + " " + format_number(height) + "\" role=\"img\" aria-label=\"" +
         xml_escape(title) + "\"><text x=\"8\" y=\"18\" class=\"title\">" +
         xml_escape(title) + "</text>";
}

double text_width(std::string_view text, double font_size) {
  std::size_t glyphs = 0;
  for (const char c : text) glyphs += (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // UTF-8
  return 0.6 * font_size * static_cast<double>(glyphs);
}

namespace {

// Lays out the entries row by row; calls place(entry, x offset, row) for each.
template <typename Place>
int lay_out_legend(const std::vector<LegendEntry>& entries, double width, Place place) {
  if (entries.empty()) return 0;
  int row = 0;
  double at = 0;
  for (const LegendEntry& e : entries) {
    const double w = 20 + text_width(e.label, 14) + 12;  // room for the phone's larger font
    if (at > 0 && at + w > width) {
      ++row;
      at = 0;
    }
    place(e, at, row);
    at += w;
  }
  return row + 1;
}

}  // namespace

int legend_rows(const std::vector<LegendEntry>& entries, double width) {
  return lay_out_legend(entries, width, [](const LegendEntry&, double, int) {});
}

std::string legend(const std::vector<LegendEntry>& entries, double x, double y, double width,
                   int& rows) {
  std::string out;
  rows = lay_out_legend(entries, width, [&](const LegendEntry& e, double at, int row) {
    const double top = y + row * kLegendRow;
    out += "<rect x=\"" + format_number(x + at) + "\" y=\"" + format_number(top + 3) +
           "\" width=\"14\" height=\"10\" rx=\"2\" fill=\"" + xml_escape(e.colour) +
           "\" fill-opacity=\"" + format_number(e.opacity, 2) + "\"/><text x=\"" + format_number(x + at + 20) + "\" y=\"" + format_number(top + 12) +
           "\">" + xml_escape(e.label) + "</text>";
  });
  return out;
}

const char* palette(std::size_t index) {
  static constexpr const char* kColours[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                             "#56B4E9", "#D55E00", "#F0E442", "#000000"};
  return kColours[index % (sizeof kColours / sizeof kColours[0])];
}

}  // namespace tandem::report
