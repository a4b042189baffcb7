// Tests of the train layer's parts: the model registry (PyTorch's names and shapes, outputs),
// config parsing from text / JSON / TOML with validation, --devices parsing, /proc/cpuinfo
// parsing, metrics lines, evaluation, and io/checkpoint's atomic, checksummed directories.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "tandem/tandem.h"
#include "tandem/io/checkpoint.h"
#include "tandem/train/config.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/train/devices.h"
#include "tandem/train/evaluate.h"
#include "tandem/train/metrics.h"
#include "tandem/train/models.h"

namespace tandem::train {
namespace {

namespace fs = std::filesystem;

std::vector<std::pair<std::string, Shape>> names_and_shapes(const nn::Module& m) {
  std::vector<std::pair<std::string, Shape>> out;
  for (const auto& [name, t] : m.state_dict()) out.emplace_back(name, t.shape());
  return out;
}

TEST(Models, SeedCnnAdaptsToChannelsAndImageSize) {
  const auto m = make_model(ModelKind::SeedCnn, {{3, 32, 32}, 10});
  EXPECT_EQ(names_and_shapes(*m), (std::vector<std::pair<std::string, Shape>>{
                                      {"conv1.weight", {16, 3, 3, 3}}, {"conv1.bias", {16}},
                                      {"conv2.weight", {32, 16, 3, 3}}, {"conv2.bias", {32}},
                                      {"fc.weight", {10, 32 * 32 * 32}}, {"fc.bias", {10}}}));
  const auto fm = make_model(ModelKind::SeedCnn, {{1, 28, 28}, 10});
  EXPECT_EQ((*fm)(zeros({2, 1, 28, 28})).shape(), (Shape{2, 10}));
}

TEST(Models, MlpTakesItsInputSizeFromTheData) {
  const auto m = make_model(ModelKind::Mlp, {{100}, 10});
  EXPECT_EQ(names_and_shapes(*m), (std::vector<std::pair<std::string, Shape>>{
                                      {"fc1.weight", {50, 100}}, {"fc1.bias", {50}},
                                      {"fc2.weight", {10, 50}}, {"fc2.bias", {10}}}));
  const auto images = make_model(ModelKind::Mlp, {{1, 28, 28}, 10});
  EXPECT_EQ((*images)(zeros({3, 1, 28, 28})).shape(), (Shape{3, 10}));
}

TEST(Models, CnnIsTheAnchorScriptsCnn) {
  const auto m = make_model(ModelKind::Cnn, {{1, 28, 28}, 10});
  EXPECT_EQ(names_and_shapes(*m), (std::vector<std::pair<std::string, Shape>>{
                                      {"conv1.weight", {32, 1, 3, 3}}, {"conv1.bias", {32}},
                                      {"conv2.weight", {64, 32, 3, 3}}, {"conv2.bias", {64}},
                                      {"fc1.weight", {128, 64 * 7 * 7}}, {"fc1.bias", {128}},
                                      {"fc2.weight", {10, 128}}, {"fc2.bias", {10}}}));
  EXPECT_EQ((*m)(zeros({2, 1, 28, 28})).shape(), (Shape{2, 10}));
}

TEST(Models, ResNet8HasTorchvisionStyleNames) {
  const auto m = make_model(ModelKind::ResNet8, {{3, 32, 32}, 10});
  std::vector<std::string> names;
  for (const auto& [name, t] : m->state_dict()) names.push_back(name);
  const std::vector<std::string> stem = {"conv1.weight", "bn1.weight", "bn1.bias",
                                         "bn1.running_mean", "bn1.running_var",
                                         "bn1.num_batches_tracked"};
  ASSERT_GT(names.size(), stem.size());
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 6), stem);
  const auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  EXPECT_TRUE(has("layer1.0.conv1.weight"));
  EXPECT_FALSE(has("layer1.0.downsample.0.weight"));  // identity shortcut at 16 -> 16
  EXPECT_TRUE(has("layer2.0.downsample.0.weight"));
  EXPECT_TRUE(has("layer3.0.downsample.1.running_var"));
  EXPECT_EQ(names.back(), "fc.bias");
  // Parameters: PyTorch's count for the same definition.
  EXPECT_EQ(m->parameter_count(), 78042);
  EXPECT_EQ((*m)(zeros({2, 3, 32, 32})).shape(), (Shape{2, 10}));
}

TEST(Models, RefusesDataTheyCannotTake) {
  EXPECT_THROW(make_model(ModelKind::Cnn, {{100}, 10}), Error);
  EXPECT_THROW(make_model(ModelKind::ResNet8, {{1, 2, 2}, 10}), Error);
  EXPECT_THROW(make_model(ModelKind::Mlp, {{100}, 1}), Error);
  EXPECT_THROW(parse_model_kind("resnet50"), Error);
  EXPECT_EQ(parse_model_kind("seed-cnn"), ModelKind::SeedCnn);
  EXPECT_EQ(model_names(), (std::vector<std::string>{"seed-cnn", "mlp", "cnn", "resnet8"}));
}

TEST(Config, DefaultsAreTheSeedRun) {
  const TrainConfig c;
  EXPECT_EQ(c.model, "seed-cnn");
  EXPECT_EQ(c.data, "fashion-mnist");
  EXPECT_EQ(c.epochs, 2);
  EXPECT_EQ(c.devices, "auto");
  EXPECT_TRUE(c.normalize);
  EXPECT_DOUBLE_EQ(c.resolved_lr(), 1e-3);
  TrainConfig mlp;
  mlp.model = "mlp";
  EXPECT_DOUBLE_EQ(mlp.resolved_lr(), 1e-2);
  mlp.optimizer = OptimizerKind::Adam;
  EXPECT_DOUBLE_EQ(mlp.resolved_lr(), 1e-3);
  EXPECT_NO_THROW(validate(c));
}

TEST(Config, TextJsonAndTomlSetTheSameKeys) {
  TrainConfig a, b, c;
  set_from_text(a, "batch_size", "32");
  set_from_text(a, "optimizer", "adamw");
  set_from_text(a, "schedule", "onecycle");
  set_from_text(a, "deterministic", "true");
  set_from_text(a, "lr", "0.25");
  set_from_text(a, "normalize", "false");
  apply_json(b, R"({"batch_size": 32, "optimizer": "adamw", "schedule": "onecycle",
                    "deterministic": true, "lr": 0.25, "normalize": false})", "b.json");
  apply_toml(c, "batch_size = 32\noptimizer = \"adamw\"\nschedule = \"onecycle\"\n"
                "deterministic = true\nlr = 0.25\nnormalize = false\n", "c.toml");
  EXPECT_EQ(to_json(a), to_json(b));
  EXPECT_EQ(to_json(a), to_json(c));
  EXPECT_EQ(a.batch_size, 32);
  EXPECT_EQ(a.optimizer, OptimizerKind::AdamW);
  EXPECT_EQ(a.schedule, ScheduleKind::OneCycle);
  EXPECT_EQ(a.determinism, Determinism::Deterministic);
  EXPECT_FALSE(a.normalize);
  // A resolved config reads back as itself.
  TrainConfig d;
  apply_json(d, to_json(a), "config.json");
  EXPECT_EQ(to_json(d), to_json(a));
}

TEST(Config, BadValuesAreErrorsNamingTheFlag) {
  TrainConfig c;
  const auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { set_from_text(c, "epochs", "two"); }).find("--epochs: 'two' is not an integer"),
            std::string::npos);
  EXPECT_NE(message([&] { set_from_text(c, "optimizer", "rmsprop"); }).find("unknown optimizer"),
            std::string::npos);
  EXPECT_NE(message([&] { apply_json(c, "{\"lr\": [1]}", "x.json"); }).find("x.json"),
            std::string::npos);
  EXPECT_NE(message([&] { apply_json(c, "{oops", "x.json"); }).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(message([&] { apply_toml(c, "lr = = 1", "x.toml"); }).find("not valid TOML"),
            std::string::npos);
  const auto invalid = [&](const char* key, const char* value, const char* needle) {
    TrainConfig bad;
    set_from_text(bad, key, value);
    EXPECT_NE(message([&] { validate(bad); }).find(needle), std::string::npos) << key << "=" << value;
  };
  invalid("batch_size", "0", "--batch-size");
  invalid("lr", "-1", "--lr");
  invalid("lr", "nan", "--lr");
  invalid("momentum", "1", "--momentum");
  invalid("label_smoothing", "1.5", "--label-smoothing");
  invalid("keep_checkpoints", "0", "--keep-checkpoints");
  invalid("model", "vgg", "unknown model");
  {  // a timing-driven split would make a deterministic run depend on timing
    TrainConfig bad;
    set_from_text(bad, "split", "auto");
    set_from_text(bad, "deterministic", "true");
    EXPECT_NE(message([&] { validate(bad); }).find("--split auto and --deterministic"),
              std::string::npos);
  }
}

TEST(Devices, SpellingsResolveOrFailClearly) {
  // auto: every GPU where this build has the CUDA kernels and sees a GPU, else the CPU.
  EXPECT_EQ(auto_uses_gpus(), ops::cuda::built() && cuda_device_count() > 0);
  std::vector<Device> expected_auto;
  for (int i = 0; auto_uses_gpus() && i < cuda_device_count(); ++i)
    expected_auto.emplace_back(DeviceType::CUDA, i);
  if (expected_auto.empty()) expected_auto.push_back(kCPU);
  EXPECT_EQ(parse_devices("auto").devices, expected_auto);
  EXPECT_EQ(parse_devices("cpu").describe(), "cpu");
  const DeviceLayout three = parse_devices("cpu:3");
  ASSERT_EQ(three.devices.size(), 3u);
  EXPECT_EQ(three.devices[2], Device(DeviceType::CPU, 2));
  EXPECT_EQ(three.describe(), "cpu:0,cpu:1,cpu:2");
  EXPECT_THROW(parse_devices("cpu:0"), Error);
  EXPECT_THROW(parse_devices("cpu:x"), Error);
  EXPECT_THROW(parse_devices("tpu"), Error);
  if (cuda_device_count() == 0) {  // built without CUDA, or no GPU visible
    EXPECT_THROW(parse_devices("cuda"), Error);
    EXPECT_THROW(parse_devices("cuda:0,cuda:1"), Error);
  }
  // A list needs a GPU; CPU replicas alone are cpu:N.
  try {
    parse_devices("cpu,cpu");
    ADD_FAILURE() << "cpu,cpu was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("spelled cpu:2"), std::string::npos) << e.what();
  }
  // Two replicas on one GPU and a CPU replica, written back as --devices spells them.
  const DeviceLayout mixed{{Device(DeviceType::CUDA, 0), Device(DeviceType::CUDA, 0),
                            Device(DeviceType::CPU, 0)}};
  EXPECT_EQ(mixed.describe(), "cuda:0,cuda:0,cpu");
  if (cuda_device_count() > 0) {
    EXPECT_EQ(parse_devices("cuda:0,cuda:0,cpu"), mixed);
  } else {
    EXPECT_THROW(parse_devices("cuda:0,cuda:0,cpu"), Error);
  }
  try {  // a GPU that does not exist names what does
    parse_devices("cuda:64");
    ADD_FAILURE() << "cuda:64 was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cuda:64"), std::string::npos) << m;
    EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
  }
}

TEST(Devices, CpuInfoParsing) {
  const std::string cpuinfo =
      "processor\t: 0\nmodel name\t: Example CPU 9000\nphysical id\t: 0\ncore id\t: 0\n"
      "flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512_bf16 amx_tile amx_bf16\n\n"
      "processor\t: 1\nmodel name\t: Example CPU 9000\nphysical id\t: 0\ncore id\t: 0\n"
      "flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512_bf16 amx_tile amx_bf16\n";
  const std::string meminfo = "MemTotal:       1024 kB\nMemFree:  10 kB\nMemAvailable:    512 kB\n";
  const CpuInfo info = parse_cpu_info(cpuinfo, meminfo, 2);
  EXPECT_EQ(info.model, "Example CPU 9000");
  EXPECT_EQ(info.logical_cores, 2);
  EXPECT_EQ(info.physical_cores, 1);  // two hyperthreads of one core
  EXPECT_EQ(info.isa, (std::vector<std::string>{"sse4_2", "avx", "avx2", "fma", "avx512f",
                                                "avx512_bf16", "amx_tile", "amx_bf16"}));
  EXPECT_EQ(info.memory_total_bytes, 1024u * 1024u);
  EXPECT_EQ(info.memory_available_bytes, 512u * 1024u);
}

TEST(Metrics, LinesAndTruncation) {
  const fs::path dir = fs::temp_directory_path() / ("tandem_metrics_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "metrics.jsonl").string();
  {
    MetricsWriter w(path, MetricsOpen::Truncate);
    for (int s = 1; s <= 4; ++s) {
      w.write(StepMetrics{.step = s, .epoch = 1, .loss = 1.0 / s, .lr = 0.1, .images_per_s = 10,
                          .devices = {{"cpu", 8, 0.5}}});
    }
    w.write(EpochMetrics{.step = 4, .epoch = 1, .loss = 0.5, .test_loss = 0.25, .test_accuracy = 0.75});
  }
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0].rfind("{\"kind\":\"step\",\"step\":1,\"epoch\":1,\"loss\":1.0,", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("\"devices\":[{\"device\":\"cpu\",\"samples\":8,\"seconds\":0.5,\"images_per_s\":16.0,"
                          "\"forward_s\":0.0,\"backward_s\":0.0,\"reduction_s\":0.0,\"optimizer_s\":0.0,"
                          "\"wait_s\":0.0,\"peak_bytes\":0}]"),
            std::string::npos) << lines[0];
  EXPECT_NE(lines[4].find("\"test_accuracy\":0.75"), std::string::npos);
  std::ofstream(path, std::ios::app) << "{\"kind\":\"step\",\"st";  // a line cut by a crash
  truncate_metrics_after(path, 2);
  std::ifstream again(path);
  std::vector<std::string> kept;
  for (std::string l; std::getline(again, l);) kept.push_back(l);
  EXPECT_EQ(kept, (std::vector<std::string>{lines[0], lines[1]}));
  fs::remove_all(dir);
}

// The lines the report needs besides the losses: the run line, phase times, train accuracy and
// the confusion matrix; a resume's truncation keeps the run line (step 0).
TEST(Metrics, RunLineAndReportFields) {
  EXPECT_EQ(to_json_line(RunMetrics{.step = 0, .time = 1.5, .model = "mlp", .parameters = 3454,
                                    .layout = "cpu:0,cpu:1", .device_count = 2, .total_steps = 12}),
            "{\"kind\":\"run\",\"step\":0,\"time\":1.5,\"model\":\"mlp\",\"parameters\":3454,"
            "\"data\":\"\",\"input\":\"\",\"classes\":0,\"train_samples\":0,\"test_samples\":0,"
            "\"layout\":\"cpu:0,cpu:1\",\"device_count\":2,\"ranks\":1,\"batch_size\":0,\"epochs\":0,"
            "\"steps_per_epoch\":0,\"total_steps\":12,\"optimizer\":\"\",\"lr\":0.0,\"schedule\":\"\"}");
  const std::string step = to_json_line(StepMetrics{
      .step = 3, .devices = {{.device = "cpu:1", .samples = 4, .seconds = 0.25, .forward_s = 0.125,
                              .backward_s = 0.0625, .reduction_s = 0.0625, .wait_s = 0.5,
                              .peak_bytes = 1 << 20}},
      .seconds = 1.0, .data_s = 0.25, .accuracy = 0.75, .time = 2.0});
  for (const char* part : {"\"forward_s\":0.125,\"backward_s\":0.0625,\"reduction_s\":0.0625,"
                           "\"optimizer_s\":0.0,\"wait_s\":0.5,\"peak_bytes\":1048576}]",
                           "\"seconds\":1.0,\"data_s\":0.25,\"accuracy\":0.75,\"time\":2.0}"}) {
    EXPECT_NE(step.find(part), std::string::npos) << part << " in " << step;
  }
  const std::string epoch = to_json_line(EpochMetrics{
      .step = 6, .epoch = 1, .train_accuracy = 0.5, .confusion = {{2, 0}, {1, 1}}});
  EXPECT_NE(epoch.find("\"train_accuracy\":0.5,\"data_s\":0.0,\"confusion\":[[2,0],[1,1]]"),
            std::string::npos) << epoch;
  EXPECT_EQ(to_json_line(EpochMetrics{.step = 6}).find("confusion"), std::string::npos);
  DeviceFigures sum{.device = "cpu", .samples = 2, .seconds = 1, .forward_s = 0.5, .wait_s = 1};
  sum += DeviceFigures{.device = "other", .samples = 3, .seconds = 2, .forward_s = 0.25,
                       .optimizer_s = 0.125};
  EXPECT_EQ(sum.device, "cpu");
  EXPECT_EQ(sum.samples, 5);
  EXPECT_DOUBLE_EQ(sum.forward_s, 0.75);
  EXPECT_DOUBLE_EQ(sum.optimizer_s, 0.125);
  EXPECT_DOUBLE_EQ(sum.wait_s, 1.0);

  const fs::path dir = fs::temp_directory_path() / ("tandem_runline_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "metrics.jsonl").string();
  {
    MetricsWriter w(path, MetricsOpen::Truncate);
    w.write(RunMetrics{.model = "mlp"});
    w.write(StepMetrics{.step = 1});
    w.write(StepMetrics{.step = 2});
  }
  truncate_metrics_after(path, 1);
  std::ifstream in(path);
  std::vector<std::string> kept;
  for (std::string l; std::getline(in, l);) kept.push_back(l);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_TRUE(kept[0].starts_with("{\"kind\":\"run\",\"step\":0,")) << kept[0];
  fs::remove_all(dir);
}

TEST(Evaluate, CountsAndConfusion) {
  // A fixed "model": logits = x, so the prediction is the argmax of each row.
  struct Identity : nn::Module {
    Tensor forward(const Tensor& x) override { return x; }
  };
  Identity model;
  const Tensor x = from_vector(std::vector<float>{5, 0, 0, 0, 5, 0, 0, 0, 5, 5, 0, 0}, {4, 3});
  const Tensor y = from_vector(std::vector<std::int64_t>{0, 1, 2, 2}, {4});
  data::DataLoader loader(data::TensorDataset(x, y, 3), {.batch_size = 3});
  const EvalResult r = evaluate(model, loader, 3, kCPU);
  EXPECT_EQ(r.samples, 4);
  EXPECT_DOUBLE_EQ(r.accuracy, 0.75);
  EXPECT_EQ(r.confusion, (std::vector<std::vector<std::int64_t>>{{1, 0, 0}, {0, 1, 0}, {1, 0, 1}}));
  EXPECT_DOUBLE_EQ(r.per_class_accuracy[2], 0.5);
  EXPECT_TRUE(model.is_training());  // restored
  EXPECT_NE(eval_to_json(r).find("\"confusion_matrix\":[[1,0,0],[0,1,0],[1,0,1]]"), std::string::npos);
}

TEST(Evaluate, ForwardInChunksEqualsOneForwardAndRecordsEachChunksRows) {
  // Records the rows of each call, and returns a row-wise function of the input.
  struct Recorder : nn::Module {
    std::vector<std::int64_t> rows;
    Tensor forward(const Tensor& x) override {
      rows.push_back(x.size(0));
      return x * 2.0f;
    }
  };
  Recorder model;
  const Tensor x = randn({1000, 3});
  NoGradGuard no_grad;
  const Tensor chunked = forward_in_chunks(model, x, 256);
  EXPECT_EQ(model.rows, (std::vector<std::int64_t>{250, 250, 250, 250}));  // equal chunks
  EXPECT_EQ(chunked.shape(), (Shape{1000, 3}));
  EXPECT_EQ(chunked.to_vector<float>(), (x * 2.0f).to_vector<float>());
  model.rows.clear();
  EXPECT_EQ(forward_in_chunks(model, x.narrow(0, 0, 7), 3).shape(), (Shape{7, 3}));
  EXPECT_EQ(model.rows, (std::vector<std::int64_t>{3, 3, 1}));
  model.rows.clear();
  forward_in_chunks(model, x, 1000);
  EXPECT_EQ(model.rows, (std::vector<std::int64_t>{1000}));
  EXPECT_THROW(forward_in_chunks(model, x, 0), Error);

  // A real model: the chunks' logits match one pass at batch 1000.
  const auto cnn = make_model(ModelKind::Cnn, {{1, 28, 28}, 10});
  cnn->eval();
  const Tensor images = randn({600, 1, 28, 28});
  const std::vector<float> whole = (*cnn)(images).to_vector<float>();
  const std::vector<float> parts = forward_in_chunks(*cnn, images, 128).to_vector<float>();
  ASSERT_EQ(parts.size(), whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(parts[i], whole[i], 1e-4f) << i;
}

class CheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_ckpt_" + std::to_string(::getpid()) + "_" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static io::CheckpointContents contents(float value) {
    io::CheckpointContents c;
    c.model = {{"fc.weight", full({2, 3}, value)}, {"fc.bias", zeros({2})}};
    c.state_tensors = {{"optimizer.state.0.momentum_buffer", ones({2, 3})}};
    c.state_json = "{\"step\": " + std::to_string(static_cast<int>(value)) + "}";
    return c;
  }
  fs::path dir_;
};

TEST_F(CheckpointTest, RoundTripsAndKeepsTheNewest) {
  for (int step = 1; step <= 5; ++step) {
    const std::string path = io::write_checkpoint(dir_.string(), step, contents(static_cast<float>(step)));
    EXPECT_EQ(fs::path(path).filename(), io::checkpoint_name(step));
    io::prune_checkpoints(dir_.string(), 2);
  }
  const std::vector<std::string> kept = io::list_checkpoints(dir_.string());
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(fs::path(kept[0]).filename(), "step-00000005");
  EXPECT_EQ(fs::path(kept[1]).filename(), "step-00000004");
  const io::CheckpointContents back = io::read_checkpoint(kept[0]);
  EXPECT_EQ(back.state_json, "{\"step\": 5}");
  ASSERT_EQ(back.model.size(), 2u);
  EXPECT_EQ(back.model[0].first, "fc.weight");
  EXPECT_EQ(back.model[0].second.to_vector<float>(), std::vector<float>(6, 5.0f));
  EXPECT_EQ(back.state_tensors[0].first, "optimizer.state.0.momentum_buffer");
  // Rewriting a step replaces it whole.
  io::write_checkpoint(dir_.string(), 5, contents(7));
  EXPECT_EQ(io::read_checkpoint(kept[0]).model[0].second.to_vector<float>(), std::vector<float>(6, 7.0f));
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".")) << entry.path();
  }
}

TEST_F(CheckpointTest, DamageIsDetectedAndSkipped) {
  io::write_checkpoint(dir_.string(), 1, contents(1));
  const std::string newest = io::write_checkpoint(dir_.string(), 2, contents(2));
  // Flip one byte of the newest's weights: its CRC no longer matches.
  const fs::path weights = fs::path(newest) / "model.safetensors";
  std::string bytes;
  {
    std::ifstream in(weights, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bytes[bytes.size() - 1] ^= 1;
  std::ofstream(weights, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_THROW(io::read_checkpoint(newest), Error);
  std::vector<std::string> warnings;
  const auto found = io::find_latest_checkpoint(dir_.string(),
                                                [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(fs::path(found->path).filename(), "step-00000001");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("CRC-32"), std::string::npos) << warnings[0];
  // Truncation and a missing manifest (an interrupted write) are damage too.
  fs::resize_file(weights, 10);
  EXPECT_THROW(io::read_checkpoint(newest), Error);
  fs::remove(fs::path(newest) / "manifest.json");
  EXPECT_THROW(io::read_checkpoint(newest), Error);
  EXPECT_FALSE(io::find_latest_checkpoint((dir_ / "none").string(), nullptr).has_value());
}

}  // namespace
}  // namespace tandem::train
