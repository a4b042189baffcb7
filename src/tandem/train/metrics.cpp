// metrics.jsonl lines and their writer.
#include "tandem/train/metrics.h"

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
                        {"images_per_s", d.images_per_s()}});
  }
  return list;
}

}  // namespace

std::string to_json_line(const StepMetrics& m) {
  Json j;
  j["kind"] = "step";
  j["step"] = m.step;
  j["epoch"] = m.epoch;
  j["loss"] = m.loss;
  j["lr"] = m.lr;
  j["images_per_s"] = m.images_per_s;
  j["devices"] = devices_json(m.devices);
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
  return j.dump();
}

MetricsWriter::MetricsWriter(const std::string& path, MetricsOpen mode)
    : path_(path),
      out_(path, mode == MetricsOpen::Append ? std::ios::app : std::ios::trunc) {
  TANDEM_CHECK(out_.good(), "metrics: cannot open '", path, "' for writing");
}

void MetricsWriter::write(const StepMetrics& m) { write_line(to_json_line(m)); }
void MetricsWriter::write(const EpochMetrics& m) { write_line(to_json_line(m)); }

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
