// Training throughput of tandem on Fashion-MNIST for the reference models (seed CNN, CNN, MLP),
// printing one JSON line per epoch in the same form as ../shared/anchors/pytorch_fmnist.py, so
// bench/compare can put both side by side; or on any --data spec (synthetic:3x32x32:10:N for
// ResNet-8 on CIFAR-shaped data, against bench/pytorch_synthetic.py). The step goes through the
// trainer's step runner, as in `tandem train`: one device (cpu, cuda:0), or DataParallel replicas
// with --devices cpu:N or a list. A benchmark, not a test. Each line also gives startup_s: from the process's start (as the kernel records it) to
// the end of the first training step, less data_read_s, the time spent reading the dataset files.
// The loader is `tandem train`'s: --workers threads (default auto, as tandem train's: 2, or half the
// cores, 2 to 8, when a GPU trains) and, for one GPU, batches copied there ahead of their step.
// --warmup-steps N leaves the first N steps of the first epoch out of its images/s (as
// bench/pytorch_synthetic.py's --warmup), for steady-state rates.
// Usage: train_throughput [--model seed-cnn|cnn|mlp|resnet8] [--batch-size 64] [--epochs 1]
//                         [--max-steps N] [--threads N] [--devices cpu|cpu:N|cuda:0] [--seed 0]
//                         [--split even|auto|3:2] [--data fashion-mnist|SPEC]
//                         [--precision fp32|bf16] [--cuda-graphs on|off] [--workers auto|N]
//                         [--warmup-steps 0] [--eval on|off] [--deterministic on|off]
// --eval off skips the test-set evaluation after each epoch (test_accuracy is then -1);
// --deterministic on keeps the kernels to deterministic algorithms, as `tandem train` does with it.
#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "bench_flags.h"
#include "tandem/ops/determinism.h"
#include "tandem/tandem.h"
#include "tandem/train/config.h"
#include "tandem/train/devices.h"
#include "tandem/train/evaluate.h"
#include "tandem/train/graph_runner.h"
#include "tandem/train/models.h"
#include "tandem/train/trainer.h"

namespace tn = tandem;

// Seconds since this process started, from /proc (start time in clock ticks since boot against
// the uptime); -1 where /proc cannot say.
double seconds_since_process_start() {
  std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  double up = 0;
  if (!(uptime >> up)) return -1;
  // Field 22 (starttime) counts from the one after the ')' closing the command name (field 2).
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  for (int i = 3; i < 22 && rest >> field; ++i) {
  }
  unsigned long long start_ticks = 0;
  if (!(rest >> start_ticks)) return -1;
  return up - static_cast<double>(start_ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// With --cuda-graphs on: the graphs captured, their replays, and why graphs went off (if they did),
// as JSON fields (", \"graphs\": ..."); empty for other runners.
std::string graph_fields(const tn::train::StepRunner& runner) {
  const auto* graphed = dynamic_cast<const tn::train::CudaGraphRunner*>(&runner);
  if (graphed == nullptr) return "";
  std::string reason;
  for (char ch : graphed->off_reason()) {
    if (ch == '"' || ch == '\\') reason += '\\';
    reason += (ch == '\n' ? ' ' : ch);
  }
  return ", \"graphs\": " + std::to_string(graphed->graphs()) +
         ", \"replays\": " + std::to_string(graphed->replays()) + ", \"graphs_off\": \"" +
         reason + "\"";
}

int main(int argc, char** argv) {
  std::string model_name = "seed-cnn", devices = "cpu", split = "even", data = "fashion-mnist";
  std::string precision_name = "fp32", cuda_graphs = "off", eval_flag = "on", deterministic = "off",
              workers_flag = "auto";
  long batch_size = 64, epochs = 1, max_steps = -1, threads = 0, seed = 0, warmup_steps = 0;
  CLI::App app{"tandem's training throughput, one JSON line per epoch", "train_throughput"};
  const auto on_off = CLI::IsMember({"on", "off"});
  app.add_option("--model", model_name, "seed-cnn, cnn, mlp or resnet8");
  app.add_option("--batch-size", batch_size)->check(at_least(1));
  app.add_option("--epochs", epochs)->check(at_least(1));
  app.add_option("--max-steps", max_steps, "stop after N steps (-1: whole epochs)");
  app.add_option("--threads", threads, "oneDNN/OpenMP threads (0: the default)")
      ->check(at_least(0));
  app.add_option("--seed", seed);
  app.add_option("--devices", devices, "cpu, cpu:N, cuda:0 or a list");
  app.add_option("--split", split, "even, auto or proportions such as 3:2");
  app.add_option("--data", data, "fashion-mnist or a data spec");
  app.add_option("--precision", precision_name)->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--cuda-graphs", cuda_graphs)->check(on_off);
  app.add_option("--workers", workers_flag, "loader worker threads, or auto")
      ->check(CLI::IsMember({"auto"}) | at_least(0));
  app.add_option("--eval", eval_flag)->check(on_off);
  app.add_option("--deterministic", deterministic)->check(on_off);
  app.add_option("--warmup-steps", warmup_steps)->check(at_least(0));
  CLI11_PARSE(app, argc, argv);
  long workers = workers_flag == "auto" ? tn::train::kAutoWorkers : std::stol(workers_flag);
  const tn::ops::DeterministicAlgorithms algorithms(deterministic == "on");
  const tn::Precision precision =
      precision_name == "bf16" ? tn::Precision::BFloat16 : tn::Precision::Float32;
  if (threads > 0) omp_set_num_threads(static_cast<int>(threads));
  tn::manual_seed(static_cast<std::uint64_t>(seed));

  std::shared_ptr<tn::nn::Module> model;
  std::unique_ptr<tn::train::StepRunner> runner;
  tn::train::DeviceLayout layout;
  std::shared_ptr<const tn::data::Dataset> train, test;
  tn::train::InputSpec input;
  const auto read_start = std::chrono::steady_clock::now();
  try {
    train = tn::data::parse_data_spec(data, tn::data::Split::Train);
    test = tn::data::parse_data_spec(data, tn::data::Split::Test);
    input = {.sample_shape = train->get(0).data.shape(), .classes = train->num_classes()};
  } catch (const tn::Error& e) {
    std::fprintf(stderr, "train_throughput: %s\n", e.what());
    return 2;
  }
  const double data_read_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - read_start).count();
  try {
    // The same registry `tandem train --model` uses (the anchor script's architectures).
    const tn::train::ModelKind kind = tn::train::parse_model_kind(model_name);
    model = tn::train::make_model(kind, input);
    layout = tn::train::parse_devices(devices);
    runner = tn::train::make_step_runner(
        model, layout, tn::nn::CrossEntropyLoss(),
        [kind, input] { return tn::train::make_model(kind, input); },
        {.split = tn::train::parse_split(split),
         .threads = static_cast<int>(threads),
         .precision = precision,
         .cuda_graphs = cuda_graphs == "on"});
  } catch (const tn::Error& e) {
    std::fprintf(stderr, "train_throughput: %s\n", e.what());
    return 2;
  }

  double startup_s = -1;
  // As the trainer: one GPU gets its batches from the loader's workers, copied ahead.
  const tn::Device batches_on = layout.devices.size() == 1 && layout.devices.front().is_cuda()
                                    ? layout.devices.front()
                                    : tn::kCPU;
  bool gpu_trains = false;
  for (const tn::Device& d : layout.devices) gpu_trains = gpu_trains || d.is_cuda();
  workers = tn::train::loader_workers(workers, gpu_trains, tn::train::read_cpu_info().logical_cores);
  tn::data::DataLoader loader(train, {.batch_size = batch_size, .shuffle = true,
                                      .num_workers = static_cast<int>(workers),
                                      .device = batches_on,
                                      .seed = static_cast<std::uint64_t>(seed),
                                      .transforms = tn::data::default_transforms(data, /*normalize=*/false)});
  tn::data::DataLoader test_loader(test, {.batch_size = 1000,
                                          .num_workers = static_cast<int>(workers),
                                          .device = batches_on,
                                          .transforms = tn::data::default_transforms(data, /*normalize=*/false)});
  const double lr = model_name == "seed-cnn" ? 0.001 : 0.01;
  tn::optim::SGD opt(model->parameters(), {.lr = lr, .momentum = 0.9});

  long step = 0;
  for (long epoch = 0; epoch < epochs; ++epoch) {
    model->train();
    long seen = 0, timed = 0;
    double total = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (const tn::data::Batch& batch : loader) {
      opt.zero_grad();
      tn::train::StepResult r = runner->forward_backward(batch);
      runner->optimizer_step(opt, r);
      seen += r.samples;
      total += r.loss * static_cast<double>(r.samples);
      if (step == 0) startup_s = seconds_since_process_start() - data_read_s;
      ++step;
      if (epoch == 0 && step == warmup_steps) {
        t0 = std::chrono::steady_clock::now();  // the loss read above waited for the GPU
      } else if (epoch > 0 || step > warmup_steps) {
        timed += r.samples;
      }
      if (step == max_steps) break;
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double accuracy = -1;
    if (eval_flag == "on") {
      const tn::AutocastGuard autocast(precision);
      accuracy =
          tn::train::evaluate(*model, test_loader, input.classes, layout.devices.front()).accuracy;
    }
    std::printf("{\"impl\": \"tandem\", \"model\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", "
                "\"cuda_graphs\": %s, \"batch_size\": %ld, "
                "\"threads\": %d, \"epoch\": %ld, \"train_images_per_s\": %.1f, \"epoch_s\": %.2f, "
                "\"loss\": %.4f, \"test_accuracy\": %.4f, \"startup_s\": %.3f, \"data_read_s\": %.3f, "
                "\"workers\": %ld, \"warmup_steps\": %ld%s}\n",
                model_name.c_str(), devices.c_str(), precision_name.c_str(),
                cuda_graphs == "on" ? "true" : "false", batch_size,
                threads > 0 ? static_cast<int>(threads) : omp_get_max_threads(), epoch + 1,
                static_cast<double>(timed) / dt, dt,
                total / static_cast<double>(seen), accuracy, startup_s,
                data_read_s, workers, epoch == 0 ? warmup_steps : 0L, graph_fields(*runner).c_str());
    std::fflush(stdout);
    if (step == max_steps) break;
  }
  return 0;
}
