// Page assembly: summary, training curves and the confusion matrix, devices' shares.
#include "tandem/report/html.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "tandem/report/charts.h"
#include "tandem/report/share.h"
#include "tandem/report/svg.h"

namespace tandem::report {
namespace {

constexpr const char* kStyle = R"css(
:root{font-family:"DejaVu Sans",system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222}
body{margin:0 auto;max-width:1180px;padding:16px;background:#f7f7f7;line-height:1.4}
h1{font-size:1.45rem;margin:0 0 4px}h1 span{color:#666;font-weight:400;overflow-wrap:anywhere}
h2{font-size:1.15rem;margin:26px 0 10px;padding-bottom:4px;border-bottom:1px solid #ddd}
.status{margin:4px 0 0}.status.stopped{color:#a34100}
.summary{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:8px;margin:0}
.summary div{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:8px 10px}
.summary dt{font-size:.8rem;color:#666}.summary dd{margin:0;font-weight:600;overflow-wrap:anywhere}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,440px),1fr));gap:12px}
figure{margin:0;background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:6px;min-width:0}
figure.heat{max-width:460px}
.pair{display:flex;flex-wrap:wrap;gap:12px;margin-top:12px;align-items:flex-start}
.pair>figure{flex:1 1 380px;max-width:700px}.pair>.table-wrap{flex:0 1 auto}
svg.chart{width:100%;height:auto;display:block;font-size:12px;font-family:inherit}
svg .title{font-size:14px;font-weight:600}svg .tick{fill:#555;font-size:11px}svg .axis{fill:#333}
svg .grid{stroke:#eee}svg .frame{fill:none;stroke:#bbb}svg .empty{fill:#888;font-style:italic}
svg .series{fill:none;stroke-width:2;stroke-linejoin:round}svg .none{fill:#eee}
svg .strong{font-weight:700}svg .cell{stroke:#fff;stroke-width:.5}
.table-wrap{overflow-x:auto;min-width:0}
table{border-collapse:collapse;background:#fff;font-variant-numeric:tabular-nums;font-size:.9rem}
th,td{padding:4px 6px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}tr:last-child td{font-weight:600}
footer{margin-top:28px;font-size:.8rem;color:#666}
@media (max-width:600px){body{padding:8px}h1{font-size:1.2rem}
svg.chart{font-size:14px}svg .tick{font-size:13px}svg .title{font-size:16px}}
)css";

std::string utc_text(double unix_seconds) {
  if (unix_seconds <= 0) return "unknown";
  const auto t = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return buffer;
}

std::string item(const std::string& name, const std::string& value) {
  return "<div><dt>" + xml_escape(name) + "</dt><dd>" + xml_escape(value) + "</dd></div>";
}

std::string figure(const std::string& svg, const char* css_class = nullptr) {
  return std::string("<figure") + (css_class ? std::string(" class=\"") + css_class + "\"" : "") +
         ">" + svg + "</figure>";
}

std::string status_paragraph(const RunData& run) {
  const RunStart* start = run.latest_start();
  const std::int64_t step = run.steps.empty() ? 0 : run.steps.back().step;
  if (start == nullptr) {
    return "<p class=\"status stopped\">This metrics.jsonl has no run line (an older tandem wrote "
           "it): the summary is partial.</p>";
  }
  const bool finished = start->total_steps > 0 && step >= start->total_steps &&
                        !run.epochs.empty() && run.epochs.back().step == step;
  if (finished) {
    return "<p class=\"status\">Finished: " + format_count(step) + " steps in " +
           std::to_string(run.starts.size()) + (run.starts.size() == 1 ? " session" : " sessions") +
           ", started " + utc_text(run.starts.front().time) + ".</p>";
  }
  return "<p class=\"status stopped\">Stopped at step " + format_count(step) + " of " +
         format_count(start->total_steps) +
         ": the run crashed, was interrupted, or is still running. Started " +
         utc_text(run.starts.front().time) + ".</p>";
}

std::string summary(const RunData& run) {
  const RunStart* s = run.latest_start();
  const EpochRecord* evaluated = run.last_evaluated();
  const double train_seconds = run.training_seconds();
  std::string out = "<dl class=\"summary\">";
  if (s != nullptr) {
    out += item("Model", s->model);
    out += item("Parameters", format_count(s->parameters));
    out += item("Data", s->data);
    out += item("Samples", format_count(s->train_samples) + " train, " +
                               format_count(s->test_samples) + " test; " + s->input + ", " +
                               std::to_string(s->classes) + " classes");
    std::string devices = s->layout + " (" + std::to_string(s->device_count) +
                          (s->device_count == 1 ? " device)" : " devices)");
    if (s->ranks > 1) devices += " in each of " + std::to_string(s->ranks) + " processes";
    out += item("Devices", devices);
    out += item("Global batch", format_count(s->batch_size));
    out += item("Optimizer", s->optimizer + ", lr " + format_number(s->lr, 6) + ", schedule " +
                                 s->schedule);
    out += item("Steps", format_count(run.steps.empty() ? 0 : run.steps.back().step) + " of " +
                             format_count(s->total_steps) + " (" + std::to_string(s->epochs) +
                             " epochs of " + format_count(s->steps_per_epoch) + ")");
  }
  out += item("Time", format_seconds(run.wall_seconds) + " (training " +
                          format_seconds(train_seconds) + ")");
  if (!run.epochs.empty()) {
    out += item("Final train loss", format_fixed(run.epochs.back().loss, 4));
  } else if (!run.steps.empty()) {
    out += item("Last step's loss", format_fixed(run.steps.back().loss, 4));
  }
  if (!run.epochs.empty() && run.epochs.back().train_accuracy) {
    out += item("Train accuracy", format_percent(*run.epochs.back().train_accuracy, 2));
  }
  out += item("Test accuracy", evaluated ? format_percent(*evaluated->test_accuracy, 2) + " (epoch " +
                                               std::to_string(evaluated->epoch) + ")"
                                         : "not evaluated yet");
  out += item("Images/s", train_seconds > 0 ? format_fixed(static_cast<double>(run.samples()) /
                                                               train_seconds, 0)
                                            : "-");
  return out + "</dl>";
}

std::string training_charts(const RunData& run) {
  Series step_loss{.label = "loss per step", .opacity = 0.3};
  Series lr{.label = "learning rate"};
  Series rate{.label = "images/s per step", .opacity = 0.3};
  double elapsed = 0;
  for (const StepRecord& s : run.steps) {
    const auto x = static_cast<double>(s.step);
    step_loss.x.push_back(x);
    step_loss.y.push_back(s.loss);
    lr.x.push_back(x);
    lr.y.push_back(s.lr);
    elapsed += s.seconds;
    rate.x.push_back(elapsed);
    rate.y.push_back(s.images_per_s);
  }
  const Series smooth_loss{.label = "smoothed", .x = step_loss.x, .y = smooth(step_loss.y, 0.8),
                           .colour = palette(0)};
  step_loss.colour = palette(0);
  const Series smooth_rate{.label = "smoothed", .x = rate.x, .y = smooth(rate.y, 0.8),
                           .colour = palette(2)};
  rate.colour = palette(2);

  Series train_loss{.label = "train"}, test_loss{.label = "test"};
  Series train_accuracy{.label = "train"}, test_accuracy{.label = "test"};
  for (const EpochRecord& e : run.epochs) {
    const auto x = static_cast<double>(e.epoch);
    train_loss.x.push_back(x);
    train_loss.y.push_back(e.loss);
    if (e.test_loss) test_loss.x.push_back(x), test_loss.y.push_back(*e.test_loss);
    if (e.train_accuracy) train_accuracy.x.push_back(x), train_accuracy.y.push_back(*e.train_accuracy);
    if (e.test_accuracy) test_accuracy.x.push_back(x), test_accuracy.y.push_back(*e.test_accuracy);
  }
  std::string out = "<div class=\"charts\">";
  out += figure(line_chart({step_loss, smooth_loss},
                           {.title = "Training loss per step", .x_label = "step", .y_label = "loss"}));
  out += figure(line_chart({train_loss, test_loss},
                           {.title = "Loss per epoch", .x_label = "epoch", .y_label = "mean loss",
                            .y_from_zero = true, .x_integer = true}));
  out += figure(line_chart({train_accuracy, test_accuracy},
                           {.title = "Accuracy per epoch", .x_label = "epoch", .y_label = "accuracy",
                            .y_percent = true, .x_integer = true}));
  out += figure(line_chart({lr}, {.title = "Learning rate", .x_label = "step", .y_label = "lr",
                                  .y_from_zero = true}));
  out += figure(line_chart({rate, smooth_rate}, {.title = "Throughput over time",
                                                 .x_label = "training time (s)",
                                                 .y_label = "images/s", .y_from_zero = true}));
  if (run.confusion.empty()) {
    out += "<figure><p>No evaluation yet: the confusion matrix comes with the first.</p></figure>";
  } else {
    out += figure(heat_map(run.confusion, {},
                           "Confusion matrix of the last evaluation (epoch " +
                               std::to_string(run.confusion_epoch) + ")",
                           "target", "predicted"),
                  "heat");
  }
  return out + "</div>";
}

// The GPUs' own figures (NVML), beside tandem's shares: how busy each GPU's kernels and memory
// were over the run, and the most memory it held. Nothing for a run without "gpu" lines.
std::string gpu_usage_figure(const RunData& run) {
  if (run.gpu.empty()) return "";
  std::vector<std::string> names;
  std::vector<Series> series;
  std::vector<double> peak;
  double total = 0;
  const double start = run.gpu.front().time;
  for (const GpuRecord& g : run.gpu) {
    auto it = std::find(names.begin(), names.end(), g.device);
    const auto i = static_cast<std::size_t>(it - names.begin());
    if (it == names.end()) {
      names.push_back(g.device);
      series.push_back(Series{.label = g.device + " kernels busy", .colour = palette(2 * i)});
      series.push_back(Series{.label = g.device + " memory busy", .colour = palette(2 * i + 1)});
      peak.push_back(0);
    }
    series[2 * i].x.push_back(g.time - start);
    series[2 * i].y.push_back(g.gpu_percent / 100);
    series[2 * i + 1].x.push_back(g.time - start);
    series[2 * i + 1].y.push_back(g.memory_percent / 100);
    peak[i] = std::max(peak[i], g.memory_used);
    total = std::max(total, g.memory_total);
  }
  std::string note = "<p>GPU memory at peak (NVML, every process): ";
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    note += (i ? ", " : "") + xml_escape(names[i]) + " " + format_fixed(peak[i] / kGiB, 1) +
            " of " + format_fixed(total / kGiB, 1) + " GiB";
  }
  return figure(line_chart(series, {.title = "GPU usage (NVML readings)",
                                    .x_label = "time since the first reading (s)",
                                    .y_label = "busy",
                                    .y_percent = true,
                                    .y_from_zero = true})) +
         note + ".</p>";
}

std::string device_section(const RunData& run) {
  std::vector<Slice> samples, busy;
  std::vector<StackedBar> bars;
  const std::optional<std::size_t> slowest = slowest_device(run.devices);
  for (std::size_t i = 0; i < run.devices.size(); ++i) {
    const DeviceTotals& d = run.devices[i];
    samples.push_back({d.name, static_cast<double>(d.samples), format_count(d.samples) + " samples"});
    busy.push_back({d.name, d.busy_s(), format_fixed(d.busy_s(), 3) + " s busy"});
    bars.push_back({d.name, phase_seconds(d), slowest == i});
  }
  std::string out;
  if (slowest) {
    const DeviceTotals& d = run.devices[*slowest];
    double wait = 0;
    for (const DeviceTotals& other : run.devices) wait += other.wait_s;
    out += "<p>Slowest device: <strong>" + xml_escape(d.name) + "</strong>, busy " +
           format_fixed(d.busy_s(), 3) + " s" +
           (run.devices.size() > 1
                ? "; the devices waited " + format_fixed(wait, 3) + " s in all for each other."
                : " (the only device).") +
           "</p>";
  }
  out += "<div class=\"charts\">";
  out += figure(pie_chart(samples, "Share of the work (samples processed)"));
  out += figure(pie_chart(busy, "Share of the compute time (busy seconds)"));
  out += "</div><div class=\"pair\">";
  std::vector<std::string> phases(std::begin(kPhaseNames), std::end(kPhaseNames));
  out += figure(stacked_bars(bars, phases, "Where each device's time went", "s"));
  out += gpu_usage_figure(run);
  const ShareTable table = share_table(run.devices);
  out += "<div class=\"table-wrap\"><table><thead><tr>";
  for (const std::string& h : table.header) out += "<th>" + xml_escape(h) + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& row : table.rows) {
    out += "<tr>";
    for (const std::string& cell : row) out += "<td>" + xml_escape(cell) + "</td>";
    out += "</tr>";
  }
  return out + "</tbody></table></div></div>";
}

}  // namespace

std::vector<double> smooth(const std::vector<double>& values, double weight) {
  std::vector<double> out;
  double average = 0, norm = 0;
  for (const double v : values) {
    if (!std::isfinite(v)) {
      out.push_back(v);
      continue;
    }
    average = weight * average + (1 - weight) * v;
    norm = weight * norm + (1 - weight);
    out.push_back(average / norm);
  }
  return out;
}

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  if (seconds < 60) return format_fixed(seconds, 1) + " s";
  const auto whole = static_cast<long long>(std::llround(seconds));
  char buffer[48];
  if (whole < 3600) {
    std::snprintf(buffer, sizeof buffer, "%lld min %02lld s", whole / 60, whole % 60);
  } else {
    std::snprintf(buffer, sizeof buffer, "%lld h %02lld min", whole / 3600, whole / 60 % 60);
  }
  return buffer;
}

std::string render_html(const RunData& run, const std::string& name) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>tandem report: " + xml_escape(name) + "</title><style>" + kStyle +
      "</style></head><body>\n<header><h1>Training report <span>" + xml_escape(name) +
      "</span></h1>" + status_paragraph(run) + "</header>\n";
  out += "<section><h2>Run</h2>" + summary(run) + "</section>\n";
  out += "<section><h2>Training</h2>" + training_charts(run) + "</section>\n";
  out += "<section><h2>Devices</h2>" + device_section(run) + "</section>\n";
  out += "<footer>Built by <code>tandem report</code> from metrics.jsonl (" +
         format_count(static_cast<std::int64_t>(run.lines)) + " lines";
  if (run.skipped_lines > 0) {
    out += "; " + format_count(static_cast<std::int64_t>(run.skipped_lines)) +
           " unreadable, skipped, the first at line " + std::to_string(run.first_skipped);
  }
  return out + ").</footer>\n</body></html>\n";
}

}  // namespace tandem::report
