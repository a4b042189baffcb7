// metrics.jsonl lines and their writer.
#include "tandem/train/metrics.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tandem/base/check.h"

namespace tandem::train {
namespace {

using Json = nlohmann::ordered_json;

Json devices_json(const std::vector<DeviceFigures>& devices) {
  Json list = Json::array();
  for (const DeviceFigures& d : devices) {
    list.push_back(Json{{"device", d.device},
                        {"samples", d.samples},
                        {"seconds", d.seconds},
                        {"images_per_s", d.images_per_s()},
                        {"forward_s", d.forward_s},
                        {"backward_s", d.backward_s},
                        {"reduction_s", d.reduction_s},
                        {"optimizer_s", d.optimizer_s},
                        {"wait_s", d.wait_s},
                        {"peak_bytes", d.peak_bytes}});
  }
  return list;
}

}  // namespace

DeviceFigures& DeviceFigures::operator+=(const DeviceFigures& other) {
  samples += other.samples;
  seconds += other.seconds;
  forward_s += other.forward_s;
  backward_s += other.backward_s;
  reduction_s += other.reduction_s;
  optimizer_s += other.optimizer_s;
  wait_s += other.wait_s;
  peak_bytes = std::max(peak_bytes, other.peak_bytes);
  return *this;
}

std::string to_json_line(const RunMetrics& m) {
  Json j;
  j["kind"] = "run";
  j["step"] = m.step;
  j["time"] = m.time;
  j["model"] = m.model;
  j["parameters"] = m.parameters;
  j["data"] = m.data;
  j["input"] = m.input;
  j["classes"] = m.classes;
  j["train_samples"] = m.train_samples;
  j["test_samples"] = m.test_samples;
  j["layout"] = m.layout;
  j["device_count"] = m.device_count;
  j["ranks"] = m.ranks;
  j["batch_size"] = m.batch_size;
  j["epochs"] = m.epochs;
  j["steps_per_epoch"] = m.steps_per_epoch;
  j["total_steps"] = m.total_steps;
  j["optimizer"] = m.optimizer;
  j["lr"] = m.lr;
  j["schedule"] = m.schedule;
  return j.dump();
}

std::string to_json_line(const StepMetrics& m) {
  Json j;
  j["kind"] = "step";
  j["step"] = m.step;
  j["epoch"] = m.epoch;
  j["loss"] = m.loss;
  j["lr"] = m.lr;
  j["images_per_s"] = m.images_per_s;
  j["devices"] = devices_json(m.devices);
  j["seconds"] = m.seconds;
  j["data_s"] = m.data_s;
  if (m.accuracy) j["accuracy"] = *m.accuracy;
  j["time"] = m.time;
  return j.dump();
}

std::string to_json_line(const EpochMetrics& m) {
  Json j;
  j["kind"] = "epoch";
  j["step"] = m.step;
  j["epoch"] = m.epoch;
  j["complete"] = m.complete;
  j["loss"] = m.loss;
  j["lr"] = m.lr;
  j["images_per_s"] = m.images_per_s;
  j["seconds"] = m.seconds;
  if (m.test_loss) j["test_loss"] = *m.test_loss;
  if (m.test_accuracy) j["test_accuracy"] = *m.test_accuracy;
  j["devices"] = devices_json(m.devices);
  if (m.train_accuracy) j["train_accuracy"] = *m.train_accuracy;
  j["data_s"] = m.data_s;
  if (!m.confusion.empty()) j["confusion"] = m.confusion;
  j["time"] = m.time;
  return j.dump();
}

std::string to_json_line(const GpuSample& s, std::int64_t step) {
  Json j;
  j["kind"] = "gpu";
  j["step"] = step;
  j["device"] = s.device;
  j["gpu_percent"] = s.reading.gpu_percent;
  j["memory_percent"] = s.reading.memory_percent;
  j["memory_used"] = s.reading.memory_used;
  j["memory_total"] = s.reading.memory_total;
  if (s.reading.power_watts) j["power_w"] = *s.reading.power_watts;
  j["time"] = s.time;
  return j.dump();
}

MetricsWriter::MetricsWriter(const std::string& path, MetricsOpen mode)
    : path_(path),
      out_(path, mode == MetricsOpen::Append ? std::ios::app : std::ios::trunc) {
  TANDEM_CHECK(out_.good(), "metrics: cannot open '", path, "' for writing");
}

void MetricsWriter::write(const RunMetrics& m) { write_line(to_json_line(m)); }
void MetricsWriter::write(const StepMetrics& m) { write_line(to_json_line(m)); }
void MetricsWriter::write(const EpochMetrics& m) { write_line(to_json_line(m)); }
void MetricsWriter::write(const GpuSample& s, std::int64_t step) {
  write_line(to_json_line(s, step));
}

void MetricsWriter::write_line(const std::string& line) {
  out_ << line << '\n';
  out_.flush();
  TANDEM_CHECK(out_.good(), "metrics: writing '", path_, "' failed");
}

void truncate_metrics_after(const std::string& path, std::int64_t step) {
  std::ifstream in(path);
  if (!in.good()) return;
  std::ostringstream kept;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    // A line cut short by a crash does not parse: it is dropped with everything after the step.
    if (j.is_discarded() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    if (j["step"].get<std::int64_t>() <= step) kept << line << '\n';
  }
  in.close();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept.str();
    out.flush();
    TANDEM_CHECK(out.good(), "metrics: writing '", tmp, "' failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  TANDEM_CHECK(!ec, "metrics: replacing '", path, "' failed: ", ec.message());
}

}  // namespace tandem::train
