// The training run: config resolution, stages, the loop, checkpoints, resumption and signals.
#include "tandem/train/trainer.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <deque>
#include <filesystem>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tandem/autograd/grad_mode.h"
#include "tandem/base/rng.h"
#include "tandem/data/data_loader.h"
#include "tandem/data/data_spec.h"
#include "tandem/device/cuda/discovery.h"
#include "tandem/device/cuda/memory.h"
#include "tandem/device/cuda/nvml.h"
#include "tandem/io/safetensors.h"
#include "tandem/ops/determinism.h"
#include "tandem/ops/ops.h"
#include "tandem/optim/optim.h"
#include "tandem/parallel/data_parallel.h"
#include "tandem/parallel/replica_threads.h"
#include "tandem/report/tfevents.h"
#include "tandem/train/auto_devices.h"
#include "tandem/train/distributed.h"
#include "tandem/train/gpu_usage.h"
#include "tandem/train/graph_runner.h"
#include "tandem/train/models.h"
#include "tandem/train/run_dir.h"
#include "tandem/train/run_report.h"

namespace tandem::train {
namespace fs = std::filesystem;
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr const char* kStateFormat = "tandem-train-state";
constexpr int kStateVersion = 1;
constexpr std::int64_t kEvalBatch = 500;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// ---- signals: SIGINT / SIGTERM ask the loop to stop after the current step ----

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int signal) { g_stop_signal = signal; }

class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  int requested() const { return g_stop_signal; }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// ---- saved state <-> JSON ----

Json saved_state_json(const optim::SavedState& s) {
  Json scalars = Json::array();
  for (const auto& [key, value] : s.scalars) scalars.push_back(Json::array({key, value}));
  return Json{{"type", s.type}, {"scalars", scalars}};
}

optim::SavedState saved_state_from(const Json& j, const nn::StateDict& tensors,
                                   const std::string& prefix) {
  optim::SavedState s;
  s.type = j.at("type").get<std::string>();
  for (const Json& pair : j.at("scalars")) {
    s.scalars.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<double>());
  }
  for (const auto& [name, t] : tensors) {
    if (name.starts_with(prefix)) s.tensors.emplace_back(name.substr(prefix.size()), t);
  }
  return s;
}

Json generator_json(const GeneratorState& g) {
  return Json{{"seed", g.seed}, {"stream", g.stream}, {"offset", g.offset}};
}

GeneratorState generator_from(const Json& j) {
  return {j.at("seed").get<std::uint64_t>(), j.at("stream").get<std::uint64_t>(),
          j.at("offset").get<std::uint64_t>()};
}

// Running sums of the epoch under way (saved so a resumed run reports the same epoch figures).
// The figures after "devices" came later: a checkpoint without them reads them as 0.
struct EpochTotals {
  double loss_sum = 0;  // sum of loss * samples
  std::int64_t samples = 0;
  double seconds = 0;
  std::vector<DeviceFigures> devices;
  std::int64_t correct = 0;
  double data_s = 0;

  Json json() const {
    Json devs = Json::array();
    for (const DeviceFigures& d : devices) {
      devs.push_back(Json{{"device", d.device}, {"samples", d.samples}, {"seconds", d.seconds},
                          {"forward_s", d.forward_s}, {"backward_s", d.backward_s},
                          {"reduction_s", d.reduction_s}, {"optimizer_s", d.optimizer_s},
                          {"wait_s", d.wait_s}, {"peak_bytes", d.peak_bytes}});
    }
    return Json{{"loss_sum", loss_sum}, {"samples", samples}, {"seconds", seconds},
                {"devices", devs}, {"correct", correct}, {"data_s", data_s}};
  }
  static EpochTotals from(const Json& j) {
    EpochTotals t;
    t.loss_sum = j.at("loss_sum").get<double>();
    t.samples = j.at("samples").get<std::int64_t>();
    t.seconds = j.at("seconds").get<double>();
    for (const Json& d : j.at("devices")) {
      t.devices.push_back({d.at("device").get<std::string>(), d.at("samples").get<std::int64_t>(),
                           d.at("seconds").get<double>(), d.value("forward_s", 0.0),
                           d.value("backward_s", 0.0), d.value("reduction_s", 0.0),
                           d.value("optimizer_s", 0.0), d.value("wait_s", 0.0),
                           d.value("peak_bytes", std::int64_t{0})});
    }
    t.correct = j.value("correct", std::int64_t{0});
    t.data_s = j.value("data_s", 0.0);
    return t;
  }
  void add(const StepResult& r, double step_seconds, double data_seconds) {
    loss_sum += r.loss * static_cast<double>(r.samples);
    samples += r.samples;
    seconds += step_seconds;
    correct += r.correct;
    data_s += data_seconds;
    if (devices.size() != r.devices.size()) devices.assign(r.devices.size(), {});
    for (std::size_t i = 0; i < r.devices.size(); ++i) {
      devices[i].device = r.devices[i].device;
      devices[i] += r.devices[i];
    }
  }
};

// part / whole, or none for an empty whole.
std::optional<double> fraction(std::int64_t part, std::int64_t whole) {
  if (whole <= 0) return std::nullopt;
  return static_cast<double>(part) / static_cast<double>(whole);
}

// The same count on the host.
std::int64_t correct_predictions(const Tensor& logits, const Tensor& target) {
  return static_cast<std::int64_t>(correct_count(logits, target).to(kCPU).item());
}

// ", bf16 autocast" for the train stage's line, with what it costs where it is emulated.
std::string precision_note(Precision precision, const DeviceLayout& layout) {
  if (precision == Precision::Float32) return "";
  const bool any_cpu = std::any_of(layout.devices.begin(), layout.devices.end(),
                                   [](const Device& d) { return d.is_cpu(); });
  return any_cpu ? ", bf16 autocast (emulated through float32 on the CPU: numbers as bf16, "
                   "slower than fp32)"
                 : ", bf16 autocast";
}

// What state.json of a checkpoint holds besides the tensors.
struct TrainState {
  std::string model;
  std::int64_t step = 0;
  data::LoaderState loader;
  GeneratorState generator;
  Json optimizer;
  Json scheduler;  // null without a schedule
  std::string devices;
  Json config;
  EpochTotals epoch;
};

std::string state_json_text(const TrainState& s) {
  Json j;
  j["format"] = kStateFormat;
  j["version"] = kStateVersion;
  j["model"] = s.model;
  j["step"] = s.step;
  j["epoch"] = s.loader.epoch;
  j["loader"] = Json{{"epoch", s.loader.epoch}, {"batch", s.loader.batch}, {"seed", s.loader.seed}};
  j["generators"] = Json{{"default", generator_json(s.generator)}};
  j["optimizer"] = s.optimizer;
  j["scheduler"] = s.scheduler;
  j["devices"] = s.devices;
  j["config"] = s.config;
  j["epoch_totals"] = s.epoch.json();
  return j.dump(2) + "\n";
}

TrainState parse_state(const std::string& text, const std::string& where) {
  try {
    const Json j = Json::parse(text);
    TANDEM_CHECK(j.value("format", "") == kStateFormat, where,
                 ": state.json is not a tandem training state");
    TANDEM_CHECK(j.value("version", 0) == kStateVersion, where, ": training state version ",
                 j.value("version", 0), " is not supported");
    TrainState s;
    s.model = j.at("model").get<std::string>();
    s.step = j.at("step").get<std::int64_t>();
    const Json& l = j.at("loader");
    s.loader = {l.at("epoch").get<std::int64_t>(), l.at("batch").get<std::int64_t>(),
                l.at("seed").get<std::uint64_t>()};
    s.generator = generator_from(j.at("generators").at("default"));
    s.optimizer = j.at("optimizer");
    s.scheduler = j.at("scheduler");
    s.devices = j.at("devices").get<std::string>();
    s.config = j.at("config");
    s.epoch = EpochTotals::from(j.at("epoch_totals"));
    return s;
  } catch (const Json::exception& e) {
    TANDEM_FAIL(where, ": state.json is malformed (", e.what(), ")");
  }
}

// ---- config resolution helpers ----

void apply_request(TrainConfig& config, const TrainRequest& request) {
  if (!request.config_file.empty()) apply_config_file(config, request.config_file);
  for (const auto& [key, text] : request.flags) set_from_text(config, key, text);
}

// The run directory a checkpoint directory belongs to (<run>/checkpoints/step-N).
std::string run_of_checkpoint(const std::string& checkpoint) {
  return fs::path(checkpoint).parent_path().parent_path().string();
}

// The checkpoint --resume names, and the run directory it belongs to.
std::optional<io::FoundCheckpoint> find_resume_checkpoint(const TrainConfig& probe,
                                                          Console& console,
                                                          std::string& run_dir) {
  const auto warn = [&console](const std::string& line) { console.warning(line); };
  if (probe.resume == "auto") {
    std::string run = probe.out.empty() ? newest_run_with_checkpoints() : probe.out;
    if (run.empty()) return std::nullopt;
    auto found = io::find_latest_checkpoint(run + "/checkpoints", warn);
    if (found) run_dir = run;
    return found;
  }
  const fs::path p(probe.resume);
  TANDEM_CHECK(fs::exists(p), "--resume ", probe.resume, ": no such directory");
  if (fs::exists(p / "manifest.json")) {
    io::FoundCheckpoint found{probe.resume, io::read_checkpoint(probe.resume)};
    run_dir = run_of_checkpoint(probe.resume);
    return found;
  }
  std::string search;
  if (fs::is_directory(p / "checkpoints")) {
    search = (p / "checkpoints").string();
    run_dir = probe.resume;
  } else if (!io::list_checkpoints(probe.resume).empty()) {
    search = probe.resume;
    run_dir = p.parent_path().string();
  }
  TANDEM_CHECK(!search.empty(), "--resume ", probe.resume,
               ": neither a checkpoint nor a run directory with checkpoints");
  auto found = io::find_latest_checkpoint(search, warn);
  TANDEM_CHECK(found.has_value(), "--resume ", probe.resume, ": no intact checkpoint in ", search);
  return found;
}

std::string shape_text(const Shape& shape) {
  std::string out;
  for (std::int64_t s : shape) {
    if (!out.empty()) out += "x";
    out += std::to_string(s);
  }
  return out;
}

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(digits);
  out << value;
  return out.str();
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c,
                                                 std::vector<Tensor> params) {
  const double lr = c.resolved_lr();
  switch (c.optimizer) {
    case OptimizerKind::Sgd:
      return std::make_unique<optim::SGD>(
          std::move(params),
          optim::SGDOptions{.lr = lr, .momentum = c.momentum, .weight_decay = c.weight_decay});
    case OptimizerKind::Adam:
      return std::make_unique<optim::Adam>(
          std::move(params), optim::AdamOptions{.lr = lr, .betas = {c.momentum, 0.999},
                                                .weight_decay = c.weight_decay});
    case OptimizerKind::AdamW:
      return std::make_unique<optim::AdamW>(
          std::move(params), optim::AdamWOptions{.lr = lr, .betas = {c.momentum, 0.999},
                                                 .weight_decay = c.weight_decay});
  }
  TANDEM_FAIL("unknown optimizer");
}

// Schedules step once per optimizer step: step decays by 10x each epoch, cosine anneals to 0 over
// the run, warmup ramps up over the first tenth of it, onecycle peaks at --lr.
std::unique_ptr<optim::LRScheduler> make_schedule(const TrainConfig& c, optim::Optimizer& opt,
                                                  std::int64_t steps_per_epoch,
                                                  std::int64_t total_steps) {
  switch (c.schedule) {
    case ScheduleKind::None: return nullptr;
    case ScheduleKind::Step:
      return std::make_unique<optim::StepLR>(opt, std::max<std::int64_t>(1, steps_per_epoch), 0.1);
    case ScheduleKind::Cosine:
      return std::make_unique<optim::CosineAnnealingLR>(opt, std::max<std::int64_t>(1, total_steps));
    case ScheduleKind::Warmup:
      return std::make_unique<optim::LinearWarmup>(
          opt, optim::LinearWarmupOptions{.total_iters = std::max<std::int64_t>(1, total_steps / 10)});
    case ScheduleKind::OneCycle:
      return std::make_unique<optim::OneCycleLR>(
          opt, optim::OneCycleLROptions{.max_lr = {c.resolved_lr()},
                                        .total_steps = std::max<std::int64_t>(2, total_steps)});
  }
  TANDEM_FAIL("unknown schedule");
}

}  // namespace

// ---- runners ----

RunnerOptions runner_options(const TrainConfig& c) {
  return {.accumulate = c.accumulate,
          .split = c.split,
          .sync_batchnorm = c.sync_batchnorm,
          .threads = static_cast<int>(c.threads),
          .micro_shard = c.micro_shard,
          .precision = c.precision,
          .cuda_graphs = c.cuda_graphs,
          .gpu_reduction = c.gpu_reduction == GpuReductionKind::Host ||
                                   c.determinism == Determinism::Deterministic
                               ? GpuReductionKind::Host
                               : GpuReductionKind::Nccl};
}

namespace {

// The global batch cut into `k` micro-batches of nearly equal rows (views).
std::vector<data::Batch> micro_batches(const data::Batch& batch, std::int64_t k) {
  const std::int64_t rows = batch.target.size(0);
  const std::vector<double> even(static_cast<std::size_t>(std::min(k, rows)), 1.0);
  return data::split(batch, data::split_batch(rows, even));
}

}  // namespace

SingleDeviceRunner::SingleDeviceRunner(std::shared_ptr<nn::Module> model, Device device,
                                       nn::CrossEntropyLoss criterion, std::int64_t accumulate,
                                       Precision precision)
    : model_(std::move(model)),
      device_(device),
      criterion_(std::move(criterion)),
      accumulate_(accumulate),
      precision_(precision),
      account_(std::make_shared<MemoryAccount>()) {
  TANDEM_CHECK(accumulate_ >= 1, "--accumulate: ", accumulate_, " is not at least 1");
}

void StepRunner::optimizer_step(optim::Optimizer& optimizer, StepResult& step) {
  const auto start = Clock::now();
  optimizer.step();
  if (!step.devices.empty()) step.devices.front().optimizer_s += seconds_since(start);
}

StepResult SingleDeviceRunner::forward_backward(const data::Batch& batch) {
  StepResult r;
  r.samples = batch.target.size(0);
  double forward_s = 0, backward_s = 0;
  // The batch's correct predictions, counted where the logits are and read back with the loss at
  // the end: on a GPU, reading them after the forward would make the CPU wait for it before
  // queueing the backward.
  Tensor correct;
  // Forward, loss and the correct predictions, timed apart from the backward.
  const auto forward = [&](const data::Batch& b) {
    const auto start = Clock::now();
    const AutocastGuard autocast(precision_);
    const Tensor target = b.target.to(device_);
    const Tensor logits = (*model_)(b.data.to(device_));
    Tensor loss = criterion_(logits, target);
    const Tensor hits = correct_count(logits, target);
    correct = correct.defined() ? ops::binary(ops::BinaryOp::Add, correct, hits) : hits;
    forward_s += seconds_since(start);
    return loss;
  };
  const auto backward = [&](const Tensor& loss) {
    const auto start = Clock::now();
    loss.backward();
    backward_s += seconds_since(start);
  };
  // On a GPU the forward and backward above only queue kernels: reading the loss waits for them,
  // so that wait counts as backward time.
  const auto read = [&](const Tensor& t) {
    const auto start = Clock::now();
    const double value = t.to(kCPU).item();
    backward_s += seconds_since(start);
    return value;
  };
  const MemoryAccountScope charged(account_);
  account_->reset_peak();
  if (device_.is_cuda()) cuda::reset_peak_memory(device_.index);
  if (accumulate_ == 1) {
    const Tensor loss = forward(batch);
    backward(loss);
    r.loss = read(loss);
  } else {
    // Each micro-batch's mean loss weighted by its share of the rows: the gradients sum to those
    // of the global batch's mean loss.
    for (const data::Batch& micro : micro_batches(batch, accumulate_)) {
      const double weight =
          static_cast<double>(micro.target.size(0)) / static_cast<double>(r.samples);
      const Tensor loss = forward(micro);
      backward(loss * weight);
      r.loss += weight * read(loss);
    }
  }
  r.correct = static_cast<std::int64_t>(read(correct));
  const std::string name = device_.is_cpu() ? std::string("cpu") : device_.str();
  const std::size_t peak = device_.is_cuda() ? cuda::memory_stats(device_.index).peak_in_use
                                             : account_->peak.load();
  r.devices.push_back({.device = name, .samples = r.samples, .seconds = forward_s + backward_s,
                       .forward_s = forward_s, .backward_s = backward_s,
                       .peak_bytes = static_cast<std::int64_t>(peak)});
  return r;
}

namespace {

nn::DataParallelOptions data_parallel_options(const RunnerOptions& o, std::size_t devices) {
  nn::DataParallelOptions d;
  switch (o.split.kind) {
    case SplitKind::Even: d.split = nn::SplitPolicy::Even; break;
    case SplitKind::Auto: d.split = nn::SplitPolicy::Auto; break;
    case SplitKind::Weighted:
      TANDEM_CHECK(o.split.proportions.size() == devices, "--split: ", split_name(o.split),
                   " gives ", o.split.proportions.size(), " proportions for ", devices,
                   " devices");
      d.split = nn::SplitPolicy::Weighted;
      d.proportions = o.split.proportions;
      break;
  }
  d.batchnorm = o.sync_batchnorm ? nn::BatchNormStats::Global : nn::BatchNormStats::PerReplica;
  d.accumulate = o.accumulate;
  d.threads_per_replica = o.threads;
  d.micro_shard = o.micro_shard;
  d.on_bucket_reduced = o.on_bucket_reduced;
  d.gpu_reduction = o.gpu_reduction == GpuReductionKind::Host ? nn::GpuReduction::Host
                                                               : nn::GpuReduction::Nccl;
  return d;
}

// Several devices: nn::DataParallel splits each global batch over replicas (made by the model
// registry, so any registered model works) and reduces their gradients into the model's.
class DataParallelRunner final : public StepRunner {
 public:
  DataParallelRunner(std::shared_ptr<nn::Module> model, const DeviceLayout& layout,
                     std::function<std::shared_ptr<nn::Module>()> factory,
                     nn::CrossEntropyLoss criterion, const RunnerOptions& options)
      : dp_(std::move(model), layout.devices, std::move(factory),
            data_parallel_options(options, layout.devices.size())),
        criterion_(std::move(criterion)),
        accumulate_(options.accumulate),
        precision_(options.precision),
        replica_labels_(replica_labels(layout.devices)) {}

  StepResult forward_backward(const data::Batch& batch) override {
    const nn::CrossEntropyLoss& criterion = criterion_;
    std::atomic<std::int64_t> correct{0};  // summed over the replica threads
    const nn::LossFn loss = [&criterion, &correct](const Tensor& output, const Tensor& target) {
      correct += correct_predictions(output, target);
      return criterion(output, target);
    };
    StepResult out;
    out.samples = batch.target.size(0);
    std::vector<nn::DeviceStats> totals;
    const AutocastGuard autocast(precision_);  // DataParallel carries it to its replica threads
    // A global batch with fewer rows than --accumulate (only an epoch's last can be one) is cut
    // into one micro-batch per row and ends the cycle early.
    const std::vector<data::Batch> micros =
        accumulate_ == 1 ? std::vector<data::Batch>{batch} : micro_batches(batch, accumulate_);
    for (std::size_t j = 0; j < micros.size(); ++j) {
      const data::Batch& micro = micros[j];
      const double weight =
          static_cast<double>(micro.target.size(0)) / static_cast<double>(out.samples);
      const nn::StepResult r = dp_.forward_backward(micro.data, micro.target, loss, weight,
                                                    /*end_cycle=*/j + 1 == micros.size());
      out.loss += weight * r.loss;
      if (totals.empty()) totals.resize(r.devices.size());
      for (std::size_t d = 0; d < r.devices.size(); ++d) totals[d] += r.devices[d];
    }
    for (std::size_t d = 0; d < totals.size(); ++d) {
      const nn::DeviceStats& s = totals[d];
      out.devices.push_back({.device = replica_labels_[d],
                             .samples = s.samples,
                             .seconds = s.forward_s + s.backward_s + s.reduction_s,
                             .forward_s = s.forward_s,
                             .backward_s = s.backward_s,
                             .reduction_s = s.reduction_s,
                             .optimizer_s = s.optimizer_s,
                             .wait_s = s.wait_s,
                             .peak_bytes = static_cast<std::int64_t>(s.peak_bytes)});
    }
    out.correct = correct.load();
    return out;
  }

  void optimizer_step(optim::Optimizer& optimizer, StepResult& step) override {
    const std::vector<nn::DeviceStats> before = dp_.stats().devices;  // the replicas' totals
    dp_.step(optimizer);
    const std::vector<nn::DeviceStats>& after = dp_.stats().devices;
    for (std::size_t d = 0; d < std::min(after.size(), step.devices.size()); ++d) {
      step.devices[d].optimizer_s += after[d].optimizer_s - before[d].optimizer_s;
      step.devices[d].wait_s += after[d].wait_s - before[d].wait_s;
    }
  }
  std::string reduction() const override { return dp_.reduction(); }

 private:
  // What the accounting calls each replica: cpu:N, cuda:I, or cuda:I[k] for the k-th of several
  // replicas on one GPU.
  static std::vector<std::string> replica_labels(const std::vector<Device>& devices) {
    std::vector<std::string> labels;
    for (std::size_t d = 0; d < devices.size(); ++d) {
      const Device& device = devices[d];
      if (device.is_cpu()) {
        labels.push_back("cpu:" + std::to_string(device.index));
        continue;
      }
      const auto same = [&](const Device& other) { return other == device; };
      const auto before = std::count_if(devices.begin(), devices.begin() + d, same);
      const bool shared = std::count_if(devices.begin(), devices.end(), same) > 1;
      std::string label = device.str();
      if (shared) label += '[' + std::to_string(before) + ']';
      labels.push_back(std::move(label));
    }
    return labels;
  }

  nn::DataParallel dp_;
  nn::CrossEntropyLoss criterion_;
  std::int64_t accumulate_;
  Precision precision_;
  std::vector<std::string> replica_labels_;
};

}  // namespace

std::unique_ptr<StepRunner> make_step_runner(std::shared_ptr<nn::Module> model,
                                             const DeviceLayout& layout,
                                             const nn::CrossEntropyLoss& criterion,
                                             std::function<std::shared_ptr<nn::Module>()> factory,
                                             const RunnerOptions& options) {
  TANDEM_CHECK(!layout.devices.empty(), "make_step_runner: no devices");
  model->to(layout.devices.front());
  if (layout.devices.size() == 1) {
    TANDEM_CHECK(options.split.kind != SplitKind::Weighted, "--split: ",
                 split_name(options.split), " gives proportions, but there is one device");
    if (options.threads > 0) parallel::set_up_this_thread({.threads = options.threads});
    if (options.cuda_graphs) {
      TANDEM_CHECK(options.accumulate == 1, "--cuda-graphs: a graph replays one whole step, but "
                   "--accumulate is ", options.accumulate);
      return std::make_unique<CudaGraphRunner>(std::move(model), layout.devices.front(), criterion,
                                               options.precision, options.note);
    }
    return std::make_unique<SingleDeviceRunner>(std::move(model), layout.devices.front(), criterion,
                                                options.accumulate, options.precision);
  }
  TANDEM_CHECK(!options.cuda_graphs, "--cuda-graphs: graphs replay one GPU's step, but --devices "
               "gives ", layout.describe());
  TANDEM_CHECK(factory != nullptr, "make_step_runner: several devices need a replica factory");
  return std::make_unique<DataParallelRunner>(std::move(model), layout, std::move(factory),
                                              criterion, options);
}

namespace {

// The devices of the CPU run a checkpoint resumes ("cpu", "cpu:0,cpu:1"), or none: no checkpoint,
// or one written on GPUs (auto on this machine has none: it picks as for a new run, and the resume
// says what changed).
std::optional<std::string> resumed_cpu_devices(const ResolvedConfig& resolved) {
  if (!resolved.checkpoint) return std::nullopt;
  const TrainState state = parse_state(resolved.checkpoint->contents.state_json,
                                       "checkpoint '" + resolved.checkpoint->path + "'");
  if (state.devices != "cpu" && !state.devices.starts_with("cpu:")) return std::nullopt;
  return state.devices;
}

// A checkpoint's device description ("cpu", "cpu:0,cpu:1", "cuda:0,cuda:1") as a layout.
DeviceLayout layout_from_description(const std::string& description) {
  if (!description.starts_with("cpu:")) return parse_devices(description);
  const auto replicas = std::count(description.begin(), description.end(), ',') + 1;
  return parse_devices("cpu:" + std::to_string(replicas));
}

}  // namespace

// ---- config ----

ResolvedConfig resolve_config(const TrainRequest& request, Console& console) {
  TrainConfig probe;
  apply_request(probe, request);
  ResolvedConfig resolved;
  std::string run_dir;
  if (!probe.resume.empty()) {
    resolved.checkpoint = find_resume_checkpoint(probe, console, run_dir);
    if (!resolved.checkpoint) {
      console.note("--resume auto: no checkpoint to resume; starting from the beginning");
    }
  }
  TrainConfig config;
  if (resolved.checkpoint) {
    const TrainState state = parse_state(resolved.checkpoint->contents.state_json,
                                         "checkpoint '" + resolved.checkpoint->path + "'");
    apply_json(config, state.config.dump(), "checkpoint '" + resolved.checkpoint->path + "' config");
    config.out.clear();
    apply_request(config, request);
    TANDEM_CHECK(config.model == state.model, "--resume: checkpoint '", resolved.checkpoint->path,
                 "' was written by model '", state.model, "', not '", config.model, "'");
    if (config.out.empty()) config.out = run_dir;
  } else {
    config = probe;
  }
  if (config.out.empty()) config.out = default_run_path();
  validate(config);
  resolved.config = std::move(config);
  return resolved;
}

// ---- the run ----

TrainOutcome run_training(const TrainRequest& request, Console& console) {
  ResolvedConfig resolved = resolve_config(request, console);
  // Under a launcher (tandem launch, mpirun, srun): join the other processes; rank 0's run
  // directory is everyone's, and rank 0 alone writes into it.
  const Job job = join_job(std::chrono::milliseconds(
      static_cast<std::int64_t>(resolved.config.comm_timeout * 1000)));
  resolved.config.out = agree_on(job, resolved.config.out);
  const TrainConfig& c = resolved.config;
  const bool deterministic = c.determinism == Determinism::Deterministic;
  // The kernels' fastest algorithms unless the run must be bit-identical (cuDNN's atomic-add
  // convolution gradients sum in a varying order), for this run only.
  const ops::DeterministicAlgorithms algorithms(deterministic);
  TANDEM_CHECK(!(job.distributed() && c.cuda_graphs), "--cuda-graphs: not under a multi-process "
               "launcher (", job.size(), " processes): the gradients cross the processes from hooks "
               "during the backward, which a graph cannot replay");
  TANDEM_CHECK(!(job.distributed() && c.sync_batchnorm), "--sync-batchnorm: batch-norm statistics "
               "are synchronised over the replicas of one process only, and this run has ",
               job.size(), " processes; leave it out (each process then normalises over its own "
               "share of the batch), or train with one process and --devices cpu:N");

  // devices (--devices auto without GPUs is settled below, once the model is known)
  DeviceLayout layout = parse_devices(c.devices);
  std::string auto_reason =
      job.distributed() ? one_gpu_per_process(job.local_rank, c.devices, layout, cuda_device_count())
                        : "";
  // One GPU per process: each rank trains on its own cuda:I, so checkpoints (written by rank 0,
  // resumed by every rank) name the arrangement rather than rank 0's GPU.
  const bool gpu_per_process = !auto_reason.empty();
  const int cores = static_cast<int>(parallel::available_cpus().size());
  bool measure_auto = false;
  if (c.devices == "auto" && !layout.devices.front().is_cpu() && auto_reason.empty()) {
    auto_reason = layout.devices.size() == 1 ? "auto: the GPU"
                                             : "auto: every GPU, one replica each";
  }
  if (c.devices == "auto" && layout.devices.front().is_cpu()) {
    if (job.distributed()) {
      auto_reason = "auto: one CPU device per process (" + std::to_string(job.size()) +
                    " processes)";
    } else if (const std::optional<std::string> cpu_run = resumed_cpu_devices(resolved)) {
      layout = layout_from_description(*cpu_run);
      auto_reason = "auto: as the resumed run";
    } else if (c.threads == 0 && cores > 1) {
      if (deterministic) {
        // A measured choice would make the arithmetic (hence the weights) depend on timing.
        auto_reason = "auto: one device, not measured under --deterministic";
      } else {
        measure_auto = true;
      }
    }
  }
  auto devices_stage = [&] {
    std::string detail = layout.describe();
    if (layout.devices.front().is_cpu()) {
      const CpuInfo cpu = read_cpu_info();
      detail += " (" + (cpu.model.empty() ? std::string("CPU") : cpu.model) + ", " +
                std::to_string(cpu.logical_cores) + " cores)";
      if (cuda_device_count() == 0) detail += "; no GPU: " + cuda_unavailable_reason();
    }
    if (!auto_reason.empty()) detail += "; " + auto_reason;
    console.stage("devices", detail);
  };
  if (!measure_auto) devices_stage();

  // model (its input shape comes from the training data)
  const ModelKind kind = parse_model_kind(c.model);
  const std::shared_ptr<const data::Dataset> train_set = data::parse_data_spec(c.data, data::Split::Train);
  TANDEM_CHECK(train_set->size() > 0, "--data ", c.data, ": the training set is empty");
  const Shape sample_shape = train_set->get(0).data.shape();
  const InputSpec input{sample_shape, train_set->num_classes()};
  manual_seed(c.seed);
  const std::shared_ptr<nn::Module> model = make_model(kind, input);
  if (measure_auto) {
    const AutoDeviceChoice choice =
        choose_cpu_layout({.make_model = [kind, input]() { return make_model(kind, input); },
                           .sample_shape = sample_shape,
                           .classes = input.classes,
                           .batch_size = std::max<std::int64_t>(1, c.batch_size / c.accumulate),
                           .cores = cores,
                           .criterion = nn::CrossEntropyLoss({.label_smoothing = c.label_smoothing}),
                           .precision = c.precision});
    layout = choice.layout;
    auto_reason = "auto: " + choice.reason;
    devices_stage();
  }
  console.stage("model", c.model + " for " + shape_text(sample_shape) + " input, " +
                             std::to_string(input.classes) + " classes, " +
                             std::to_string(model->parameter_count()) + " parameters");

  // data
  const std::shared_ptr<const data::Dataset> test_set = data::parse_data_spec(c.data, data::Split::Test);
  TANDEM_CHECK(test_set->size() > 0, "--data ", c.data, ": the test set is empty");
  TANDEM_CHECK(test_set->get(0).data.shape() == sample_shape, "--data ", c.data,
               ": test samples have shape ", to_string(test_set->get(0).data.shape()),
               " but training samples ", to_string(sample_shape));
  // Several processes load their shards, unless --split shares each global batch among them.
  const bool rank_split = splits_ranks(job, c.split, layout.devices.size());
  const bool sharded = job.distributed() && !rank_split;
  // --workers auto: more loader threads when a GPU trains in a process of its own.
  bool gpu_trains = false;
  for (const Device& d : layout.devices) gpu_trains = gpu_trains || d.is_cuda();
  const std::int64_t workers = loader_workers(c.workers, gpu_trains && !job.distributed(),
                                              read_cpu_info().logical_cores);
  // One GPU: the loader's workers copy each batch there ahead of its step, on the copy stream.
  const Device batches_on = layout.devices.size() == 1 && layout.devices.front().is_cuda() &&
                                    !rank_split
                                ? layout.devices.front()
                                : kCPU;
  data::DataLoader loader(train_set, {.batch_size = sharded ? local_batch_size(job, c.batch_size)
                                                            : c.batch_size,
                                      .shuffle = !sharded,
                                      .num_workers = static_cast<int>(workers),
                                      .device = batches_on,
                                      .seed = c.seed,
                                      .transforms = data::default_transforms(c.data, c.normalize),
                                      .sampler = sharded ? shard_sampler(job, train_set->size())
                                                         : nullptr});
  data::DataLoader test_loader(test_set, {.batch_size = std::max(c.batch_size, kEvalBatch),
                                          .num_workers = static_cast<int>(workers),
                                          .device = batches_on,
                                          .transforms = data::default_transforms(c.data, c.normalize)});
  const std::int64_t steps_per_epoch = loader.size();
  const std::int64_t all_steps = steps_per_epoch * c.epochs;
  const std::int64_t total_steps = c.max_steps > 0 ? std::min(c.max_steps, all_steps) : all_steps;
  console.stage("data", c.data + ": " + std::to_string(train_set->size()) + " training and " +
                            std::to_string(test_set->size()) + " test samples, batch " +
                            std::to_string(c.batch_size) + ", " + std::to_string(steps_per_epoch) +
                            " steps per epoch, " + std::to_string(workers) + " loader workers" +
                            (c.workers == kAutoWorkers ? " (auto)" : "") +
                            (batches_on.is_cuda() ? ", each batch copied to " + batches_on.str() +
                                                        " ahead of its step (copy stream)"
                                                  : ""));

  // optimizer, schedule, runner
  nn::CrossEntropyLoss criterion({.label_smoothing = c.label_smoothing});
  RunnerOptions options = runner_options(c);
  if (rank_split) options.split = {};  // the split is the ranks', each of one device
  // A multi-process run averages the gradients across the processes, bucket by bucket.
  const int devices = static_cast<int>(layout.devices.size());
  const int threads_per_device = c.threads > 0   ? static_cast<int>(c.threads)
                                 : devices > 1 ? std::max(1, cores / devices)
                                               : omp_get_max_threads();
  const int compute_threads = devices * threads_per_device;
  const bool overlap = overlaps_backward(!layout.devices.front().is_cpu(), compute_threads, cores);
  options.note = [&console](const std::string& text) { console.warning(text); };
  // GPU gradients cross the processes through NCCL where each rank has a GPU of its own.
  const GpuGradientPath gpu_path = gpu_gradient_path(job, layout, c.gpu_reduction, deterministic);
  if (!gpu_path.reason.empty()) console.note(gpu_path.reason);
  const auto cross = prepare_reduction(job, *model, layout.devices.size(), overlap, options,
                                       gpu_path.nccl.get());
  std::unique_ptr<StepRunner> runner =
      make_step_runner(model, layout, criterion, [kind, input]() { return make_model(kind, input); },
                       options);
  if (cross) {
    runner = make_distributed_runner(
        std::move(runner), job, *model, cross, [] { return static_cast<int>(g_stop_signal); },
        rank_split ? c.split : SplitSetting{});
  }
  std::unique_ptr<optim::Optimizer> optimizer = make_optimizer(c, model->parameters());
  std::unique_ptr<optim::LRScheduler> schedule =
      make_schedule(c, *optimizer, steps_per_epoch, total_steps);

  // What checkpoints say the run trained on (and a resume compares): the same on every rank.
  const std::string devices_text =
      gpu_per_process ? "one GPU per process (" + std::to_string(job.size()) + " processes)"
                      : layout.describe();

  // resume
  std::int64_t step = 0;
  EpochTotals totals;
  if (resolved.checkpoint) {
    const io::FoundCheckpoint& found = *resolved.checkpoint;
    const std::string where = "checkpoint '" + found.path + "'";
    const TrainState state = parse_state(found.contents.state_json, where);
    if (state.devices != devices_text) {
      TANDEM_CHECK(!deterministic, "--deterministic: ", where, " was written on devices ",
                   state.devices, ", not ", devices_text,
                   "; a bit-identical resume needs the same devices");
      console.warning(where + " was written on devices " + state.devices + "; continuing on " +
                      devices_text);
    }
    try {
      model->load_state_dict(found.contents.model);
      optimizer->load_state_dict(saved_state_from(state.optimizer, found.contents.state_tensors,
                                                  "optimizer."));
      if (schedule) {
        TANDEM_CHECK(!state.scheduler.is_null(), "it has no learning-rate schedule state");
        schedule->load_state_dict(saved_state_from(state.scheduler, {}, ""));
      }
      loader.load_state(state.loader);
    } catch (const Error& e) {
      throw Error(where + " does not fit this run: " + e.what());
    }
    default_generator().set_state(state.generator);
    step = state.step;
    totals = state.epoch;
    console.stage("resume", "from " + found.path + " at step " + std::to_string(step) + " (epoch " +
                                std::to_string(state.loader.epoch + 1) + ", batch " +
                                std::to_string(state.loader.batch) + ")");
  }

  // run directory: written only now that everything has been checked
  const bool writer = job.writes_files();
  const RunDir run = writer ? make_run_dir(c.out) : RunDir{c.out};
  if (writer) write_text_atomic(run.config(), to_json(c));
  if (writer && resolved.checkpoint) truncate_metrics_after(run.metrics(), step);
  std::optional<MetricsWriter> metrics;
  if (writer) {
    metrics.emplace(run.metrics(), resolved.checkpoint ? MetricsOpen::Append : MetricsOpen::Truncate);
  }
  if (metrics) metrics->write(RunMetrics{.step = step, .time = report::unix_time(), .model = c.model,
                           .parameters = model->parameter_count(), .data = c.data,
                           .input = shape_text(sample_shape), .classes = input.classes,
                           .train_samples = train_set->size(), .test_samples = test_set->size(),
                           .layout = layout.describe(),
                           .device_count = static_cast<std::int64_t>(layout.devices.size()),
                           .ranks = job.size(), .batch_size = c.batch_size, .epochs = c.epochs,
                           .steps_per_epoch = steps_per_epoch, .total_steps = total_steps,
                           .optimizer = optimizer_name(c.optimizer), .lr = optimizer->lr(),
                           .schedule = schedule_name(c.schedule)});
  std::optional<RunReporter> reporter;
  if (writer) reporter.emplace(run, c.tensorboard, console);

  const Json config_json = Json::parse(to_json(c));
  data::LoaderState position = loader.state();
  auto save_checkpoint = [&](const data::LoaderState& at) {
    TrainState s;
    s.model = c.model;
    s.step = step;
    s.loader = at;
    s.generator = default_generator().state();
    const optim::SavedState opt_state = optimizer->state_dict();
    s.optimizer = saved_state_json(opt_state);
    s.scheduler = schedule ? saved_state_json(schedule->state_dict()) : Json(nullptr);
    s.devices = devices_text;
    s.config = config_json;
    s.epoch = totals;
    io::CheckpointContents contents;
    contents.model = model->state_dict();
    for (const auto& [name, t] : opt_state.tensors) contents.state_tensors.emplace_back("optimizer." + name, t);
    contents.state_json = state_json_text(s);
    if (!writer) return std::string();
    const std::string path = io::write_checkpoint(run.checkpoints(), step, contents);
    io::prune_checkpoints(run.checkpoints(), c.keep_checkpoints);
    return path;
  };
  auto run_eval = [&]() {
    const AutocastGuard autocast(c.precision);  // evaluated as trained
    return evaluate(*model, test_loader, input.classes, layout.devices.front());
  };

  console.stage("train", std::to_string(total_steps - step) + " steps to go of " +
                             std::to_string(total_steps) + " (" + std::to_string(c.epochs) +
                             " epochs of " + std::to_string(steps_per_epoch) + "), " +
                             optimizer_name(c.optimizer) + " lr " + fixed(optimizer->lr(), 6) +
                             precision_note(c.precision, layout) +
                             (runner->reduction() == "nccl"
                                  ? ", gradients summed by NCCL on the GPUs during the backward"
                                  : "") +
                             (c.cuda_graphs ? ", CUDA graphs (each batch shape's second step is "
                                              "captured, then replayed)"
                                            : "") +
                             ", out " + run.path +
                             (!cross ? ""
                              : overlap
                                  ? "; gradients cross the processes while the backward runs"
                                  : "; gradients cross the processes after the backward (" +
                                        std::to_string(compute_threads) +
                                        " compute threads, none of this process's " +
                                        std::to_string(cores) + " CPUs left to overlap)") +
                             (rank_split ? "; each global batch shared among the processes: " +
                                               split_name(c.split)
                                         : ""));
  // The GPUs' own figures, sampled through NVML while the steps run (rank 0's GPUs).
  std::optional<cuda::Nvml> nvml;
  std::unique_ptr<GpuUsageSampler> gpu_usage;
  if (writer) {
    std::vector<GpuUsageSampler::Gpu> gpus;
    for (const Device& d : layout.devices) {
      const bool seen = std::any_of(gpus.begin(), gpus.end(), [&](const auto& g) {
        return g.device == d.str();
      });
      if (d.is_cuda() && !seen) gpus.push_back({d.str(), cuda::gpu_info(d.index).pci_bus_id});
    }
    if (!gpus.empty()) {
      nvml.emplace();
      if (nvml->available()) {
        gpu_usage = std::make_unique<GpuUsageSampler>(
            std::move(gpus), [&nvml](const std::string& bus) { return nvml->read(bus); },
            std::chrono::milliseconds(500));
        console.stage("gpu usage", "NVML readings every 0.5 s into " + run.metrics());
      } else {
        console.note("gpu usage: not measured (NVML: " + nvml->reason() + ")");
      }
    }
  }

  StopSignals signals;
  TrainOutcome outcome;
  outcome.run_dir = run.path;
  std::optional<EvalResult> last_eval;
  constexpr std::size_t kWindow = 20;
  std::deque<std::pair<std::int64_t, double>> window;  // (samples, seconds) of recent steps
  bool stopped = false;
  bool checkpoint_is_current = false;

  while (step < total_steps && !stopped) {
    auto last = Clock::now();
    auto fetch = last;  // when the loop went for the next batch
    for (auto it = loader.begin(); it != loader.end(); fetch = Clock::now(), ++it) {
      const data::Batch& batch = *it;
      const double data_s = seconds_since(fetch);
      const double lr = optimizer->lr();
      optimizer->zero_grad();
      StepResult r = runner->forward_backward(batch);
      TANDEM_CHECK(std::isfinite(r.loss), "training diverged: the loss is ", r.loss, " at step ",
                   step + 1, " (try a lower --lr)");
      runner->optimizer_step(*optimizer, r);
      if (schedule) schedule->step();
      ++step;
      checkpoint_is_current = false;
      position = loader.state();
      const double step_seconds = seconds_since(last);
      last = Clock::now();
      totals.add(r, step_seconds, data_s);

      const double rate = step_seconds > 0 ? static_cast<double>(r.samples) / step_seconds : 0;
      // The display's figures: over the last kWindow steps.
      window.emplace_back(r.samples, step_seconds);
      if (window.size() > kWindow) window.pop_front();
      double window_samples = 0, window_seconds = 0;
      for (const auto& [n, t] : window) {
        window_samples += static_cast<double>(n);
        window_seconds += t;
      }
      const double smoothed_step_seconds = window_seconds / static_cast<double>(window.size());
      const double smoothed_rate = window_seconds > 0 ? window_samples / window_seconds : 0;
      const StepMetrics sm{.step = step, .epoch = position.epoch + 1, .loss = r.loss, .lr = lr,
                           .images_per_s = rate, .devices = r.devices, .seconds = step_seconds,
                           .data_s = data_s,
                           .accuracy = fraction(r.correct, r.samples),
                           .time = report::unix_time()};
      if (metrics) metrics->write(sm);
      if (metrics && gpu_usage) {
        for (const GpuSample& sample : gpu_usage->take()) metrics->write(sample, step);
      }
      if (reporter) reporter->step(sm);
      console.progress({.step = step,
                        .total_steps = total_steps,
                        .epoch = position.epoch + 1,
                        .epochs = c.epochs,
                        .batch = position.batch,
                        .batches = steps_per_epoch,
                        .loss = r.loss,
                        .lr = lr,
                        .images_per_s = smoothed_rate,
                        .eta_seconds = smoothed_step_seconds * static_cast<double>(total_steps - step)});

      const bool epoch_end = position.batch == steps_per_epoch;
      const bool run_end = step >= total_steps;
      if (epoch_end || run_end) {
        const std::int64_t epoch_number = position.epoch + 1;
        EpochMetrics em{.step = step, .epoch = epoch_number, .complete = epoch_end,
                        .loss = totals.samples ? totals.loss_sum / static_cast<double>(totals.samples) : 0,
                        .lr = lr,
                        .images_per_s = totals.seconds > 0 ? static_cast<double>(totals.samples) / totals.seconds : 0,
                        .seconds = totals.seconds, .devices = totals.devices,
                        .train_accuracy = fraction(totals.correct, totals.samples),
                        .data_s = totals.data_s};
        if (run_end || epoch_number % c.eval_every == 0) {
          console.stage("evaluate", "epoch " + std::to_string(epoch_number) + " on " +
                                        std::to_string(test_set->size()) + " test samples");
          last_eval = run_eval();
          em.test_loss = last_eval->loss;
          em.test_accuracy = last_eval->accuracy;
          em.confusion = last_eval->confusion;
          console.note("train loss " + fixed(em.loss, 4) + ", test loss " + fixed(last_eval->loss, 4) +
                       ", test accuracy " + fixed(100 * last_eval->accuracy, 2) + "%, " +
                       fixed(em.images_per_s, 0) + " img/s");
        }
        em.time = report::unix_time();
        if (metrics) metrics->write(em);
        if (reporter) reporter->epoch(em);
        totals = EpochTotals{};
        if (c.checkpoint_every == 0 || run_end) {
          save_checkpoint(position);
          checkpoint_is_current = true;
        }
      }
      if (c.checkpoint_every > 0 && step % c.checkpoint_every == 0 && !checkpoint_is_current) {
        save_checkpoint(position);
        checkpoint_is_current = true;
      }
      if (request.kill_at_step > 0 && step == request.kill_at_step && test_kill_applies(job)) {
        std::raise(SIGKILL);
      }
      // Every rank stops after the same step (a signal reaches them at different moments): the
      // ranks' requests rode in the step's reduction.
      const int requested = job.group ? r.stop_signal : signals.requested();
      if (requested != 0 && !run_end) {
        const int signal = requested;
        if (!checkpoint_is_current) save_checkpoint(position);
        console.stage("interrupted", std::string(signal == SIGINT ? "SIGINT" : "SIGTERM") +
                                         " after step " + std::to_string(step) +
                                         "; checkpoint written; continue with --resume " + run.path);
        outcome.status = RunStatus::Interrupted;
        outcome.signal = signal;
        stopped = true;
        break;
      }
      if (run_end) break;
    }
  }
  outcome.step = step;
  outcome.final_eval = last_eval;
  if (outcome.status == RunStatus::Interrupted) {
    if (reporter) reporter->finish();
    return outcome;
  }

  if (!last_eval) {  // a resumed run that had nothing left to do
    console.stage("evaluate", "on " + std::to_string(test_set->size()) + " test samples");
    last_eval = run_eval();
    outcome.final_eval = last_eval;
    console.note("test loss " + fixed(last_eval->loss, 4) + ", test accuracy " +
                 fixed(100 * last_eval->accuracy, 2) + "%");
  }
  if (gpu_usage) {
    for (const GpuUsageSummary& s : gpu_usage->summary()) console.note("gpu usage: " + describe(s));
  }
  console.stage("save", run.model());
  if (writer) {
    io::save_safetensors(run.model(), model->state_dict(), {{"format", "pt"}, {"model", c.model}});
  }
  if (reporter) reporter->finish();
  return outcome;
}

}  // namespace tandem::train
