// metrics.jsonl -> RunData: one lenient pass, line by line.
#include "tandem/report/run_data.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tandem/base/check.h"

namespace tandem::report {
namespace {

using Json = nlohmann::json;

// A field that may be absent (older files): `fallback` then; present with the wrong type throws.
template <typename T>
T field(const Json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

template <typename T>
std::optional<T> optional_field(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

RunStart start_from(const Json& j) {
  RunStart s;
  s.step = field<std::int64_t>(j, "step", 0);
  s.time = field<double>(j, "time", 0);
  s.model = field<std::string>(j, "model", "");
  s.parameters = field<std::int64_t>(j, "parameters", 0);
  s.data = field<std::string>(j, "data", "");
  s.input = field<std::string>(j, "input", "");
  s.classes = field<std::int64_t>(j, "classes", 0);
  s.train_samples = field<std::int64_t>(j, "train_samples", 0);
  s.test_samples = field<std::int64_t>(j, "test_samples", 0);
  s.layout = field<std::string>(j, "layout", "");
  s.device_count = field<std::int64_t>(j, "device_count", 0);
  s.ranks = field<std::int64_t>(j, "ranks", 1);
  s.batch_size = field<std::int64_t>(j, "batch_size", 0);
  s.epochs = field<std::int64_t>(j, "epochs", 0);
  s.steps_per_epoch = field<std::int64_t>(j, "steps_per_epoch", 0);
  s.total_steps = field<std::int64_t>(j, "total_steps", 0);
  s.optimizer = field<std::string>(j, "optimizer", "");
  s.lr = field<double>(j, "lr", 0);
  s.schedule = field<std::string>(j, "schedule", "");
  return s;
}

// Adds a step line's devices to the totals (found by name, appended when new).
void add_devices(const Json& j, double data_s, std::vector<DeviceTotals>& totals,
                 std::int64_t& samples) {
  const auto it = j.find("devices");
  if (it == j.end()) return;
  for (const Json& d : *it) {
    std::string name = d.at("device").get<std::string>();
    if (const auto rank = optional_field<std::int64_t>(d, "rank")) {
      name = "rank " + std::to_string(*rank) + " " + name;
    }
    DeviceTotals* t = nullptr;
    for (DeviceTotals& existing : totals) {
      if (existing.name == name) t = &existing;
    }
    if (t == nullptr) t = &totals.emplace_back(DeviceTotals{.name = name});
    const std::int64_t n = field<std::int64_t>(d, "samples", 0);
    t->samples += n;
    samples += n;
    t->data_s += data_s;
    t->forward_s += field<double>(d, "forward_s", 0);
    t->backward_s += field<double>(d, "backward_s", 0);
    t->reduction_s += field<double>(d, "reduction_s", 0);
    t->optimizer_s += field<double>(d, "optimizer_s", 0);
    t->wait_s += field<double>(d, "wait_s", 0);
    t->peak_bytes = std::max(t->peak_bytes, field<std::int64_t>(d, "peak_bytes", 0));
  }
}

}  // namespace

const EpochRecord* RunData::last_evaluated() const {
  for (auto it = epochs.rbegin(); it != epochs.rend(); ++it) {
    if (it->test_accuracy) return &*it;
  }
  return nullptr;
}

double RunData::training_seconds() const {
  double total = 0;
  for (const StepRecord& s : steps) total += s.seconds;
  return total;
}

std::int64_t RunData::samples() const {
  std::int64_t total = 0;
  for (const StepRecord& s : steps) total += s.samples;
  return total;
}

RunData parse_metrics(std::string_view text) {
  RunData run;
  double segment_start = -1, segment_last = -1;
  const auto close_segment = [&] {
    if (segment_start > 0 && segment_last > segment_start) run.wall_seconds += segment_last - segment_start;
  };
  std::size_t line_number = 0;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.empty()) continue;
    ++run.lines;
    try {
      const Json j = Json::parse(line);
      const std::string kind = j.at("kind").get<std::string>();
      const double time = field<double>(j, "time", 0);
      if (kind == "run") {
        close_segment();
        run.starts.push_back(start_from(j));
        segment_start = segment_last = time;
      } else if (kind == "step") {
        StepRecord s;
        s.step = j.at("step").get<std::int64_t>();
        s.epoch = field<std::int64_t>(j, "epoch", 0);
        s.loss = field<double>(j, "loss", 0);
        s.lr = field<double>(j, "lr", 0);
        s.images_per_s = field<double>(j, "images_per_s", 0);
        s.seconds = field<double>(j, "seconds", 0);
        s.accuracy = optional_field<double>(j, "accuracy");
        s.time = time;
        std::vector<DeviceTotals> devices = run.devices;  // committed only if the line reads whole
        add_devices(j, field<double>(j, "data_s", 0), devices, s.samples);
        run.devices = std::move(devices);
        run.steps.push_back(s);
      } else if (kind == "epoch") {
        EpochRecord e;
        e.step = j.at("step").get<std::int64_t>();
        e.epoch = field<std::int64_t>(j, "epoch", 0);
        e.complete = field<bool>(j, "complete", true);
        e.loss = field<double>(j, "loss", 0);
        e.lr = field<double>(j, "lr", 0);
        e.images_per_s = field<double>(j, "images_per_s", 0);
        e.seconds = field<double>(j, "seconds", 0);
        e.train_accuracy = optional_field<double>(j, "train_accuracy");
        e.test_loss = optional_field<double>(j, "test_loss");
        e.test_accuracy = optional_field<double>(j, "test_accuracy");
        if (auto confusion = optional_field<std::vector<std::vector<std::int64_t>>>(j, "confusion")) {
          run.confusion = std::move(*confusion);
          run.confusion_epoch = e.epoch;
        }
        run.epochs.push_back(e);
      } else if (kind == "gpu") {
        GpuRecord g;
        g.step = j.at("step").get<std::int64_t>();
        g.device = j.at("device").get<std::string>();
        g.gpu_percent = field<double>(j, "gpu_percent", 0);
        g.memory_percent = field<double>(j, "memory_percent", 0);
        g.memory_used = field<double>(j, "memory_used", 0);
        g.memory_total = field<double>(j, "memory_total", 0);
        g.power_w = optional_field<double>(j, "power_w");
        g.time = time;
        run.gpu.push_back(std::move(g));
      }
      if (time > 0) segment_last = std::max(segment_last, time);
    } catch (const Json::exception&) {
      if (run.skipped_lines++ == 0) run.first_skipped = line_number;
    }
  }
  close_segment();
  return run;
}

RunData read_metrics(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK(in.good(), "report: cannot read '", path, "' (is it a run directory?)");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_metrics(text.str());
}

}  // namespace tandem::report
