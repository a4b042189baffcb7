// TrainConfig: every setting of `tandem train`, one resolution order (defaults, then a resumed
// checkpoint's config, then --config FILE in JSON or TOML, then flags) and one validation, so a
// bad value reads the same from a file as from a flag. Not the command-line parser (apps/).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/autograd/autocast.h"

namespace tandem::train {

enum class OptimizerKind : std::uint8_t { Sgd, Adam, AdamW };
enum class ScheduleKind : std::uint8_t { None, Step, Cosine, Warmup, OneCycle };
enum class LogFormat : std::uint8_t { Text, Json };
enum class Determinism : std::uint8_t { Default, Deterministic };
enum class SplitKind : std::uint8_t { Even, Weighted, Auto };
// How replicas each on a GPU of their own sum their gradients: NCCL on the GPUs, or the host.
enum class GpuReductionKind : std::uint8_t { Nccl, Host };

// --split: how a global batch is shared among the devices.
struct SplitSetting {
  SplitKind kind = SplitKind::Even;
  std::vector<double> proportions;  // Weighted: one per device, e.g. 3:2:2:3
  bool operator==(const SplitSetting&) const = default;
};

// --workers auto (the default): 2 loader threads when only CPUs train (they share the cores with
// the compute threads) or under a launcher (several processes share the machine), else, when a
// GPU trains, half the cores, from 2 to 8 (a GPU consumes batches faster than two threads make
// CIFAR-sized ones, and the cores are otherwise idle). loader_workers gives the number.
inline constexpr std::int64_t kAutoWorkers = -1;
std::int64_t loader_workers(std::int64_t workers, bool gpu_trains, int logical_cores);

struct TrainConfig {
  std::string model = "seed-cnn";
  std::string data = "fashion-mnist";
  bool normalize = true;  // standardize pixels by the dataset's mean and std; false: [0, 1] only
  std::int64_t epochs = 2;
  std::int64_t max_steps = 0;  // 0: no limit
  std::int64_t batch_size = 64;
  OptimizerKind optimizer = OptimizerKind::Sgd;
  std::optional<double> lr;  // unset: resolve() picks the model's and optimizer's default
  double momentum = 0.9;     // SGD momentum; beta1 for Adam and AdamW
  double weight_decay = 0.0;
  ScheduleKind schedule = ScheduleKind::None;
  double label_smoothing = 0.0;
  std::string devices = "auto";
  SplitSetting split;           // even, auto or 3:2:2:3 (devices, or one-device processes)
  bool sync_batchnorm = false;  // batch-norm statistics over the global batch (several devices)
  std::int64_t accumulate = 1;  // micro-batches per global batch, one backward each
  std::int64_t threads = 0;     // threads per device (replica); 0: the cores shared out
  std::int64_t micro_shard = 0; // > 0: fixed shards of N samples (bit-identical on any cpu:N)
  Precision precision = Precision::Float32;  // bf16: convolutions and matmuls under autocast
  bool cuda_graphs = false;  // one GPU: each step's forward and backward replayed from a graph
  GpuReductionKind gpu_reduction = GpuReductionKind::Nccl;  // host under --deterministic
  std::int64_t workers = kAutoWorkers;  // loader threads; kAutoWorkers: loader_workers() decides
  std::uint64_t seed = 0;
  Determinism determinism = Determinism::Default;
  std::string out;  // empty: runs/<timestamp>
  std::int64_t checkpoint_every = 0;  // optimizer steps between checkpoints; 0: each epoch's end
  std::int64_t keep_checkpoints = 3;
  std::string resume;  // "", "auto", or a run / checkpoint directory
  std::int64_t eval_every = 1;  // epochs between evaluations (the last epoch is always evaluated)
  LogFormat log_format = LogFormat::Text;
  bool tensorboard = false;  // also write TensorBoard event files into the run directory
  double comm_timeout = 60;  // seconds a multi-process collective waits for the other ranks

  // The learning rate in use: lr, or the default (SGD: 0.001 for seed-cnn as the seed used,
  // else 0.01; Adam and AdamW: 0.001).
  double resolved_lr() const;
};

// The keys of a config file and of config.json, each the long flag without "--" and with '_'
// for '-': "batch_size" is --batch-size.
std::vector<std::string> config_keys();

// A setting given as text (a flag's value): parsed by the key's type. Errors name the flag and
// the value ("--epochs: 'abc' is not an integer").
void set_from_text(TrainConfig& config, std::string_view key, std::string_view text);

// Applies a JSON object's keys (config.json, a --config file). Unknown keys and ill-typed
// values are errors naming `source` and the key.
void apply_json(TrainConfig& config, std::string_view json_text, std::string_view source);
// The same for a TOML document (top-level keys, or a [train] table).
void apply_toml(TrainConfig& config, std::string_view toml_text, std::string_view source);
// Reads FILE and applies it as TOML when it ends in .toml, else as JSON, then validates the
// result, so that a bad value is an error naming FILE.
void apply_config_file(TrainConfig& config, const std::string& path);

// Checks every value's range (batch size >= 1, finite lr > 0, ...); the first bad one throws.
void validate(const TrainConfig& config);

// The resolved config as a JSON object (lr resolved), pretty-printed: config.json.
std::string to_json(const TrainConfig& config);

std::string optimizer_name(OptimizerKind kind);  // "sgd", "adam", "adamw"
std::string schedule_name(ScheduleKind kind);    // "none", "step", "cosine", "warmup", "onecycle"
std::string log_format_name(LogFormat format);   // "text", "json"
std::string gpu_reduction_name(GpuReductionKind kind);  // "nccl", "host"
// "even", "auto", or "3:2:2:3"; parse_split reads the same spellings (errors name --split).
std::string split_name(const SplitSetting& split);
SplitSetting parse_split(std::string_view text);
// "fp32" or "bf16" (--precision; an error names the flag).
Precision parse_precision(std::string_view text);

}  // namespace tandem::train
