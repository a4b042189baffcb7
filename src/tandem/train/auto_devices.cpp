// The --devices auto measurement on the CPU: two short trials, the faster wins.
#include "tandem/train/auto_devices.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <thread>

#include "tandem/base/rng.h"
#include "tandem/optim/sgd.h"
#include "tandem/parallel/replica_threads.h"
#include "tandem/tensor/factories.h"
#include "tandem/train/trainer.h"

namespace tandem::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string rate_text(double images_per_s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", images_per_s);
  return buf;
}

// Training steps of a fresh model on `layout` with `threads` per device, on a fresh thread.
AutoDeviceTrial run_trial(const AutoDeviceRequest& req, DeviceLayout layout, int threads) {
  AutoDeviceTrial trial{.layout = std::move(layout), .threads = threads};
  std::exception_ptr error;
  std::thread worker([&] {
    try {
      parallel::set_up_this_thread({.threads = threads});
      Generator g(12345);
      Shape shape = req.sample_shape;
      shape.insert(shape.begin(), req.batch_size);
      const data::Batch batch{.data = randn(shape, {}, &g),
                              .target = randint(0, req.classes, {req.batch_size},
                                                {.dtype = DType::Int64}, &g)};
      const std::shared_ptr<nn::Module> model = req.make_model();
      std::unique_ptr<StepRunner> runner = make_step_runner(
          model, trial.layout, req.criterion, req.make_model,
          {.threads = threads, .precision = req.precision});
      optim::SGD optimizer(model->parameters(), {.lr = 1e-3, .momentum = 0.9});
      auto step = [&] {
        optimizer.zero_grad();
        StepResult r = runner->forward_backward(batch);
        runner->optimizer_step(optimizer, r);
      };
      for (int i = 0; i < req.warmup_steps; ++i) step();
      const auto start = Clock::now();
      double seconds = 0;
      while (trial.steps < req.max_steps && (trial.steps == 0 || seconds < req.max_seconds)) {
        step();
        ++trial.steps;
        seconds = std::chrono::duration<double>(Clock::now() - start).count();
      }
      trial.images_per_s =
          static_cast<double>(req.batch_size * trial.steps) / std::max(seconds, 1e-9);
    } catch (...) {
      error = std::current_exception();
    }
  });
  worker.join();
  if (error) std::rethrow_exception(error);
  return trial;
}

std::string describe_trial(const AutoDeviceTrial& t) {
  const std::size_t n = t.layout.devices.size();
  const std::string who = n == 1 ? std::string("cpu") : "cpu:" + std::to_string(n);
  return who + " (" + std::to_string(n) + (n == 1 ? " device" : " replicas") + " x " +
         std::to_string(t.threads) + (t.threads == 1 ? " thread" : " threads") + "): " +
         rate_text(t.images_per_s) + " img/s";
}

}  // namespace

AutoDeviceChoice choose_cpu_layout(const AutoDeviceRequest& req) {
  TANDEM_CHECK(req.cores > 1, "--devices auto: choosing a CPU layout needs more than one core");
  TANDEM_CHECK(req.make_model != nullptr && req.batch_size >= 1 && req.classes >= 1,
               "--devices auto: incomplete measurement request");
  // Trial models are initialised from the default generator: put it back afterwards, so that the
  // run itself is the same whichever layout wins.
  const GeneratorState saved = default_generator().state();
  AutoDeviceChoice choice;
  try {
    choice.one_device = run_trial(req, DeviceLayout{{kCPU}}, req.cores);
    DeviceLayout replicas;
    for (int i = 0; i < req.cores; ++i) replicas.devices.emplace_back(DeviceType::CPU, i);
    choice.replicas = run_trial(req, replicas, 1);
  } catch (...) {
    default_generator().set_state(saved);
    throw;
  }
  default_generator().set_state(saved);
  const bool replicas_win = choice.replicas.images_per_s > choice.one_device.images_per_s;
  const AutoDeviceTrial& won = replicas_win ? choice.replicas : choice.one_device;
  const AutoDeviceTrial& lost = replicas_win ? choice.one_device : choice.replicas;
  choice.layout = won.layout;
  choice.threads = won.threads;
  choice.reason = "measured " + std::to_string(won.steps + lost.steps) + " steps at batch " +
                  std::to_string(req.batch_size) +
                  (req.precision == Precision::BFloat16 ? " in bf16" : "") + ": " +
                  describe_trial(won) + " against " + describe_trial(lost);
  return choice;
}

}  // namespace tandem::train
