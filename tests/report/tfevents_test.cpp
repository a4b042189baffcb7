// TensorBoard event files: CRC-32C against its standard check value, records framed and read
// back by the tests' own reader (both CRCs checked), and damage detected.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "errors.h"
#include "event_reader.h"
#include "tandem/report/crc32c.h"
#include "tandem/report/tfevents.h"

namespace tandem::report {
namespace {

namespace fs = std::filesystem;

TEST(Crc32c, StandardCheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // 32 zero bytes: the iSCSI test vector (RFC 3720, B.4).
  const std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  // Continuing from a prefix's CRC gives the whole's.
  EXPECT_EQ(crc32c("56789", 5, crc32c("1234", 4)), 0xE3069283u);
}

TEST(TfEvents, RecordFraming) {
  const std::string data = "hello";
  const std::string record = frame_record(data);
  ASSERT_EQ(record.size(), 8 + 4 + data.size() + 4);
  EXPECT_EQ(static_cast<unsigned char>(record[0]), 5u);  // little-endian length
  EXPECT_EQ(record.substr(12, data.size()), data);
  const std::uint32_t crc = crc32c(data.data(), data.size());
  const std::uint32_t masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
  std::uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) {
    stored |= static_cast<std::uint32_t>(static_cast<unsigned char>(record[12 + data.size() + i])) << (8 * i);
  }
  EXPECT_EQ(stored, masked);
  EXPECT_EQ(masked_crc32c(data.data(), data.size()), masked);
}

class EventFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_tfevents_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(EventFileTest, ScalarsReadBack) {
  std::string path;
  {
    EventFileWriter writer(dir_.string());
    path = writer.path();
    writer.add_scalars(1, {{"train/loss", 2.5}, {"train/lr", 0.01}}, 1700000000.25);
    writer.add_scalars(300, {{"test/accuracy", 0.875}}, 1700000001.5);
  }
  EXPECT_EQ(fs::path(path).parent_path(), dir_);
  EXPECT_TRUE(fs::path(path).filename().string().starts_with("events.out.tfevents."));
  const std::vector<testing::ReadEvent> events = testing::read_event_file(path);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GT(events[0].wall_time, 1.6e9);
  EXPECT_EQ(events[1].step, 1);
  EXPECT_DOUBLE_EQ(events[1].wall_time, 1700000000.25);
  EXPECT_FLOAT_EQ(events[1].scalars.at("train/loss"), 2.5f);
  EXPECT_FLOAT_EQ(events[1].scalars.at("train/lr"), 0.01f);
  EXPECT_EQ(events[2].step, 300);  // a two-byte varint
  EXPECT_FLOAT_EQ(events[2].scalars.at("test/accuracy"), 0.875f);
}

TEST_F(EventFileTest, TheReaderNoticesDamage) {
  std::string path;
  {
    EventFileWriter writer(dir_.string());
    path = writer.path();
    writer.add_scalars(7, {{"train/loss", 1.0}}, 1700000000.0);
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bytes[bytes.size() - 6] ^= 0x01;  // inside the last record's data
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  try {
    testing::read_event_file(path);
    ADD_FAILURE() << "a flipped bit was not noticed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("data CRC mismatch"), std::string::npos) << e.what();
  }
}

TEST(TfEvents, UnwritableDirectoryIsAnError) {
  testing::expect_contains(testing::error_of([] { EventFileWriter writer("/nonexistent/tandem/dir"); }),
                           "--tensorboard: cannot create '/nonexistent/tandem/dir/");
}

}  // namespace
}  // namespace tandem::report
