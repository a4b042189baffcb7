// Tests of read_checkpoint against hostile manifests: names that point outside the checkpoint
// (/dev/zero, ../), names listed twice, sizes that disagree with the file, CRC-32 values wider
// than 32 bits, a format or version of the wrong type. Each must be an Error naming manifest.json
// and the field, before any read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "errors.h"
#include "tandem/io/checkpoint.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::error_of;
using testing::expect_contains;

class CheckpointManifest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_manifest_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    io::CheckpointContents c;
    c.model = {{"fc.weight", full({2, 3}, 0.5f)}};
    c.state_json = "{}";
    checkpoint_ = io::write_checkpoint(dir_.string(), 1, c);
    std::ifstream in(fs::path(checkpoint_) / "manifest.json");
    manifest_ = Json::parse(in);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Rewrites manifest.json with model.safetensors's entry (the first) changed; returns the
  // message of the Error that reading the checkpoint then raises.
  std::string error_with(const std::string& key, const Json& value) const {
    Json changed = manifest_;
    changed["files"][0][key] = value;
    std::ofstream(fs::path(checkpoint_) / "manifest.json", std::ios::trunc) << changed.dump(2);
    return error_of([&] { io::read_checkpoint(checkpoint_); });
  }

  fs::path dir_;
  std::string checkpoint_;
  Json manifest_;
};

TEST_F(CheckpointManifest, NamesOutsideTheCheckpointAreRefusedBeforeReading) {
  // /dev/zero exists and never ends: reading it whole would exhaust memory.
  std::string e = error_with("name", "/dev/zero");
  expect_contains(e, "manifest.json field \"name\": \"/dev/zero\"");
  e = error_with("name", "../../outside.safetensors");
  expect_contains(e, "field \"name\": \"../../outside.safetensors\"");
}

TEST_F(CheckpointManifest, ANameListedTwiceIsAnError) {
  Json changed = manifest_;
  changed["files"][0] = manifest_["files"][2];  // state.json's entry, size and CRC-32 right
  std::ofstream(fs::path(checkpoint_) / "manifest.json", std::ios::trunc) << changed.dump(2);
  expect_contains(error_of([&] { io::read_checkpoint(checkpoint_); }),
                  "field \"name\": state.json is listed twice");
}

TEST_F(CheckpointManifest, SizesAreCheckedAgainstTheFileBeforeItIsRead) {
  const std::uint64_t real = manifest_["files"][0]["bytes"].get<std::uint64_t>();
  std::string e = error_with("bytes", real + 1);
  expect_contains(e, "model.safetensors is " + std::to_string(real) + " bytes, the manifest says " +
                         std::to_string(real + 1));
  e = error_with("bytes", std::uint64_t{1} << 50);
  expect_contains(e, "manifest.json field \"bytes\": model.safetensors claims 1125899906842624");
}

TEST_F(CheckpointManifest, ACrcWiderThan32BitsDoesNotMatch) {
  const std::uint64_t crc = manifest_["files"][0]["crc32"].get<std::uint64_t>();
  expect_contains(error_with("crc32", crc + (std::uint64_t{1} << 32)),
                  "model.safetensors fails its CRC-32 check");
}

TEST_F(CheckpointManifest, FormatAndVersionOfTheWrongTypeAreErrorsNotExceptionsOfTheParser) {
  // Found by fuzz/checkpoint_fuzz.cpp: {"format": 6666666666000507367200} escaped as
  // nlohmann's type_error and terminated the process.
  const auto error_with_top = [&](const std::string& key, const Json& value) {
    Json changed = manifest_;
    changed[key] = value;
    std::ofstream(fs::path(checkpoint_) / "manifest.json", std::ios::trunc) << changed.dump(2);
    return error_of([&] { io::read_checkpoint(checkpoint_); });
  };
  expect_contains(error_with_top("format", 6.666e21), "is not a tandem checkpoint manifest");
  expect_contains(error_with_top("format", Json::array()), "is not a tandem checkpoint manifest");
  expect_contains(
      error_with_top("version", "1"),
      "manifest.json field \"version\": checkpoint version \"1\" is not supported (expected 1)");
  expect_contains(error_with_top("version", 2), "checkpoint version 2 is not supported");
  Json without = manifest_;
  without.erase("version");
  std::ofstream(fs::path(checkpoint_) / "manifest.json", std::ios::trunc) << without.dump(2);
  expect_contains(error_of([&] { io::read_checkpoint(checkpoint_); }),
                  "field \"version\": checkpoint version (missing) is not supported");
}

TEST_F(CheckpointManifest, TheUnchangedManifestReads) {
  EXPECT_EQ(io::read_checkpoint(checkpoint_).model.size(), 1u);
}

}  // namespace
}  // namespace tandem
