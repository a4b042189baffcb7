// `tandem train`: flags (each the same key as in a --config file) handed to train::run_training.
// With no flags it trains the seed CNN on Fashion-MNIST for 2 epochs on every available device.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "tandem/base/check.h"
#include "tandem/dist/env.h"
#include "tandem/train/trainer.h"

namespace tandem::app {
namespace {

struct FlagHelp {
  const char* key;
  const char* help;
};

// Every setting flag, in --help order; the key is the config file's.
constexpr FlagHelp kFlags[] = {
    {"model", "seed-cnn (default), mlp, cnn or resnet8"},
    {"data", "fashion-mnist (default), fashion-mnist:DIR, mnist:DIR, cifar10:DIR, csv:FILE, "
             "synthetic:SHAPE:CLASSES:COUNT[:SEED]"},
    {"normalize", "true: standardize image pixels by the dataset's mean and std (default); false: "
                  "scale them to [0, 1] only, as torchvision's ToTensor"},
    {"epochs", "Epochs to train (default 2)"},
    {"max_steps", "Stop after N optimizer steps in all (default 0: no limit)"},
    {"batch_size", "Global batch size (default 64)"},
    {"optimizer", "sgd (default), adam or adamw"},
    {"lr", "Learning rate (default: 0.001 for seed-cnn with sgd, 0.01 for other models with sgd, "
           "0.001 with adam/adamw)"},
    {"momentum", "SGD momentum, or Adam's beta1 (default 0.9)"},
    {"weight_decay", "Weight decay (default 0)"},
    {"schedule", "none (default), step, cosine, warmup or onecycle, stepped per optimizer step"},
    {"label_smoothing", "Cross-entropy label smoothing in [0, 1] (default 0)"},
    {"devices", "auto (default: every GPU; without one, whichever of one CPU device with every "
                "core and one replica per core trains this model faster, measured), cpu, cpu:N "
                "(N replicas), cuda, cuda:0,cuda:1"},
    {"split", "How a global batch is shared among devices: even (default), auto (by measured "
              "speed, re-checked during training) or proportions such as 3:2:2:3; under a "
              "launcher with one device per process, among the processes"},
    {"sync_batchnorm", "true: batch-norm statistics over the global batch, not each replica's "
                       "slice (default false)"},
    {"accumulate", "Cut each global batch into K micro-batches, one forward/backward each, "
                   "gradients summed before the one optimizer step (default 1)"},
    {"threads", "Threads per device, i.e. per replica (default 0: the cores shared out)"},
    {"micro_shard", "Cut each global batch into fixed shards of N samples: with --deterministic "
                    "the weights are then bit-identical on any cpu:N (default 0: off)"},
    {"precision", "fp32 (default) or bf16: convolutions and matrix products in bfloat16 with "
                  "float32 accumulation, everything else and the weights in float32 (autocast; "
                  "tensor cores on a GPU, emulated through float32 on a CPU)"},
    {"gpu_reduction", "nccl (default) or host: how replicas each on a GPU of their own sum "
                      "their gradients, by NCCL on the GPUs during the backward or through the "
                      "host with the CPU's arithmetic (always host under --deterministic)"},
    {"workers", "Data loader worker threads, or auto (default): 2, or half the cores (2 to 8) when "
                "a GPU trains in a process of its own"},
    {"seed", "Seed of initialisation, shuffling and augmentation (default 0)"},
    {"out", "Run directory (default runs/<UTC timestamp>)"},
    {"checkpoint_every", "Write a checkpoint every N steps (default 0: at each epoch's end)"},
    {"keep_checkpoints", "Checkpoints kept, newest first (default 3)"},
    {"resume", "Continue from the newest intact checkpoint of a run directory (or a checkpoint "
               "directory); auto: of --out, else of the newest run under runs/"},
    {"eval_every", "Evaluate every N epochs (default 1; the last epoch always)"},
    {"log_format", "text (default) or json"},
    {"comm_timeout", "Seconds a collective waits for the other processes of a multi-process run "
                     "(tandem launch) before failing with the rank at fault named (default 60)"},
};

std::string flag_name(const char* key) {
  std::string flag = std::string("--") + key;
  for (char& c : flag) {
    if (c == '_') c = '-';
  }
  return flag;
}

struct TrainFlags {
  std::string config_file;
  std::map<std::string, std::string> values;  // by key
  std::vector<std::pair<std::string, CLI::Option*>> options;
  bool deterministic = false;
  CLI::Option* deterministic_option = nullptr;
  bool tensorboard = false;
  CLI::Option* tensorboard_option = nullptr;
  bool cuda_graphs = false;
  CLI::Option* cuda_graphs_option = nullptr;
  std::int64_t kill_at_step = 0;
};

}  // namespace

Command add_train_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a model (stages: devices, model, data, train, evaluate, save)");
  auto flags = std::make_shared<TrainFlags>();
  cmd->add_option("--config", flags->config_file,
                  "A JSON (or .toml) file of settings with the flags' names (batch_size = 64); "
                  "flags override it");
  for (const FlagHelp& f : kFlags) {
    CLI::Option* option = cmd->add_option(flag_name(f.key), flags->values[f.key], f.help);
    flags->options.emplace_back(f.key, option);
  }
  flags->deterministic_option = cmd->add_flag(
      "--deterministic", flags->deterministic,
      "Same seed, same devices: bit-identical weights, also across a kill and --resume");
  flags->tensorboard_option = cmd->add_flag(
      "--tensorboard", flags->tensorboard,
      "Also write TensorBoard event files (scalars) into the run directory");
  flags->cuda_graphs_option = cmd->add_flag(
      "--cuda-graphs", flags->cuda_graphs,
      "One GPU: capture each batch shape's forward and backward into a CUDA graph and replay it "
      "(one launch per step instead of one per kernel)");
  cmd->add_option("--test-kill-at-step", flags->kill_at_step,
                  "Testing only: SIGKILL this process after step N")
      ->group("");
  return [flags]() {
    train::TrainRequest request;
    request.config_file = flags->config_file;
    for (const auto& [key, option] : flags->options) {
      if (option->count() > 0) request.flags.emplace_back(key, flags->values[key]);
    }
    // On/off flags as given: --cuda-graphs=false turns off what a config file or a resumed run's
    // configuration turned on.
    const auto on_off = [](bool on) { return std::string(on ? "true" : "false"); };
    if (flags->deterministic_option->count() > 0)
      request.flags.emplace_back("deterministic", on_off(flags->deterministic));
    if (flags->tensorboard_option->count() > 0)
      request.flags.emplace_back("tensorboard", on_off(flags->tensorboard));
    if (flags->cuda_graphs_option->count() > 0)
      request.flags.emplace_back("cuda_graphs", on_off(flags->cuda_graphs));
    request.kill_at_step = flags->kill_at_step;

    // The console style depends on --log-format, which may come from the config file.
    train::TrainConfig probe;
    if (!request.config_file.empty()) train::apply_config_file(probe, request.config_file);
    for (const auto& [key, text] : request.flags) {
      if (key == "log_format") train::set_from_text(probe, key, text);
    }
    // In a multi-process run (tandem launch) only rank 0 reports progress; the others print
    // warnings and errors only.
    const auto world = dist::world_from_env();
    std::FILE* out = world && world->rank != 0 ? std::fopen("/dev/null", "w") : stdout;
    TANDEM_CHECK(out != nullptr, "cannot open /dev/null");
    train::Console console(out, stderr,
                           train::console_style_for(out, probe.log_format == train::LogFormat::Json));
    const train::TrainOutcome outcome = train::run_training(request, console);
    if (outcome.status == train::RunStatus::Finished && outcome.final_eval) {
      console.stage("done", "test accuracy " +
                                std::to_string(outcome.final_eval->accuracy).substr(0, 6) +
                                ", run directory " + outcome.run_dir);
    }
    return outcome.exit_status();
  };
}

}  // namespace tandem::app
