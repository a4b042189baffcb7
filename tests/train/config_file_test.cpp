// Tests of config files from outside: a bad value is an error naming the file (not only the
// flag), a deeply nested value is an error rather than a stack overflow, and the worker count is
// bounded like the DataLoader's or auto (the default), which resolves by the devices and cores and
// is written back as "auto".
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "errors.h"
#include "tandem/train/config.h"

namespace tandem::train {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::expect_contains;

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_config_file_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `text` to NAME in the test directory; the error of applying it as a config file.
  std::string error_of_file(const std::string& name, const std::string& text) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::trunc) << text;
    TrainConfig config;
    return error_of([&] { apply_config_file(config, path); });
  }

  fs::path dir_;
};

TEST_F(ConfigFile, BadValuesNameTheFileAndTheSetting) {
  std::string e = error_of_file("zero.json", R"({"batch_size": 0})");
  expect_contains(e, "zero.json: --batch-size: 0 is not a positive batch size");
  e = error_of_file("nan.toml", "lr = nan\n");
  expect_contains(e, "nan.toml: --lr: nan is not a positive finite learning rate");
  e = error_of_file("workers.json", R"({"workers": 1000000000})");
  expect_contains(e, "workers.json: --workers: 1000000000 is not auto or in [0, 1024]");
  e = error_of_file("negative.json", R"({"workers": -2})");
  expect_contains(e, "negative.json: --workers: -2 is not auto or in [0, 1024]");
}

TEST_F(ConfigFile, WorkersAutoIsTheDefaultAndResolvesByDevicesAndCores) {
  TrainConfig config;
  EXPECT_EQ(config.workers, kAutoWorkers);
  EXPECT_EQ(loader_workers(kAutoWorkers, /*gpu_trains=*/false, 16), 2);
  EXPECT_EQ(loader_workers(kAutoWorkers, true, 16), 8);
  EXPECT_EQ(loader_workers(kAutoWorkers, true, 64), 8);
  EXPECT_EQ(loader_workers(kAutoWorkers, true, 10), 5);
  EXPECT_EQ(loader_workers(kAutoWorkers, true, 2), 2);
  EXPECT_EQ(loader_workers(0, true, 16), 0);
  EXPECT_EQ(loader_workers(3, false, 16), 3);
  set_from_text(config, "workers", "4");
  EXPECT_EQ(config.workers, 4);
  set_from_text(config, "workers", "auto");
  EXPECT_EQ(config.workers, kAutoWorkers);
  EXPECT_NE(to_json(config).find("\"workers\": \"auto\""), std::string::npos) << to_json(config);
  const std::string path = (dir_ / "auto.json").string();
  std::ofstream(path) << R"({"workers": "auto"})";
  config.workers = 4;
  apply_config_file(config, path);
  EXPECT_EQ(config.workers, kAutoWorkers);
}

TEST_F(ConfigFile, DeeplyNestedValueIsAnErrorNotAStackOverflow) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_contains(error_of_file("deep.json", "{\"model\": " + deep + "}"),
                  "setting 'model' has a value of unsupported type array");
}

TEST_F(ConfigFile, AGoodFileApplies) {
  const std::string path = (dir_ / "good.toml").string();
  std::ofstream(path) << "[train]\nbatch_size = 8\nworkers = 1024\n";
  TrainConfig config;
  apply_config_file(config, path);
  EXPECT_EQ(config.batch_size, 8);
  EXPECT_EQ(config.workers, 1024);
}

}  // namespace
}  // namespace tandem::train
