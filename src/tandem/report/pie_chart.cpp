// Pie charts: slices as arc paths (a lone slice as a full circle, which an arc cannot draw) and a
// legend of label, percentage and detail beside the pie.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "tandem/report/charts.h"
#include "tandem/report/svg.h"

namespace tandem::report {
namespace {

constexpr double kWidth = 420;
constexpr double kRadius = 80;
constexpr double kCx = 96;
constexpr double kCy = 112;

double value_of(const Slice& s) { return std::isfinite(s.value) && s.value > 0 ? s.value : 0; }

}  // namespace

std::vector<Arc> pie_arcs(const std::vector<Slice>& slices) {
  double total = 0;
  for (const Slice& s : slices) total += value_of(s);
  std::vector<Arc> arcs(slices.size());
  if (total <= 0) return arcs;
  double running = 0;
  for (std::size_t i = 0; i < slices.size(); ++i) {
    arcs[i].start = running / total;
    running += value_of(slices[i]);
    arcs[i].end = running / total;
  }
  arcs.back().end = 1.0;  // no rounding gap at the top
  return arcs;
}

std::string pie_chart(const std::vector<Slice>& slices, const std::string& title) {
  const std::vector<Arc> arcs = pie_arcs(slices);
  const double height = std::max(kCy + kRadius + 12, 40 + 34.0 * static_cast<double>(slices.size()));
  std::string out = svg_begin(kWidth, height, title);
  const bool empty = std::all_of(arcs.begin(), arcs.end(), [](const Arc& a) { return a.end <= a.start; });
  if (empty) {
    out += "<circle cx=\"" + format_number(kCx) + "\" cy=\"" + format_number(kCy) + "\" r=\"" +
           format_number(kRadius) + "\" class=\"none\"/><text class=\"empty\" text-anchor=\"middle\" x=\"" +
           format_number(kCx) + "\" y=\"" + format_number(kCy + 4) + "\">no data yet</text>";
  }
  // Angles run clockwise from 12 o'clock.
  const auto at = [](double fraction, double radius) {
    const double angle = 2 * std::numbers::pi * fraction;
    return format_number(kCx + radius * std::sin(angle)) + " " +
           format_number(kCy - radius * std::cos(angle));
  };
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const Arc& a = arcs[i];
    const double fraction = a.end - a.start;
    const std::string colour = palette(i);
    const std::string tip = "<title>" + xml_escape(slices[i].label) + ": " +
                            format_number(100 * fraction, 1) + "%</title>";
    if (fraction <= 0) continue;
    if (fraction >= 1 - 1e-12) {
      out += "<circle class=\"slice\" cx=\"" + format_number(kCx) + "\" cy=\"" + format_number(kCy) +
             "\" r=\"" + format_number(kRadius) + "\" fill=\"" + colour + "\">" + tip + "</circle>";
      continue;
    }
    out += "<path class=\"slice\" d=\"M" + format_number(kCx) + " " + format_number(kCy) + "L" +
           at(a.start, kRadius) + "A" + format_number(kRadius) + " " + format_number(kRadius) +
           " 0 " + (fraction > 0.5 ? "1" : "0") + " 1 " + at(a.end, kRadius) + "Z\" fill=\"" +
           colour + "\">" + tip + "</path>";
  }
  // Legend: one line per slice, percentage in bold.
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const double y = 44 + 34.0 * static_cast<double>(i);
    const double fraction = arcs[i].end - arcs[i].start;
    out += "<rect x=\"200\" y=\"" + format_number(y - 11) + "\" width=\"14\" height=\"14\" rx=\"2\" fill=\"" +
           palette(i) + "\"/><text x=\"222\" y=\"" + format_number(y) + "\"><tspan class=\"strong\">" +
           format_number(100 * fraction, 1) + "%</tspan> " + xml_escape(slices[i].label) +
           "</text><text class=\"tick\" x=\"222\" y=\"" + format_number(y + 15) + "\">" +
           xml_escape(slices[i].detail) + "</text>";
  }
  return out + "</svg>";
}

}  // namespace tandem::report
