// Line charts: series over shared nice axes, long series averaged down, gaps at non-finite points.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tandem/report/charts.h"
#include "tandem/report/svg.h"

namespace tandem::report {
namespace {

constexpr double kWidth = 560;
constexpr double kPlotHeight = 190;
constexpr double kLeft = 58;
constexpr double kRight = 14;
constexpr double kBottom = 44;
constexpr std::size_t kFewPoints = 40;  // series this short get a dot per point

struct Point {
  double x, y;
};

// The finite points of a series, averaged in consecutive buckets down to kMaxLinePoints.
std::vector<Point> points_of(const Series& s) {
  std::vector<Point> all;
  const std::size_t n = std::min(s.x.size(), s.y.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) all.push_back({s.x[i], s.y[i]});
  }
  if (all.size() <= kMaxLinePoints) return all;
  std::vector<Point> out;
  for (std::size_t b = 0; b < kMaxLinePoints; ++b) {
    const std::size_t from = b * all.size() / kMaxLinePoints;
    const std::size_t to = (b + 1) * all.size() / kMaxLinePoints;
    Point sum{0, 0};
    for (std::size_t i = from; i < to; ++i) sum.x += all[i].x, sum.y += all[i].y;
    const auto count = static_cast<double>(to - from);
    out.push_back({sum.x / count, sum.y / count});
  }
  return out;
}

}  // namespace

std::string line_chart(const std::vector<Series>& series, const LineChartOptions& options) {
  std::vector<std::vector<Point>> points;
  std::vector<LegendEntry> entries;
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  double y_lo = x_lo, y_hi = -x_lo;
  for (std::size_t i = 0; i < series.size(); ++i) {
    points.push_back(points_of(series[i]));
    for (const Point& p : points.back()) {
      x_lo = std::min(x_lo, p.x), x_hi = std::max(x_hi, p.x);
      y_lo = std::min(y_lo, p.y), y_hi = std::max(y_hi, p.y);
    }
    const std::string colour = series[i].colour.empty() ? palette(i) : series[i].colour;
    if (!series[i].label.empty()) entries.push_back({series[i].label, colour, series[i].opacity});
  }
  const bool empty = !std::isfinite(x_lo);
  if (options.y_from_zero && y_lo > 0) y_lo = 0;
  const Axis x_axis = nice_axis(x_lo, x_hi, 6, options.x_integer ? 1 : 0);
  const Axis y_axis = nice_axis(y_lo, y_hi, 5);

  const double plot_width = kWidth - kLeft - kRight;
  const int rows = legend_rows(entries, plot_width);
  const double top = 30 + rows * kLegendRow + 6;
  const double height = top + kPlotHeight + kBottom;
  const auto px = [&](double x) {
    return kLeft + (x - x_axis.lo) / (x_axis.hi - x_axis.lo) * plot_width;
  };
  const auto py = [&](double y) {
    return top + kPlotHeight - (y - y_axis.lo) / (y_axis.hi - y_axis.lo) * kPlotHeight;
  };
  const auto y_text = [&](double y) {
    return options.y_percent ? format_number(100 * y, 1) + "%" : y_axis.label(y);
  };

  std::string out = svg_begin(kWidth, height, options.title);
  int drawn_rows = 0;
  out += legend(entries, kLeft, 28, plot_width, drawn_rows);
  // Grid and ticks.
  for (const double t : y_axis.ticks) {
    const std::string y = format_number(py(t));
    out += "<line class=\"grid\" x1=\"" + format_number(kLeft) + "\" x2=\"" +
           format_number(kWidth - kRight) + "\" y1=\"" + y + "\" y2=\"" + y + "\"/>";
    out += "<text class=\"tick\" text-anchor=\"end\" x=\"" + format_number(kLeft - 6) + "\" y=\"" +
           format_number(py(t) + 4) + "\">" + xml_escape(y_text(t)) + "</text>";
  }
  for (const double t : x_axis.ticks) {
    out += "<text class=\"tick\" text-anchor=\"middle\" x=\"" + format_number(px(t)) + "\" y=\"" +
           format_number(top + kPlotHeight + 16) + "\">" + xml_escape(x_axis.label(t)) + "</text>";
  }
  out += "<rect class=\"frame\" x=\"" + format_number(kLeft) + "\" y=\"" + format_number(top) +
         "\" width=\"" + format_number(plot_width) + "\" height=\"" + format_number(kPlotHeight) +
         "\"/>";
  out += "<text class=\"axis\" text-anchor=\"middle\" x=\"" + format_number(kLeft + plot_width / 2) +
         "\" y=\"" + format_number(height - 8) + "\">" + xml_escape(options.x_label) + "</text>";
  out += "<text class=\"axis\" text-anchor=\"middle\" transform=\"translate(14 " +
         format_number(top + kPlotHeight / 2) + ") rotate(-90)\">" + xml_escape(options.y_label) +
         "</text>";
  if (empty) {
    out += "<text class=\"empty\" text-anchor=\"middle\" x=\"" +
           format_number(kLeft + plot_width / 2) + "\" y=\"" +
           format_number(top + kPlotHeight / 2) + "\">no data yet</text>";
  }
  // The series, each a polyline broken where a point was left out.
  for (std::size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const std::string colour = xml_escape(s.colour.empty() ? palette(i) : s.colour);
    const std::string opacity = format_number(s.opacity, 2);
    std::string path;
    for (const Point& p : points[i]) {
      path += path.empty() ? 'M' : 'L';
      path += format_number(px(p.x));
      path += ' ';
      path += format_number(py(p.y));
    }
    if (points[i].size() > 1) {
      out += "<path class=\"series\" d=\"" + path + "\" stroke=\"" + colour + "\" stroke-opacity=\"" +
             opacity + "\"/>";
    }
    if (s.markers || points[i].size() <= kFewPoints) {
      for (const Point& p : points[i]) {
        out += "<circle cx=\"" + format_number(px(p.x)) + "\" cy=\"" + format_number(py(p.y)) +
               "\" r=\"3\" fill=\"" + colour + "\" fill-opacity=\"" + opacity + "\"><title>" +
               xml_escape(s.label) + ": " + xml_escape(x_axis.label(p.x)) + ", " +
               xml_escape(options.y_percent ? format_number(100 * p.y, 2) + "%"
                                            : format_number(p.y, 4)) +
               "</title></circle>";
      }
    }
  }
  return out + "</svg>";
}

}  // namespace tandem::report
