// The training run: config resolution, stages, the loop, checkpoints, resumption and signals.
#include "tandem/train/trainer.h"

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
#include "tandem/io/safetensors.h"
#include "tandem/optim/optim.h"
#include "tandem/parallel/data_parallel.h"
#include "tandem/train/models.h"
#include "tandem/train/run_dir.h"

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
struct EpochTotals {
  double loss_sum = 0;  // sum of loss * samples
  std::int64_t samples = 0;
  double seconds = 0;
  std::vector<DeviceFigures> devices;

  Json json() const {
    Json devs = Json::array();
    for (const DeviceFigures& d : devices) {
      devs.push_back(Json{{"device", d.device}, {"samples", d.samples}, {"seconds", d.seconds}});
    }
    return Json{{"loss_sum", loss_sum}, {"samples", samples}, {"seconds", seconds},
                {"devices", devs}};
  }
  static EpochTotals from(const Json& j) {
    EpochTotals t;
    t.loss_sum = j.at("loss_sum").get<double>();
    t.samples = j.at("samples").get<std::int64_t>();
    t.seconds = j.at("seconds").get<double>();
    for (const Json& d : j.at("devices")) {
      t.devices.push_back({d.at("device").get<std::string>(), d.at("samples").get<std::int64_t>(),
                           d.at("seconds").get<double>()});
    }
    return t;
  }
  void add(const StepResult& r, double step_seconds) {
    loss_sum += r.loss * static_cast<double>(r.samples);
    samples += r.samples;
    seconds += step_seconds;
    if (devices.size() != r.devices.size()) devices.assign(r.devices.size(), {});
    for (std::size_t i = 0; i < r.devices.size(); ++i) {
      devices[i].device = r.devices[i].device;
      devices[i].samples += r.devices[i].samples;
      devices[i].seconds += r.devices[i].seconds;
    }
  }
};

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

SingleDeviceRunner::SingleDeviceRunner(std::shared_ptr<nn::Module> model, Device device,
                                       nn::CrossEntropyLoss criterion)
    : model_(std::move(model)), device_(device), criterion_(std::move(criterion)) {}

StepResult SingleDeviceRunner::forward_backward(const data::Batch& batch) {
  const auto start = Clock::now();
  const Tensor loss = criterion_((*model_)(batch.data.to(device_)), batch.target.to(device_));
  loss.backward();
  StepResult r;
  r.loss = loss.to(kCPU).item();
  r.samples = batch.target.size(0);
  const std::string name = device_.is_cpu() ? std::string("cpu") : device_.str();
  r.devices.push_back({name, r.samples, seconds_since(start)});
  return r;
}

namespace {

// Several devices: nn::DataParallel splits each global batch over replicas (made by the model
// registry, so any registered model works) and reduces their gradients into the model's.
class DataParallelRunner final : public StepRunner {
 public:
  DataParallelRunner(std::shared_ptr<nn::Module> model, const DeviceLayout& layout,
                     std::function<std::shared_ptr<nn::Module>()> factory,
                     nn::CrossEntropyLoss criterion)
      : dp_(std::move(model), layout.devices, std::move(factory)),
        criterion_(std::move(criterion)) {}

  StepResult forward_backward(const data::Batch& batch) override {
    const nn::CrossEntropyLoss& criterion = criterion_;
    const nn::StepResult r = dp_.forward_backward(
        batch.data, batch.target,
        [&criterion](const Tensor& output, const Tensor& target) { return criterion(output, target); });
    StepResult out;
    out.loss = r.loss;
    out.samples = r.samples;
    for (const nn::DeviceStats& d : r.devices) {
      out.devices.push_back({d.device.is_cpu() ? "cpu:" + std::to_string(d.device.index) : d.device.str(),
                             d.samples, d.forward_s + d.backward_s + d.reduction_s});
    }
    return out;
  }

  void optimizer_step(optim::Optimizer& optimizer) override { dp_.step(optimizer); }

 private:
  nn::DataParallel dp_;
  nn::CrossEntropyLoss criterion_;
};

}  // namespace

std::unique_ptr<StepRunner> make_step_runner(std::shared_ptr<nn::Module> model,
                                             const DeviceLayout& layout,
                                             const nn::CrossEntropyLoss& criterion,
                                             std::function<std::shared_ptr<nn::Module>()> factory) {
  TANDEM_CHECK(!layout.devices.empty(), "make_step_runner: no devices");
  model->to(layout.devices.front());
  if (layout.devices.size() == 1) {
    return std::make_unique<SingleDeviceRunner>(std::move(model), layout.devices.front(), criterion);
  }
  TANDEM_CHECK(factory != nullptr, "make_step_runner: several devices need a replica factory");
  return std::make_unique<DataParallelRunner>(std::move(model), layout, std::move(factory),
                                              criterion);
}

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
  const TrainConfig& c = resolved.config;
  const bool deterministic = c.determinism == Determinism::Deterministic;

  // devices
  const DeviceLayout layout = parse_devices(c.devices);
  {
    std::string detail = layout.describe();
    if (layout.devices.front().is_cpu()) {
      const CpuInfo cpu = read_cpu_info();
      detail += " (" + (cpu.model.empty() ? std::string("CPU") : cpu.model) + ", " +
                std::to_string(cpu.logical_cores) + " cores)";
      if (!cuda_built()) detail += "; no GPU: built without CUDA";
    }
    console.stage("devices", detail);
  }

  // model (its input shape comes from the training data)
  const ModelKind kind = parse_model_kind(c.model);
  const std::shared_ptr<const data::Dataset> train_set = data::parse_data_spec(c.data, data::Split::Train);
  TANDEM_CHECK(train_set->size() > 0, "--data ", c.data, ": the training set is empty");
  const Shape sample_shape = train_set->get(0).data.shape();
  const InputSpec input{sample_shape, train_set->num_classes()};
  manual_seed(c.seed);
  const std::shared_ptr<nn::Module> model = make_model(kind, input);
  console.stage("model", c.model + " for " + shape_text(sample_shape) + " input, " +
                             std::to_string(input.classes) + " classes, " +
                             std::to_string(model->parameter_count()) + " parameters");

  // data
  const std::shared_ptr<const data::Dataset> test_set = data::parse_data_spec(c.data, data::Split::Test);
  TANDEM_CHECK(test_set->size() > 0, "--data ", c.data, ": the test set is empty");
  TANDEM_CHECK(test_set->get(0).data.shape() == sample_shape, "--data ", c.data,
               ": test samples have shape ", to_string(test_set->get(0).data.shape()),
               " but training samples ", to_string(sample_shape));
  data::DataLoader loader(train_set, {.batch_size = c.batch_size,
                                      .shuffle = true,
                                      .num_workers = static_cast<int>(c.workers),
                                      .seed = c.seed,
                                      .transforms = data::default_transforms(c.data)});
  data::DataLoader test_loader(test_set, {.batch_size = std::max(c.batch_size, kEvalBatch),
                                          .num_workers = static_cast<int>(c.workers),
                                          .transforms = data::default_transforms(c.data)});
  const std::int64_t steps_per_epoch = loader.size();
  const std::int64_t all_steps = steps_per_epoch * c.epochs;
  const std::int64_t total_steps = c.max_steps > 0 ? std::min(c.max_steps, all_steps) : all_steps;
  console.stage("data", c.data + ": " + std::to_string(train_set->size()) + " training and " +
                            std::to_string(test_set->size()) + " test samples, batch " +
                            std::to_string(c.batch_size) + ", " + std::to_string(steps_per_epoch) +
                            " steps per epoch, " + std::to_string(c.workers) + " loader workers");

  // optimizer, schedule, runner
  nn::CrossEntropyLoss criterion({.label_smoothing = c.label_smoothing});
  std::unique_ptr<StepRunner> runner = make_step_runner(
      model, layout, criterion, [kind, input]() { return make_model(kind, input); });
  std::unique_ptr<optim::Optimizer> optimizer = make_optimizer(c, model->parameters());
  std::unique_ptr<optim::LRScheduler> schedule =
      make_schedule(c, *optimizer, steps_per_epoch, total_steps);

  // resume
  std::int64_t step = 0;
  EpochTotals totals;
  if (resolved.checkpoint) {
    const io::FoundCheckpoint& found = *resolved.checkpoint;
    const std::string where = "checkpoint '" + found.path + "'";
    const TrainState state = parse_state(found.contents.state_json, where);
    if (state.devices != layout.describe()) {
      TANDEM_CHECK(!deterministic, "--deterministic: ", where, " was written on devices ",
                   state.devices, ", not ", layout.describe(),
                   "; a bit-identical resume needs the same devices");
      console.warning(where + " was written on devices " + state.devices + "; continuing on " +
                      layout.describe());
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
  const RunDir run = make_run_dir(c.out);
  write_text_atomic(run.config(), to_json(c));
  if (resolved.checkpoint) truncate_metrics_after(run.metrics(), step);
  MetricsWriter metrics(run.metrics(), resolved.checkpoint ? MetricsOpen::Append : MetricsOpen::Truncate);

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
    s.devices = layout.describe();
    s.config = config_json;
    s.epoch = totals;
    io::CheckpointContents contents;
    contents.model = model->state_dict();
    for (const auto& [name, t] : opt_state.tensors) contents.state_tensors.emplace_back("optimizer." + name, t);
    contents.state_json = state_json_text(s);
    const std::string path = io::write_checkpoint(run.checkpoints(), step, contents);
    io::prune_checkpoints(run.checkpoints(), c.keep_checkpoints);
    return path;
  };
  auto run_eval = [&]() { return evaluate(*model, test_loader, input.classes, layout.devices.front()); };

  console.stage("train", std::to_string(total_steps - step) + " steps to go of " +
                             std::to_string(total_steps) + " (" + std::to_string(c.epochs) +
                             " epochs of " + std::to_string(steps_per_epoch) + "), " +
                             optimizer_name(c.optimizer) + " lr " + fixed(optimizer->lr(), 6) +
                             ", out " + run.path);

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
    for (auto it = loader.begin(); it != loader.end(); ++it) {
      const data::Batch& batch = *it;
      const double lr = optimizer->lr();
      optimizer->zero_grad();
      const StepResult r = runner->forward_backward(batch);
      TANDEM_CHECK(std::isfinite(r.loss), "training diverged: the loss is ", r.loss, " at step ",
                   step + 1, " (try a lower --lr)");
      runner->optimizer_step(*optimizer);
      if (schedule) schedule->step();
      ++step;
      checkpoint_is_current = false;
      position = loader.state();
      const double step_seconds = seconds_since(last);
      last = Clock::now();
      totals.add(r, step_seconds);

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
      metrics.write(StepMetrics{.step = step, .epoch = position.epoch + 1, .loss = r.loss, .lr = lr,
                                .images_per_s = rate, .devices = r.devices});
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
                        .seconds = totals.seconds, .devices = totals.devices};
        if (run_end || epoch_number % c.eval_every == 0) {
          console.stage("evaluate", "epoch " + std::to_string(epoch_number) + " on " +
                                        std::to_string(test_set->size()) + " test samples");
          last_eval = run_eval();
          em.test_loss = last_eval->loss;
          em.test_accuracy = last_eval->accuracy;
          console.note("train loss " + fixed(em.loss, 4) + ", test loss " + fixed(last_eval->loss, 4) +
                       ", test accuracy " + fixed(100 * last_eval->accuracy, 2) + "%, " +
                       fixed(em.images_per_s, 0) + " img/s");
        }
        metrics.write(em);
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
      if (request.kill_at_step > 0 && step == request.kill_at_step) std::raise(SIGKILL);
      if (signals.requested() != 0 && !run_end) {
        const int signal = signals.requested();
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
  if (outcome.status == RunStatus::Interrupted) return outcome;

  if (!last_eval) {  // a resumed run that had nothing left to do
    console.stage("evaluate", "on " + std::to_string(test_set->size()) + " test samples");
    last_eval = run_eval();
    outcome.final_eval = last_eval;
    console.note("test loss " + fixed(last_eval->loss, 4) + ", test accuracy " +
                 fixed(100 * last_eval->accuracy, 2) + "%");
  }
  console.stage("save", run.model());
  io::save_safetensors(run.model(), model->state_dict(), {{"format", "pt"}, {"model", c.model}});
  return outcome;
}

}  // namespace tandem::train
