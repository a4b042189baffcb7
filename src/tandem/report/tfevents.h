// TensorBoard event files ("events.out.tfevents.<time>.<host>"): TFRecord framing (little-endian
// length, masked CRC-32C of it, the bytes, their masked CRC-32C) around hand-encoded Event
// protobufs holding scalar summaries. Scalars only: no histograms, images or graphs.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::report {

using Scalars = std::vector<std::pair<std::string, double>>;  // (tag, value)

// Event{wall_time = 1, file_version = 3: "brain.Event:2"}: every event file's first record.
std::string encode_version_event(double wall_time);
// Event{wall_time = 1, step = 2, summary = 5: Summary{value = 1: {tag = 1, simple_value = 2}...}}
std::string encode_scalar_event(double wall_time, std::int64_t step, const Scalars& scalars);
// One TFRecord around `data`.
std::string frame_record(std::string_view data);

// Appends events to a new file in `directory`; each add_scalars() is flushed at once, so
// TensorBoard (and a crash) sees whole records only.
class EventFileWriter {
 public:
  explicit EventFileWriter(const std::string& directory);
  void add_scalars(std::int64_t step, const Scalars& scalars, double wall_time);
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& event);
  std::string path_;
  std::ofstream out_;
};

// Seconds since the Unix epoch, as Event.wall_time wants them.
double unix_time();

}  // namespace tandem::report
