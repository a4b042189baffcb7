// End-to-end tests of the `tandem` binary: devices, train (run directory, config resolution,
// checkpoints, kill -9 and resume, SIGTERM), eval, every kind of bad input, and PyTorch loading
// its model.safetensors. Runs use synthetic or tiny IDX data and a few steps.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/device/cuda/discovery.h"
#include "tandem/io/safetensors.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

struct Result {
  int status = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<Json> jsonl(const fs::path& path) {
  std::vector<Json> lines;
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(Json::parse(line));
  }
  return lines;
}

// metrics.jsonl's step and epoch lines: the "run" line of each start or resume left out.
std::vector<Json> records(const fs::path& path) {
  std::vector<Json> lines;
  for (Json& line : jsonl(path)) {
    if (line["kind"] != "run") lines.push_back(std::move(line));
  }
  return lines;
}

std::size_t count_lines(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

class CliTest : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(TANDEM_TEST_WORK_DIR) / info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // Runs `tandem ARGS` in the test's directory; stdout and stderr captured separately. One
  // OpenMP thread: these runs are tiny, and on a shared 2-core CI machine spinning OpenMP teams
  // make them ten times slower without changing any result.
  Result tandem(const std::string& args) const {
    const std::string command = "cd '" + dir_.string() + "' && OMP_NUM_THREADS=1 '" + std::string(TANDEM_BINARY) +
                                "' " + args + " > stdout.txt 2> stderr.txt";
    const int raw = std::system(command.c_str());
    Result r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    r.out = slurp(dir_ / "stdout.txt");
    r.err = slurp(dir_ / "stderr.txt");
    return r;
  }

  // Expects exit status 2 and exactly one line on stderr containing `needle`.
  void expect_bad_input(const std::string& args, const std::string& needle) const {
    SCOPED_TRACE("tandem " + args);
    const Result r = tandem(args);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }

  fs::path dir_;
};

constexpr const char* kMlpRun =
    "train --model mlp --data synthetic:1x8x8:4:96 --batch-size 16 --workers 1";

TEST_F(CliTest, DevicesReportsCpuAndWhyNoGpu) {
  const Result text = tandem("devices");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("CPU"), std::string::npos);
  // The GPUs, or why there are none: "built without CUDA", or the CUDA runtime's words.
  const bool gpus = tandem::cuda::is_available();
  const std::string no_gpu = "no GPU: " + tandem::cuda::unavailable_reason();
  EXPECT_NE(text.out.find(gpus ? "cuda:0" : no_gpu), std::string::npos) << text.out;
  const Result json = tandem("devices --json");
  ASSERT_EQ(json.status, 0) << json.err;
  const Json j = Json::parse(json.out);
  EXPECT_GE(j["cpu"]["logical_cores"].get<int>(), 1);
  EXPECT_TRUE(j["cpu"]["isa"].is_array());
  EXPECT_GT(j["cpu"]["memory_total_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(j["cuda_built"].get<bool>(), tandem::cuda::built());
  EXPECT_EQ(j["gpus"].size(), static_cast<std::size_t>(tandem::cuda::device_count()));
  if (!gpus) {
    EXPECT_EQ(j["no_gpu_reason"], tandem::cuda::unavailable_reason());
    EXPECT_EQ(j["training_device"], "cpu");
  }
}

TEST_F(CliTest, TrainWritesTheRunDirectory) {
  const Result r = tandem(std::string(kMlpRun) + " --epochs 2 --out run");
  ASSERT_EQ(r.status, 0) << r.err;
  // Stages announced in order, plain progress lines (stdout is not a terminal).
  std::size_t at = 0;
  for (const char* stage : {"==> devices:", "==> model:", "==> data:", "==> train:",
                            "==> evaluate:", "==> save:"}) {
    const std::size_t found = r.out.find(stage, at);
    ASSERT_NE(found, std::string::npos) << stage << "\n" << r.out;
    at = found;
  }
  EXPECT_NE(r.out.find("    step 1/12"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos);
  // On the CPU, the devices line says why there is no GPU in the runtime's words.
  if (!tandem::cuda::is_available()) {
    EXPECT_NE(r.out.find("no GPU: " + tandem::cuda::unavailable_reason()), std::string::npos)
        << r.out;
  }

  const Json config = Json::parse(slurp(dir_ / "run/config.json"));
  EXPECT_EQ(config["model"], "mlp");
  EXPECT_EQ(config["epochs"], 2);
  EXPECT_EQ(config["batch_size"], 16);
  EXPECT_EQ(config["lr"], 0.01);  // the mlp's SGD default, resolved
  EXPECT_EQ(config["devices"], "auto");

  const Json run_line = jsonl(dir_ / "run/metrics.jsonl").front();  // what the run trains on what
  EXPECT_EQ(run_line["kind"], "run");
  EXPECT_EQ(run_line["model"], "mlp");
  EXPECT_EQ(run_line["total_steps"], 12);
  EXPECT_TRUE(fs::exists(dir_ / "run/report.html"));
  const std::vector<Json> lines = records(dir_ / "run/metrics.jsonl");
  std::vector<Json> steps, epochs;
  for (const Json& line : lines) (line["kind"] == "step" ? steps : epochs).push_back(line);
  ASSERT_EQ(steps.size(), 12u);  // 96 / 16 = 6 steps per epoch
  ASSERT_EQ(epochs.size(), 2u);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i]["step"], static_cast<int>(i) + 1);
    EXPECT_EQ(steps[i]["epoch"], i < 6 ? 1 : 2);
    for (const char* key : {"loss", "lr", "images_per_s"}) EXPECT_TRUE(steps[i][key].is_number()) << key;
    // --devices auto measured one CPU device against one replica per core: either may win.
    const std::size_t devices = run_line["layout"] == "cpu" ? 1u : 2u;
    ASSERT_EQ(steps[i]["devices"].size(), devices);
    EXPECT_EQ(steps[i]["devices"][0]["device"], devices == 1 ? "cpu" : "cpu:0");
    std::int64_t samples = 0;
    for (const Json& d : steps[i]["devices"]) samples += d["samples"].get<std::int64_t>();
    EXPECT_EQ(samples, 16);
  }
  for (const Json& e : epochs) {
    const double accuracy = e["test_accuracy"].get<double>();
    EXPECT_GE(accuracy, 0.0);
    EXPECT_LE(accuracy, 1.0);
    EXPECT_TRUE(e["test_loss"].is_number());
    std::int64_t samples = 0;
    for (const Json& d : e["devices"]) samples += d["samples"].get<std::int64_t>();
    EXPECT_EQ(samples, 96);
  }
  EXPECT_EQ(epochs[1]["step"], 12);

  const auto weights = tandem::io::load_safetensors((dir_ / "run/model.safetensors").string());
  std::vector<std::string> names;
  for (const auto& [name, t] : weights.tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(weights.tensors[0].second.shape(), (tandem::Shape{50, 64}));
  EXPECT_EQ(weights.metadata.at("format"), "pt");
  // Checkpoints at each epoch's end (the default), inside the run directory.
  EXPECT_TRUE(fs::exists(dir_ / "run/checkpoints/step-00000006/manifest.json"));
  EXPECT_TRUE(fs::exists(dir_ / "run/checkpoints/step-00000012/manifest.json"));
  // Nothing written outside the run directory.
  std::vector<std::string> top;
  for (const auto& entry : fs::directory_iterator(dir_)) top.push_back(entry.path().filename());
  std::sort(top.begin(), top.end());
  EXPECT_EQ(top, (std::vector<std::string>{"run", "stderr.txt", "stdout.txt"}));
}

TEST_F(CliTest, DefaultRunDirectoryIsUnderRuns) {
  const Result r = tandem(std::string(kMlpRun) + " --epochs 1 --log-format json");
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(fs::is_directory(dir_ / "runs"));
  std::vector<fs::path> runs(fs::directory_iterator(dir_ / "runs"), fs::directory_iterator());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(fs::exists(runs[0] / "model.safetensors"));
  // --log-format json: every stdout line is a JSON object.
  std::istringstream lines(r.out);
  int stages = 0;
  for (std::string line; std::getline(lines, line);) {
    const Json j = Json::parse(line);
    stages += j["event"] == "stage";
  }
  EXPECT_GE(stages, 6);
}

TEST_F(CliTest, ConfigFileGivesSettingsAndFlagsOverrideIt) {
  std::ofstream(dir_ / "c.json") << R"({"model": "mlp", "data": "synthetic:1x8x8:4:64",
      "epochs": 1, "batch_size": 8, "lr": 0.05, "optimizer": "adam", "workers": 0})";
  Result r = tandem("train --config c.json --batch-size 32 --out a");
  ASSERT_EQ(r.status, 0) << r.err;
  Json config = Json::parse(slurp(dir_ / "a/config.json"));
  EXPECT_EQ(config["batch_size"], 32);
  EXPECT_EQ(config["lr"], 0.05);
  EXPECT_EQ(config["optimizer"], "adam");
  EXPECT_EQ(records(dir_ / "a/metrics.jsonl").size(), 3u);  // 2 steps + 1 epoch line

  std::ofstream(dir_ / "c.toml") << "[train]\nmodel = \"mlp\"\ndata = \"synthetic:1x8x8:4:64\"\n"
                                    "epochs = 1\nbatch_size = 16\nschedule = \"cosine\"\n"
                                    "label_smoothing = 0.1\ndeterministic = true\n";
  r = tandem("train --config c.toml --workers 0 --out b");
  ASSERT_EQ(r.status, 0) << r.err;
  config = Json::parse(slurp(dir_ / "b/config.json"));
  EXPECT_EQ(config["batch_size"], 16);
  EXPECT_EQ(config["schedule"], "cosine");
  EXPECT_EQ(config["label_smoothing"], 0.1);
  EXPECT_EQ(config["deterministic"], true);
  const std::vector<Json> lines = records(dir_ / "b/metrics.jsonl");
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_GT(lines[0]["lr"].get<double>(), lines[3]["lr"].get<double>());  // cosine decays
  // An on/off flag given a value overrides the file either way.
  r = tandem("train --config c.toml --workers 0 --deterministic=false --out c");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Json::parse(slurp(dir_ / "c/config.json"))["deterministic"], false);

  std::ofstream(dir_ / "bad.json") << R"({"epochs": "two"})";
  expect_bad_input("train --config bad.json", "--epochs: 'two' is not an integer");
  std::ofstream(dir_ / "unknown.json") << R"({"epoch": 2})";
  expect_bad_input("train --config unknown.json", "unknown setting 'epoch'");
}

// A run killed with SIGKILL between checkpoints and resumed ends bit-identical to one that ran
// straight through.
TEST_F(CliTest, KilledAndResumedRunIsBitIdentical) {
  const std::string args =
      "train --model cnn --data synthetic:1x8x8:3:120 --epochs 2 --batch-size 16 --deterministic "
      "--checkpoint-every 3 --workers 2 --schedule step --optimizer adamw";
  Result r = tandem(args + " --out straight");
  ASSERT_EQ(r.status, 0) << r.err;
  r = tandem(args + " --out crashed --test-kill-at-step 10");
  ASSERT_EQ(r.status, 128 + SIGKILL);
  EXPECT_FALSE(fs::exists(dir_ / "crashed/model.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ / "crashed/checkpoints/step-00000009"));
  r = tandem(args + " --out crashed --resume auto");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("==> resume: from crashed/checkpoints/step-00000009 at step 9"),
            std::string::npos)
      << r.out;
  const std::string a = slurp(dir_ / "straight/model.safetensors");
  const std::string b = slurp(dir_ / "crashed/model.safetensors");
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "resumed weights differ from the uninterrupted run's";
  // The metrics of the redone steps are not duplicated, and the losses agree.
  const std::vector<Json> straight = records(dir_ / "straight/metrics.jsonl");
  const std::vector<Json> resumed = records(dir_ / "crashed/metrics.jsonl");
  ASSERT_EQ(straight.size(), resumed.size());
  for (std::size_t i = 0; i < straight.size(); ++i) {
    EXPECT_EQ(straight[i]["step"], resumed[i]["step"]);
    EXPECT_EQ(straight[i]["loss"], resumed[i]["loss"]) << "line " << i;
  }
  // keep_checkpoints (3) newest only.
  std::vector<fs::path> kept(fs::directory_iterator(dir_ / "crashed/checkpoints"),
                             fs::directory_iterator());
  EXPECT_EQ(kept.size(), 3u);
}

TEST_F(CliTest, ResumeSkipsADamagedCheckpointWithAWarning) {
  Result r = tandem(std::string(kMlpRun) + " --epochs 2 --checkpoint-every 4 --max-steps 9 --out run");
  ASSERT_EQ(r.status, 0) << r.err;
  // Newest is step 9 (the end); damage it by flipping one byte of its weights.
  const fs::path newest = dir_ / "run/checkpoints/step-00000009/model.safetensors";
  std::string bytes = slurp(newest);
  bytes[bytes.size() - 3] ^= 0x40;
  std::ofstream(newest, std::ios::binary | std::ios::trunc) << bytes;
  r = tandem(std::string(kMlpRun) + " --epochs 2 --max-steps 0 --out run --resume auto");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning: skipping damaged checkpoint"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("CRC-32"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("at step 8"), std::string::npos) << r.out;
  // Naming the damaged checkpoint itself is an error, not a fallback.
  fs::create_directories(dir_ / "keep");
  fs::copy(dir_ / "run/checkpoints/step-00000012", dir_ / "keep/step-00000012");
  std::string good = slurp(dir_ / "keep/step-00000012/model.safetensors");
  good.resize(good.size() / 2);
  std::ofstream(dir_ / "keep/step-00000012/model.safetensors", std::ios::binary | std::ios::trunc) << good;
  expect_bad_input(std::string(kMlpRun) + " --out other --resume keep/step-00000012",
                   "truncated or damaged");
  EXPECT_FALSE(fs::exists(dir_ / "other"));
}

TEST_F(CliTest, SigtermFinishesTheStepWritesACheckpointAndExits) {
  const std::string binary = TANDEM_BINARY;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (chdir(dir_.c_str()) != 0) _exit(99);
    std::freopen("stdout.txt", "w", stdout);
    execl(binary.c_str(), binary.c_str(), "train", "--model", "mlp", "--data",
          "synthetic:1x8x8:4:96", "--batch-size", "16", "--workers", "0", "--epochs", "100000",
          "--out", "run", static_cast<char*>(nullptr));
    _exit(98);
  }
  // Wait until training is under way (the first step line is written, after the run line), then
  // ask it to stop.
  const fs::path metrics = dir_ / "run/metrics.jsonl";
  const auto stepping = [&] {
    return fs::exists(metrics) && slurp(metrics).find("\"kind\":\"step\"") != std::string::npos;
  };
  for (int i = 0; i < 6000 && !stepping(); ++i) usleep(10000);
  ASSERT_TRUE(stepping());
  kill(pid, SIGTERM);
  int raw = 0;
  ASSERT_EQ(waitpid(pid, &raw, 0), pid);
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 128 + SIGTERM);
  const std::vector<Json> lines = jsonl(metrics);
  ASSERT_FALSE(lines.empty());
  const std::int64_t last_step = lines.back()["step"].get<std::int64_t>();
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(last_step));
  EXPECT_TRUE(fs::exists(dir_ / "run/checkpoints" / name / "manifest.json")) << name;
  EXPECT_NE(slurp(dir_ / "stdout.txt").find("==> interrupted: SIGTERM"), std::string::npos);
}

TEST_F(CliTest, CpuReplicasTrainDataParallelWithPerDeviceFigures) {
  const Result r = tandem(std::string(kMlpRun) + " --epochs 1 --devices cpu:2 --out run");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("==> devices: cpu:0,cpu:1"), std::string::npos) << r.out;
  const std::vector<Json> lines = records(dir_ / "run/metrics.jsonl");
  ASSERT_EQ(lines.size(), 7u);
  for (const Json& line : lines) {
    ASSERT_EQ(line["devices"].size(), 2u) << line.dump();
    EXPECT_EQ(line["devices"][0]["device"], "cpu:0");
    EXPECT_EQ(line["devices"][1]["device"], "cpu:1");
    const std::int64_t both = line["devices"][0]["samples"].get<std::int64_t>() +
                              line["devices"][1]["samples"].get<std::int64_t>();
    EXPECT_EQ(both, line["kind"] == "step" ? 16 : 96);
    // Each replica's own memory (activations, gradients): measured, not left at 0.
    EXPECT_GT(line["devices"][0]["peak_bytes"].get<std::int64_t>(), 0) << line.dump();
    EXPECT_GT(line["devices"][1]["peak_bytes"].get<std::int64_t>(), 0) << line.dump();
  }
  EXPECT_EQ(Json::parse(slurp(dir_ / "run/config.json"))["devices"], "cpu:2");
  EXPECT_NE(r.out.find("peak MiB"), std::string::npos) << r.out;  // the share table
}

TEST_F(CliTest, SplitAndAccumulateReachTheReplicas) {
  const Result r = tandem(std::string(kMlpRun) +
                          " --epochs 1 --devices cpu:2 --split 3:1 --accumulate 2 --out run");
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<Json> steps;
  for (const Json& line : jsonl(dir_ / "run/metrics.jsonl")) {
    if (line["kind"] == "step") steps.push_back(line);
  }
  ASSERT_EQ(steps.size(), 6u);
  // Each global batch of 16 is two micro-batches of 8, each split 6:2.
  for (const Json& step : steps) {
    EXPECT_EQ(step["devices"][0]["samples"], 12) << step.dump();
    EXPECT_EQ(step["devices"][1]["samples"], 4) << step.dump();
  }
  const Json config = Json::parse(slurp(dir_ / "run/config.json"));
  EXPECT_EQ(config["split"], "3:1");
  EXPECT_EQ(config["accumulate"], 2);
  expect_bad_input(std::string(kMlpRun) + " --devices cpu:2 --split 1:2:3",
                   "--split: 1:2:3 gives 3 proportions for 2 devices");
  expect_bad_input(std::string(kMlpRun) + " --split 3:x", "--split: 'x' in '3:x'");
  expect_bad_input(std::string(kMlpRun) + " --accumulate 0", "--accumulate: 0");
}

TEST_F(CliTest, Bf16PrecisionTrainsUnderAutocastOnEveryReplica) {
  // A conv model, so that convolutions and the linear layer both run in bfloat16.
  const std::string run = "train --model cnn --data synthetic:1x8x8:4:64 --batch-size 16 "
                          "--workers 1 --epochs 2 --seed 3 --deterministic";
  Result r = tandem(run + " --devices cpu:2 --precision bf16 --out bf16");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("bf16 autocast (emulated through float32 on the CPU"), std::string::npos)
      << r.out;
  EXPECT_EQ(Json::parse(slurp(dir_ / "bf16/config.json"))["precision"], "bf16");
  r = tandem(run + " --devices cpu:2 --out fp32");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Json::parse(slurp(dir_ / "fp32/config.json"))["precision"], "fp32");
  // The same run in bfloat16 learns the same way, but its numbers are not float32's.
  const std::vector<Json> bf = records(dir_ / "bf16/metrics.jsonl");
  const std::vector<Json> fp = records(dir_ / "fp32/metrics.jsonl");
  ASSERT_EQ(bf.size(), fp.size());
  bool any_differs = false;
  for (std::size_t i = 0; i < bf.size(); ++i) {
    if (bf[i]["kind"] != "step") continue;
    const double a = bf[i]["loss"].get<double>(), b = fp[i]["loss"].get<double>();
    EXPECT_NEAR(a, b, 0.05 * std::abs(b)) << "step line " << i;
    any_differs = any_differs || a != b;
  }
  EXPECT_TRUE(any_differs);
  // tandem eval --precision bf16 evaluates as the run did at its end.
  r = tandem("eval --model cnn --weights bf16/model.safetensors --data synthetic:1x8x8:4:64 "
             "--precision bf16 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const Json eval = Json::parse(r.out);
  EXPECT_NEAR(eval["loss"].get<double>(), bf.back()["test_loss"].get<double>(), 1e-5);
  EXPECT_DOUBLE_EQ(eval["accuracy"].get<double>(), bf.back()["test_accuracy"].get<double>());
  expect_bad_input(std::string(kMlpRun) + " --precision fp16",
                   "--precision: unknown precision 'fp16' (expected fp32 or bf16)");
  expect_bad_input("eval --model mlp --weights bf16/model.safetensors --precision half",
                   "--precision: unknown precision 'half'");
}

TEST_F(CliTest, CudaGraphsNeedOneGpuAndOneMicroBatchAndSayWhyOtherwise) {
  expect_bad_input(std::string(kMlpRun) + " --devices cpu --cuda-graphs --out g1",
                   "--cuda-graphs: graphs replay GPU work, but the device is cpu");
  expect_bad_input(std::string(kMlpRun) + " --devices cpu:2 --cuda-graphs --out g2",
                   "--cuda-graphs: graphs replay one GPU's step, but --devices gives cpu:0,cpu:1");
  expect_bad_input(std::string(kMlpRun) + " --devices cpu --cuda-graphs --accumulate 2 --out g3",
                   "--cuda-graphs: a graph replays one whole step, but --accumulate is 2");
  EXPECT_FALSE(fs::exists(dir_ / "g1" / "model.safetensors"));
}

TEST_F(CliTest, DevicesAutoMeasuresTheCpuLayoutsUnlessDeterministic) {
  Result r = tandem(std::string(kMlpRun) + " --epochs 1 --out run");
  ASSERT_EQ(r.status, 0) << r.err;
  if (r.out.find("auto: measured") == std::string::npos) {
    // One core: nothing to choose between.
    EXPECT_NE(r.out.find("==> devices: cpu ("), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("img/s against"), std::string::npos) << r.out;
  }
  r = tandem(std::string(kMlpRun) + " --epochs 1 --deterministic --out run2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("auto: measured"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("==> devices: cpu ("), std::string::npos) << r.out;
}

TEST_F(CliTest, EvalReportsLossAccuracyPerClassAndConfusion) {
  Result r = tandem(std::string(kMlpRun) + " --epochs 3 --out run");
  ASSERT_EQ(r.status, 0) << r.err;
  r = tandem("eval --model mlp --weights run/model.safetensors --data synthetic:1x8x8:4:96 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["samples"], 96);
  EXPECT_GE(j["accuracy"].get<double>(), 0.0);
  EXPECT_LE(j["accuracy"].get<double>(), 1.0);
  ASSERT_EQ(j["per_class_accuracy"].size(), 4u);
  ASSERT_EQ(j["confusion_matrix"].size(), 4u);
  std::int64_t total = 0, diagonal = 0;
  for (int t = 0; t < 4; ++t) {
    for (int p = 0; p < 4; ++p) total += j["confusion_matrix"][t][p].get<std::int64_t>();
    diagonal += j["confusion_matrix"][t][t].get<std::int64_t>();
  }
  EXPECT_EQ(total, 96);
  EXPECT_DOUBLE_EQ(j["accuracy"].get<double>(), static_cast<double>(diagonal) / 96.0);
  // The last epoch line of training reports the same test accuracy.
  const std::vector<Json> lines = jsonl(dir_ / "run/metrics.jsonl");
  EXPECT_DOUBLE_EQ(lines.back()["test_accuracy"].get<double>(), j["accuracy"].get<double>());
  // The text form, and a checkpoint directory as --weights.
  r = tandem("eval --model mlp --weights run/checkpoints/step-00000018 --data synthetic:1x8x8:4:96");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("confusion matrix"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("per-class accuracy"), std::string::npos) << r.out;
}

TEST_F(CliTest, BadInputExitsTwoWithOneLine) {
  expect_bad_input("train --bogus 1", "--bogus");
  expect_bad_input("frobnicate", "frobnicate");
  expect_bad_input("train --batch-size 0 --data synthetic:1x8x8:4:32", "--batch-size: 0");
  expect_bad_input("train --lr -0.1 --data synthetic:1x8x8:4:32", "--lr");
  expect_bad_input("train --lr nan --data synthetic:1x8x8:4:32", "--lr: nan");
  expect_bad_input("train --epochs two", "--epochs: 'two' is not an integer");
  expect_bad_input("train --data mnist:does-not-exist", "does-not-exist");
  expect_bad_input("train --devices cuda:64 --data synthetic:1x8x8:4:32", "does not exist");
  if (!tandem::cuda::is_available()) {
    expect_bad_input("train --devices cuda --data synthetic:1x8x8:4:32", "does not exist");
  }
  expect_bad_input("train --devices tpu --data synthetic:1x8x8:4:32", "'tpu' is not a device");
  expect_bad_input("train --model cnn --data synthetic:100:3:50", "model cnn needs images");
  expect_bad_input("train --model resnet9", "unknown model 'resnet9'");
  expect_bad_input("eval --model mlp", "--weights");
  // Nothing was written by any of them.
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
}

TEST_F(CliTest, IncompatibleCheckpointsAndWeightsAreRefusedWithoutDamage) {
  Result r = tandem(std::string(kMlpRun) + " --epochs 1 --out run");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string weights = slurp(dir_ / "run/model.safetensors");
  const std::string metrics = slurp(dir_ / "run/metrics.jsonl");
  const std::string config = slurp(dir_ / "run/config.json");

  expect_bad_input("train --model cnn --data synthetic:1x8x8:4:96 --resume run",
                   "was written by model 'mlp', not 'cnn'");
  expect_bad_input("train --model mlp --data synthetic:1x4x4:4:96 --resume run", "does not fit");
  expect_bad_input("eval --model cnn --weights run/model.safetensors --data synthetic:1x8x8:4:96",
                   "does not fit model cnn");
  std::ofstream(dir_ / "cut.safetensors", std::ios::binary) << weights.substr(0, weights.size() - 10);
  expect_bad_input("eval --model mlp --weights cut.safetensors --data synthetic:1x8x8:4:96",
                   "cut.safetensors");
  expect_bad_input("eval --model mlp --weights missing.safetensors --data synthetic:1x8x8:4:96",
                   "no such file");
  // The run's files are untouched.
  EXPECT_EQ(slurp(dir_ / "run/model.safetensors"), weights);
  EXPECT_EQ(slurp(dir_ / "run/metrics.jsonl"), metrics);
  EXPECT_EQ(slurp(dir_ / "run/config.json"), config);
}

// Tiny MNIST-format data (raw IDX files) so PyTorch can read exactly what tandem read.
void write_idx(const fs::path& path, const std::vector<std::uint32_t>& dims,
               const std::vector<std::uint8_t>& values) {
  std::ofstream out(path, std::ios::binary);
  const unsigned char magic[4] = {0, 0, 8, static_cast<unsigned char>(dims.size())};
  out.write(reinterpret_cast<const char*>(magic), 4);
  for (std::uint32_t d : dims) {
    const unsigned char be[4] = {static_cast<unsigned char>(d >> 24), static_cast<unsigned char>(d >> 16),
                                 static_cast<unsigned char>(d >> 8), static_cast<unsigned char>(d)};
    out.write(reinterpret_cast<const char*>(be), 4);
  }
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size()));
}

void write_tiny_mnist(const fs::path& dir, std::uint32_t side) {
  fs::create_directories(dir);
  for (const auto& [prefix, count] : {std::pair<std::string, std::uint32_t>{"train", 64}, {"t10k", 48}}) {
    std::vector<std::uint8_t> images(static_cast<std::size_t>(count) * side * side);
    std::vector<std::uint8_t> labels(count);
    std::uint32_t state = prefix == "train" ? 12345u : 777u;
    for (std::uint32_t i = 0; i < count; ++i) {
      labels[i] = static_cast<std::uint8_t>(i % 10);
      for (std::uint32_t k = 0; k < side * side; ++k) {
        state = state * 1664525u + 1013904223u;
        const bool on = (k % 10) == labels[i];
        images[static_cast<std::size_t>(i) * side * side + k] =
            static_cast<std::uint8_t>((on ? 160 : 0) + (state >> 26));
      }
    }
    write_idx(dir / (prefix + "-images-idx3-ubyte"), {count, side, side}, images);
    write_idx(dir / (prefix + "-labels-idx1-ubyte"), {count}, labels);
  }
}

TEST_F(CliTest, ModelSafetensorsLoadsInPyTorchWithTheSamePredictions) {
  if (std::system("/usr/bin/python3 -c 'import torch, numpy' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch and numpy (Debian's python3-torch): "
                    "the PyTorch cross-check needs them";
  }
  write_tiny_mnist(dir_ / "mnist", 16);
  std::string checks;
  for (const char* model : {"seed-cnn", "mlp", "cnn", "resnet8"}) {
    SCOPED_TRACE(model);
    const std::string out = std::string("run-") + model;
    Result r = tandem(std::string("train --model ") + model +
                      " --data mnist:mnist --max-steps 3 --batch-size 16 --workers 0 --out " + out);
    ASSERT_EQ(r.status, 0) << r.err;
    r = tandem(std::string("eval --json --model ") + model + " --data mnist:mnist --weights " + out +
               "/model.safetensors");
    ASSERT_EQ(r.status, 0) << r.err;
    std::ofstream(dir_ / (out + ".eval.json")) << r.out;
    checks += std::string(" --check ") + model + ":" + out + "/model.safetensors:" + out + ".eval.json";
  }
  const std::string command = "cd '" + dir_.string() + "' && /usr/bin/python3 '" +
                              std::string(TANDEM_APPS_TEST_DIR) +
                              "/check_pytorch_load.py' --mnist mnist" + checks + " > py.txt 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << slurp(dir_ / "py.txt");
  EXPECT_EQ(count_lines(slurp(dir_ / "py.txt")), 4u) << slurp(dir_ / "py.txt");
}

}  // namespace
