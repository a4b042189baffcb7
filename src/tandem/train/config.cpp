// TrainConfig parsing (text, JSON, TOML), validation and the resolved config.json.
#include "tandem/train/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "tandem/base/check.h"
#include "tandem/train/models.h"

namespace tandem::train {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kKeys[] = {
    "model",    "data",          "normalize",  "epochs",     "max_steps",        "batch_size",
    "optimizer", "lr",           "momentum",   "weight_decay",     "schedule",
    "label_smoothing", "devices", "split",     "sync_batchnorm",   "accumulate",
    "threads",  "micro_shard",   "workers",    "seed",             "deterministic",
    "out",      "checkpoint_every", "keep_checkpoints", "resume",   "eval_every",
    "log_format", "tensorboard", "comm_timeout", "precision",  "cuda_graphs",
    "gpu_reduction"};

std::string flag_of(std::string_view key) {
  std::string flag = "--" + std::string(key);
  for (char& c : flag) {
    if (c == '_') c = '-';
  }
  return flag;
}

// `text` as a whole integer of type Int; an error naming the flag and `what` it should be.
template <typename Int>
Int parse_integer(std::string_view key, std::string_view text, const char* what) {
  Int value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  TANDEM_CHECK(!text.empty() && ec == std::errc() && ptr == text.data() + text.size(), flag_of(key),
               ": '", text, "' is not ", what);
  return value;
}

std::int64_t parse_int(std::string_view key, std::string_view text) {
  return parse_integer<std::int64_t>(key, text, "an integer");
}

std::uint64_t parse_uint(std::string_view key, std::string_view text) {
  return parse_integer<std::uint64_t>(key, text, "a non-negative integer");
}

double parse_double(std::string_view key, std::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  TANDEM_CHECK(!copy.empty() && end == copy.c_str() + copy.size(), flag_of(key), ": '", text,
               "' is not a number");
  return value;
}

bool parse_bool(std::string_view key, std::string_view text) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  TANDEM_FAIL(flag_of(key), ": '", text, "' is not a boolean (true or false)");
}

OptimizerKind parse_optimizer(std::string_view text) {
  if (text == "sgd") return OptimizerKind::Sgd;
  if (text == "adam") return OptimizerKind::Adam;
  if (text == "adamw") return OptimizerKind::AdamW;
  TANDEM_FAIL("--optimizer: unknown optimizer '", text, "' (expected sgd, adam or adamw)");
}

ScheduleKind parse_schedule(std::string_view text) {
  if (text == "none") return ScheduleKind::None;
  if (text == "step") return ScheduleKind::Step;
  if (text == "cosine") return ScheduleKind::Cosine;
  if (text == "warmup") return ScheduleKind::Warmup;
  if (text == "onecycle") return ScheduleKind::OneCycle;
  TANDEM_FAIL("--schedule: unknown schedule '", text,
              "' (expected none, step, cosine, warmup or onecycle)");
}

LogFormat parse_log_format(std::string_view text) {
  if (text == "text") return LogFormat::Text;
  if (text == "json") return LogFormat::Json;
  TANDEM_FAIL("--log-format: unknown format '", text, "' (expected text or json)");
}

GpuReductionKind parse_gpu_reduction(std::string_view text) {
  if (text == "nccl") return GpuReductionKind::Nccl;
  if (text == "host") return GpuReductionKind::Host;
  TANDEM_FAIL("--gpu-reduction: unknown reduction '", text, "' (expected nccl or host)");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK(in.good(), "--config: cannot open '", path, "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

double TrainConfig::resolved_lr() const {
  if (lr) return *lr;
  if (optimizer != OptimizerKind::Sgd) return 1e-3;
  return model == "seed-cnn" ? 1e-3 : 1e-2;
}

std::vector<std::string> config_keys() { return {std::begin(kKeys), std::end(kKeys)}; }

void set_from_text(TrainConfig& c, std::string_view key, std::string_view text) {
  if (key == "model") {
    c.model = std::string(text);
  } else if (key == "data") {
    c.data = std::string(text);
  } else if (key == "normalize") {
    c.normalize = parse_bool(key, text);
  } else if (key == "epochs") {
    c.epochs = parse_int(key, text);
  } else if (key == "max_steps") {
    c.max_steps = parse_int(key, text);
  } else if (key == "batch_size") {
    c.batch_size = parse_int(key, text);
  } else if (key == "optimizer") {
    c.optimizer = parse_optimizer(text);
  } else if (key == "lr") {
    if (text == "auto") {
      c.lr.reset();
    } else {
      c.lr = parse_double(key, text);
    }
  } else if (key == "momentum") {
    c.momentum = parse_double(key, text);
  } else if (key == "weight_decay") {
    c.weight_decay = parse_double(key, text);
  } else if (key == "schedule") {
    c.schedule = parse_schedule(text);
  } else if (key == "label_smoothing") {
    c.label_smoothing = parse_double(key, text);
  } else if (key == "devices") {
    c.devices = std::string(text);
  } else if (key == "split") {
    c.split = parse_split(text);
  } else if (key == "sync_batchnorm") {
    c.sync_batchnorm = parse_bool(key, text);
  } else if (key == "accumulate") {
    c.accumulate = parse_int(key, text);
  } else if (key == "threads") {
    c.threads = parse_int(key, text);
  } else if (key == "micro_shard") {
    c.micro_shard = parse_int(key, text);
  } else if (key == "workers") {
    c.workers = text == "auto" ? kAutoWorkers : parse_int(key, text);
  } else if (key == "seed") {
    c.seed = parse_uint(key, text);
  } else if (key == "deterministic") {
    c.determinism = parse_bool(key, text) ? Determinism::Deterministic : Determinism::Default;
  } else if (key == "out") {
    c.out = std::string(text);
  } else if (key == "checkpoint_every") {
    c.checkpoint_every = parse_int(key, text);
  } else if (key == "keep_checkpoints") {
    c.keep_checkpoints = parse_int(key, text);
  } else if (key == "resume") {
    c.resume = std::string(text);
  } else if (key == "eval_every") {
    c.eval_every = parse_int(key, text);
  } else if (key == "log_format") {
    c.log_format = parse_log_format(text);
  } else if (key == "tensorboard") {
    c.tensorboard = parse_bool(key, text);
  } else if (key == "comm_timeout") {
    c.comm_timeout = parse_double(key, text);
  } else if (key == "precision") {
    c.precision = parse_precision(text);
  } else if (key == "cuda_graphs") {
    c.cuda_graphs = parse_bool(key, text);
  } else if (key == "gpu_reduction") {
    c.gpu_reduction = parse_gpu_reduction(text);
  } else {
    TANDEM_FAIL("unknown setting '", key, "'");
  }
}

void apply_json(TrainConfig& config, std::string_view json_text, std::string_view source) {
  Json root;
  try {
    root = Json::parse(json_text);
  } catch (const Json::exception& e) {
    TANDEM_FAIL(source, ": not valid JSON (", e.what(), ")");
  }
  TANDEM_CHECK(root.is_object(), source, ": expected a JSON object of settings");
  for (const auto& [key, value] : root.items()) {
    std::string text;
    if (value.is_string()) {
      text = value.get<std::string>();
    } else if (value.is_boolean()) {
      text = value.get<bool>() ? "true" : "false";
    } else if (value.is_number_integer()) {
      text = value.dump();
    } else if (value.is_number_float()) {
      text = value.dump();
    } else if (value.is_null() && key == "lr") {
      text = "auto";
    } else {
      // The type, not the value: dumping a deeply nested value would recurse past the stack.
      TANDEM_FAIL(source, ": setting '", key, "' has a value of unsupported type ",
                  value.type_name(), " (expected a string, number or boolean)");
    }
    try {
      set_from_text(config, key, text);
    } catch (const Error& e) {
      throw Error(std::string(source) + ": " + e.what());
    }
  }
}

void apply_toml(TrainConfig& config, std::string_view toml_text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream where;
    where << e.source().begin;
    TANDEM_FAIL(source, ": not valid TOML at ", where.str(), " (", e.description(), ")");
  }
  const toml::table* table = &root;
  if (const toml::table* train = root["train"].as_table()) table = train;
  for (const auto& [key, node] : *table) {
    std::string text;
    if (const auto* s = node.as_string()) {
      text = s->get();
    } else if (const auto* i = node.as_integer()) {
      text = std::to_string(i->get());
    } else if (const auto* f = node.as_floating_point()) {
      std::ostringstream out;
      out.precision(17);
      out << f->get();
      text = out.str();
    } else if (const auto* b = node.as_boolean()) {
      text = b->get() ? "true" : "false";
    } else {
      TANDEM_FAIL(source, ": setting '", key.str(), "' has an unsupported type");
    }
    try {
      set_from_text(config, key.str(), text);
    } catch (const Error& e) {
      throw Error(std::string(source) + ": " + e.what());
    }
  }
}

void apply_config_file(TrainConfig& config, const std::string& path) {
  const std::string text = read_file(path);
  if (path.ends_with(".toml")) {
    apply_toml(config, text, path);
  } else {
    apply_json(config, text, path);
  }
  // What came before (defaults, a checkpoint's config) was valid, so a bad value is the file's:
  // say so here, naming it, rather than later from the merged settings.
  try {
    validate(config);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

std::int64_t loader_workers(std::int64_t workers, bool gpu_trains, int logical_cores) {
  if (workers != kAutoWorkers) return workers;
  if (!gpu_trains) return 2;
  return std::clamp<std::int64_t>(logical_cores / 2, 2, 8);
}

void validate(const TrainConfig& c) {
  parse_model_kind(c.model);
  TANDEM_CHECK(!c.data.empty(), "--data: empty data spec");
  TANDEM_CHECK(c.epochs >= 1, "--epochs: ", c.epochs, " is not a positive number of epochs");
  TANDEM_CHECK(c.max_steps >= 0, "--max-steps: ", c.max_steps, " is negative (0 means no limit)");
  TANDEM_CHECK(c.batch_size >= 1, "--batch-size: ", c.batch_size, " is not a positive batch size");
  const double lr = c.resolved_lr();
  TANDEM_CHECK(std::isfinite(lr) && lr > 0, "--lr: ", lr, " is not a positive finite learning rate");
  TANDEM_CHECK(std::isfinite(c.momentum) && c.momentum >= 0 && c.momentum < 1, "--momentum: ",
               c.momentum, " is not in [0, 1)");
  TANDEM_CHECK(std::isfinite(c.weight_decay) && c.weight_decay >= 0, "--weight-decay: ",
               c.weight_decay, " is not a non-negative number");
  TANDEM_CHECK(std::isfinite(c.label_smoothing) && c.label_smoothing >= 0 &&
                   c.label_smoothing <= 1,
               "--label-smoothing: ", c.label_smoothing, " is not in [0, 1]");
  TANDEM_CHECK(c.workers == kAutoWorkers || (c.workers >= 0 && c.workers <= 1024), "--workers: ",
               c.workers, " is not auto or in [0, 1024] (the DataLoader's limit)");
  TANDEM_CHECK(c.accumulate >= 1 && c.accumulate <= c.batch_size, "--accumulate: ", c.accumulate,
               " is not from 1 to the batch size (", c.batch_size, ")");
  TANDEM_CHECK(c.threads >= 0 && c.threads <= 4096, "--threads: ", c.threads,
               " is not from 0 (automatic) to 4096");
  TANDEM_CHECK(c.micro_shard >= 0, "--micro-shard: ", c.micro_shard,
               " is negative (0 means none)");
  TANDEM_CHECK(!c.cuda_graphs || c.accumulate == 1, "--cuda-graphs: a graph replays one whole "
               "step, but --accumulate is ", c.accumulate);
  TANDEM_CHECK(c.micro_shard == 0 || !c.sync_batchnorm,
               "--micro-shard and --sync-batchnorm cannot be combined (global batch-norm "
               "statistics need every shard's forward before any backward)");
  TANDEM_CHECK(c.split.kind != SplitKind::Auto || c.determinism != Determinism::Deterministic,
               "--split auto and --deterministic cannot be combined: auto re-balances the shares "
               "by measured step times, so the arithmetic (hence the weights) would depend on "
               "timing; use --split even or proportions such as 3:1");
  TANDEM_CHECK(c.checkpoint_every >= 0, "--checkpoint-every: ", c.checkpoint_every,
               " is negative (0 means at each epoch's end)");
  TANDEM_CHECK(c.keep_checkpoints >= 1, "--keep-checkpoints: ", c.keep_checkpoints,
               " is not at least 1");
  TANDEM_CHECK(c.eval_every >= 1, "--eval-every: ", c.eval_every, " is not at least 1");
  TANDEM_CHECK(std::isfinite(c.comm_timeout) && c.comm_timeout > 0, "--comm-timeout: ",
               c.comm_timeout, " is not a positive number of seconds");
  TANDEM_CHECK(!c.devices.empty(), "--devices: empty device list");
}

std::string to_json(const TrainConfig& c) {
  Json j;
  j["model"] = c.model;
  j["data"] = c.data;
  j["normalize"] = c.normalize;
  j["epochs"] = c.epochs;
  j["max_steps"] = c.max_steps;
  j["batch_size"] = c.batch_size;
  j["optimizer"] = optimizer_name(c.optimizer);
  j["lr"] = c.resolved_lr();
  j["momentum"] = c.momentum;
  j["weight_decay"] = c.weight_decay;
  j["schedule"] = schedule_name(c.schedule);
  j["label_smoothing"] = c.label_smoothing;
  j["devices"] = c.devices;
  j["split"] = split_name(c.split);
  j["sync_batchnorm"] = c.sync_batchnorm;
  j["accumulate"] = c.accumulate;
  j["threads"] = c.threads;
  j["micro_shard"] = c.micro_shard;
  if (c.workers == kAutoWorkers) {
    j["workers"] = "auto";
  } else {
    j["workers"] = c.workers;
  }
  j["seed"] = c.seed;
  j["deterministic"] = c.determinism == Determinism::Deterministic;
  j["out"] = c.out;
  j["checkpoint_every"] = c.checkpoint_every;
  j["keep_checkpoints"] = c.keep_checkpoints;
  j["resume"] = c.resume;
  j["eval_every"] = c.eval_every;
  j["log_format"] = log_format_name(c.log_format);
  j["tensorboard"] = c.tensorboard;
  j["comm_timeout"] = c.comm_timeout;
  j["precision"] = std::string(precision_name(c.precision));
  j["cuda_graphs"] = c.cuda_graphs;
  j["gpu_reduction"] = gpu_reduction_name(c.gpu_reduction);
  return j.dump(2) + "\n";
}

std::string optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::AdamW: return "adamw";
  }
  return "?";
}

std::string schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::None: return "none";
    case ScheduleKind::Step: return "step";
    case ScheduleKind::Cosine: return "cosine";
    case ScheduleKind::Warmup: return "warmup";
    case ScheduleKind::OneCycle: return "onecycle";
  }
  return "?";
}

std::string log_format_name(LogFormat format) {
  return format == LogFormat::Json ? "json" : "text";
}

std::string gpu_reduction_name(GpuReductionKind kind) {
  return kind == GpuReductionKind::Host ? "host" : "nccl";
}

std::string split_name(const SplitSetting& split) {
  switch (split.kind) {
    case SplitKind::Even: return "even";
    case SplitKind::Auto: return "auto";
    case SplitKind::Weighted: break;
  }
  std::string out;
  for (double p : split.proportions) {
    if (!out.empty()) out += ":";
    std::ostringstream number;
    number.precision(17);
    number << p;
    out += number.str();
  }
  return out;
}

SplitSetting parse_split(std::string_view text) {
  if (text == "even") return {};
  if (text == "auto") return {.kind = SplitKind::Auto};
  SplitSetting split{.kind = SplitKind::Weighted};
  double sum = 0;
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = text.find(':', start);
    const std::string_view item = text.substr(start, colon == std::string_view::npos
                                                         ? std::string_view::npos
                                                         : colon - start);
    const std::string copy(item);
    char* end = nullptr;
    const double p = std::strtod(copy.c_str(), &end);
    TANDEM_CHECK(!copy.empty() && end == copy.c_str() + copy.size() && std::isfinite(p) && p >= 0,
                 "--split: '", item, "' in '", text,
                 "' is not a non-negative number (expected even, auto or proportions such as "
                 "3:2:2:3)");
    split.proportions.push_back(p);
    sum += p;
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  TANDEM_CHECK(split.proportions.size() >= 2, "--split: '", text,
               "' is not even, auto or proportions such as 3:2:2:3");
  TANDEM_CHECK(sum > 0, "--split: the proportions '", text, "' are all zero");
  return split;
}

Precision parse_precision(std::string_view text) {
  if (text == "fp32") return Precision::Float32;
  if (text == "bf16") return Precision::BFloat16;
  TANDEM_FAIL("--precision: unknown precision '", text, "' (expected fp32 or bf16)");
}

}  // namespace tandem::train
