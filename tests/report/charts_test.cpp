// The SVG builders: escaping, axes that span the data, pie arcs that add up to the whole (in the
// geometry and in the drawn paths), stacked bars on one scale, heat maps, and empty, one-point
// and non-finite inputs that still give a whole chart.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <regex>
#include <string>
#include <vector>

#include "tandem/report/charts.h"
#include "tandem/report/svg.h"

namespace tandem::report {
namespace {

constexpr const char* kHostile = "<script>alert('x')</script> & \"co\"";
constexpr const char* kEscaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;co&quot;";

// A chart is one whole <svg> element with nothing unescaped or non-numeric in it.
void expect_whole_chart(const std::string& svg) {
  EXPECT_TRUE(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"")) << svg.substr(0, 80);
  EXPECT_TRUE(svg.ends_with("</svg>"));
  EXPECT_NE(svg.find("viewBox=\"0 0 "), std::string::npos);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  for (const char* bad : {"nan", "inf", "NaN"}) EXPECT_EQ(svg.find(bad), std::string::npos) << bad;
}

std::vector<double> attribute_values(const std::string& svg, const std::string& element,
                                     const std::string& attribute) {
  std::vector<double> values;
  const std::regex pattern("<" + element + "[^>]*? " + attribute + "=\"([-0-9.]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), pattern); it != std::sregex_iterator(); ++it) {
    values.push_back(std::stod((*it)[1]));
  }
  return values;
}

TEST(Svg, EscapesEveryMarkupCharacter) {
  EXPECT_EQ(xml_escape(kHostile), kEscaped);
  EXPECT_EQ(xml_escape("plain cpu:0"), "plain cpu:0");
  EXPECT_EQ(xml_escape("μ-batch ✓"), "μ-batch ✓");  // UTF-8 passes through
}

TEST(Svg, NumbersAreCompact) {
  EXPECT_EQ(format_number(12.50), "12.5");
  EXPECT_EQ(format_number(3.0), "3");
  EXPECT_EQ(format_number(-0.01), "0");
  EXPECT_EQ(format_number(0.123456, 3), "0.123");
  EXPECT_EQ(format_number(std::numeric_limits<double>::quiet_NaN()), "0");
}

TEST(Svg, AxesSpanTheData) {
  const std::vector<std::pair<double, double>> ranges = {
      {0.0123, 0.987}, {-5, 17}, {1e6, 1.0003e6}, {3, 3}, {0, 0}, {-1e-9, 1e-9}, {2.3, 0.4},
      {0, 1}, {1, 938}};
  for (const auto& [lo, hi] : ranges) {
    SCOPED_TRACE(std::to_string(lo) + ".." + std::to_string(hi));
    const Axis axis = nice_axis(lo, hi);
    EXPECT_LE(axis.lo, std::min(lo, hi));
    EXPECT_GE(axis.hi, std::max(lo, hi));
    EXPECT_LT(axis.lo, axis.hi);
    ASSERT_GE(axis.ticks.size(), 2u);
    EXPECT_LE(axis.ticks.size(), 12u);
    EXPECT_DOUBLE_EQ(axis.ticks.front(), axis.lo);
    EXPECT_NEAR(axis.ticks.back(), axis.hi, 1e-9 * std::max(1.0, std::fabs(axis.hi)));
  }
  const Axis round = nice_axis(0, 1);
  EXPECT_EQ(round.lo, 0);
  EXPECT_EQ(round.hi, 1);
  EXPECT_EQ(round.label(0.4), "0.4");
  // Counts (epochs) get whole-number ticks, also where 2.5 would be the nice step.
  for (const double hi : {1.0, 2.0, 5.0, 14.0, 30.0, 1000.0}) {
    for (const double t : nice_axis(1, hi, 6, 1).ticks) EXPECT_EQ(t, std::round(t)) << hi;
  }
  const Axis bad = nice_axis(std::numeric_limits<double>::quiet_NaN(), 1);
  EXPECT_EQ(bad.lo, 0);
  EXPECT_EQ(bad.hi, 1);
}

TEST(LineChart, EveryPointLiesInsideThePlotFrame) {
  Series a{.label = "loss", .x = {1, 2, 3, 4}, .y = {2.31, 1.2, 0.75, 0.31}};
  Series b{.label = "test", .x = {2, 4}, .y = {1.9, 0.28}};
  const std::string svg = line_chart({a, b}, {.title = "Loss", .x_label = "step", .y_label = "loss"});
  expect_whole_chart(svg);
  const double x = attribute_values(svg, "rect class=\"frame\"", "x").at(0);
  const double y = attribute_values(svg, "rect class=\"frame\"", "y").at(0);
  const double w = attribute_values(svg, "rect class=\"frame\"", "width").at(0);
  const double h = attribute_values(svg, "rect class=\"frame\"", "height").at(0);
  const std::vector<double> cx = attribute_values(svg, "circle", "cx");
  const std::vector<double> cy = attribute_values(svg, "circle", "cy");
  ASSERT_EQ(cx.size(), 6u);  // short series: a dot per point
  for (std::size_t i = 0; i < cx.size(); ++i) {
    EXPECT_GE(cx[i], x - 0.05);
    EXPECT_LE(cx[i], x + w + 0.05);
    EXPECT_GE(cy[i], y - 0.05);
    EXPECT_LE(cy[i], y + h + 0.05);
  }
  // The extreme x values sit on the frame's edges when they are round numbers.
  EXPECT_NEAR(*std::min_element(cx.begin(), cx.end()), x, 0.05);
  EXPECT_NEAR(*std::max_element(cx.begin(), cx.end()), x + w, 0.05);
}

TEST(LineChart, EmptySinglePointAndNonFiniteSeries) {
  const std::string empty = line_chart({}, {.title = "Nothing"});
  expect_whole_chart(empty);
  EXPECT_NE(empty.find("no data yet"), std::string::npos);
  const std::string no_points = line_chart({Series{.label = "loss"}}, {.title = "Loss"});
  expect_whole_chart(no_points);
  EXPECT_NE(no_points.find("no data yet"), std::string::npos);

  const std::string one = line_chart({Series{.label = "acc", .x = {1}, .y = {0.5}}},
                                     {.title = "Accuracy", .y_percent = true});
  expect_whole_chart(one);
  EXPECT_EQ(one.find("no data yet"), std::string::npos);
  EXPECT_EQ(attribute_values(one, "circle", "cx").size(), 1u);
  EXPECT_EQ(one.find("<path class=\"series\""), std::string::npos);  // no line through one point
  EXPECT_NE(one.find("50%"), std::string::npos);

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::string gaps = line_chart({Series{.label = "s", .x = {1, 2, 3, 4}, .y = {1, nan, inf, 2}}},
                                      {.title = "Gaps"});
  expect_whole_chart(gaps);
  EXPECT_EQ(attribute_values(gaps, "circle", "cx").size(), 2u);
}

TEST(LineChart, LongSeriesAreAveragedDown) {
  Series s{.label = "loss"};
  for (int i = 0; i < 10000; ++i) {
    s.x.push_back(i);
    s.y.push_back(1.0 / (1 + i));
  }
  const std::string svg = line_chart({s}, {.title = "Long"});
  expect_whole_chart(svg);
  const std::size_t points = static_cast<std::size_t>(std::count(svg.begin(), svg.end(), 'L')) + 1;
  EXPECT_LE(points, kMaxLinePoints + 10);  // + the few 'L's of the text
  EXPECT_EQ(svg.find("<circle"), std::string::npos);
}

TEST(Pie, ArcsAddUpToTheWhole) {
  const std::vector<Slice> slices = {{"cpu:0", 3}, {"cpu:1", 1}, {"cpu:2", 0}, {"cpu:3", 4.5}};
  const std::vector<Arc> arcs = pie_arcs(slices);
  ASSERT_EQ(arcs.size(), 4u);
  EXPECT_EQ(arcs.front().start, 0.0);
  EXPECT_EQ(arcs.back().end, 1.0);
  double sum = 0;
  for (std::size_t i = 0; i < arcs.size(); ++i) {
    if (i > 0) {
      EXPECT_EQ(arcs[i].start, arcs[i - 1].end);
    }
    EXPECT_NEAR(arcs[i].end - arcs[i].start, slices[i].value / 8.5, 1e-12);
    sum += arcs[i].end - arcs[i].start;
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

// The drawn slices: each path's arc, from its start point to its end point around the centre
// (the large-arc flag says which way round), adds up to a full turn.
TEST(Pie, DrawnSlicesCoverTheCircleOnce) {
  const std::vector<Slice> slices = {{"a", 5}, {"b", 1}, {"c", 2}, {"d", 0}};
  const std::string svg = pie_chart(slices, "Shares");
  expect_whole_chart(svg);
  const std::regex path("<path class=\"slice\" d=\"M([-0-9.]+) ([-0-9.]+)L([-0-9.]+) ([-0-9.]+)A[-0-9.]+ [-0-9.]+ 0 ([01]) 1 ([-0-9.]+) ([-0-9.]+)Z\"");
  double turn = 0;
  int count = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), path); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    const double cx = std::stod(m[1]), cy = std::stod(m[2]);
    const double a0 = std::atan2(std::stod(m[3]) - cx, cy - std::stod(m[4]));  // clockwise from 12
    const double a1 = std::atan2(std::stod(m[6]) - cx, cy - std::stod(m[7]));
    double sweep = std::fmod(a1 - a0 + 4 * std::numbers::pi, 2 * std::numbers::pi);
    EXPECT_EQ(m[5] == "1", sweep > std::numbers::pi) << m[0];
    turn += sweep;
    ++count;
  }
  EXPECT_EQ(count, 3);  // the empty slice draws nothing
  EXPECT_NEAR(turn, 2 * std::numbers::pi, 0.01);
  EXPECT_NE(svg.find("62.5%"), std::string::npos);
  EXPECT_NE(svg.find(">0%</tspan> d<"), std::string::npos);
}

TEST(Pie, OneSliceIsAFullCircleAndNoneSaysSo) {
  const std::string one = pie_chart({{"cpu", 64}}, "Work");
  expect_whole_chart(one);
  EXPECT_NE(one.find("<circle class=\"slice\""), std::string::npos);
  EXPECT_NE(one.find("100%"), std::string::npos);
  const std::vector<Arc> arcs = pie_arcs({{"a", 0}, {"b", -3}, {"c", std::numeric_limits<double>::quiet_NaN()}});
  for (const Arc& a : arcs) EXPECT_EQ(a.end - a.start, 0.0);
  const std::string none = pie_chart({{"a", 0}, {"b", 0}}, "Work");
  expect_whole_chart(none);
  EXPECT_NE(none.find("no data yet"), std::string::npos);
  expect_whole_chart(pie_chart({}, "Nothing"));
}

TEST(StackedBars, SegmentsShareOneScale) {
  const std::vector<StackedBar> bars = {{"cpu:0", {1, 2, 1}}, {"cpu:1", {0.5, 0.5, 1}, true}};
  const std::string svg = stacked_bars(bars, {"forward", "backward", "wait"}, "Time", "s");
  expect_whole_chart(svg);
  const std::vector<double> widths = attribute_values(svg, "rect x=\"[-0-9.]+\" y=\"[-0-9.]+\"", "width");
  // 3 legend swatches (width 14), then the bars' segments.
  ASSERT_EQ(widths.size(), 3u + 6u);
  const double longest = widths[3] + widths[4] + widths[5];
  const double other = widths[6] + widths[7] + widths[8];
  EXPECT_NEAR(other / longest, 0.5, 1e-3);
  EXPECT_NE(svg.find("class=\"strong\">cpu:1<"), std::string::npos);
  EXPECT_NE(svg.find("4 s"), std::string::npos);  // cpu:0's total
  expect_whole_chart(stacked_bars({}, {"forward"}, "Time", "s"));
  EXPECT_NE(stacked_bars({}, {"forward"}, "Time", "s").find("no data yet"), std::string::npos);
}

TEST(HeatMap, OneCellPerPairShadedByRow) {
  const std::string svg = heat_map({{8, 2, 0}, {1, 5, 4}, {0, 0, 0}}, {"cat", "dog", "eel"}, "Confusion",
                                   "target", "predicted");
  expect_whole_chart(svg);
  EXPECT_EQ(attribute_values(svg, "rect class=\"cell\"", "x").size(), 9u);
  EXPECT_NE(svg.find("fill=\"#0072b2\""), std::string::npos);  // each row's largest cell
  EXPECT_NE(svg.find(">dog</text>"), std::string::npos);
  const std::string empty = heat_map({}, {}, "Confusion", "target", "predicted");
  expect_whole_chart(empty);
  EXPECT_NE(empty.find("no evaluation yet"), std::string::npos);
}

TEST(Charts, OddLabelsAreEscapedEverywhere) {
  const std::vector<std::string> charts = {
      line_chart({Series{.label = kHostile, .x = {1, 2}, .y = {1, 2}}},
                 {.title = kHostile, .x_label = kHostile, .y_label = kHostile}),
      pie_chart({{kHostile, 1, kHostile}, {"b", 2}}, kHostile),
      stacked_bars({{kHostile, {1, 2}}}, {kHostile, "b"}, kHostile, kHostile),
      heat_map({{1, 2}, {3, 4}}, {kHostile, "b"}, kHostile, kHostile, kHostile),
  };
  for (const std::string& svg : charts) {
    expect_whole_chart(svg);
    EXPECT_NE(svg.find(kEscaped), std::string::npos);
    EXPECT_EQ(svg.find("alert('x')"), std::string::npos);
    EXPECT_EQ(svg.find("\"co\""), std::string::npos);
  }
}

}  // namespace
}  // namespace tandem::report
