// The tests' own TensorBoard event-file reader, written from the format's description and sharing
// no code with the writer: TFRecord framing with both masked CRC-32Cs checked, and a generic
// protobuf wire walk that picks out Event{wall_time, step, file_version, summary{value{tag,
// simple_value}}}.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tandem/report/crc32c.h"

namespace tandem::testing {

struct ReadEvent {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string file_version;
  std::map<std::string, float> scalars;
};

namespace event_detail {

inline std::uint64_t little_endian(const std::string& bytes, std::size_t at, std::size_t n) {
  if (at + n > bytes.size()) throw std::runtime_error("event file: record cut short");
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

inline std::uint32_t masked(const std::string& bytes, std::size_t at, std::size_t n) {
  const std::uint32_t crc = report::crc32c(bytes.data() + at, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// Calls field(number, wire_type, varint_or_fixed, bytes) for each field of a message.
template <typename F>
void walk(const std::string& message, F field) {
  std::size_t at = 0;
  const auto varint = [&]() {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (at >= message.size() || shift > 63) throw std::runtime_error("protobuf: bad varint");
      const auto byte = static_cast<unsigned char>(message[at++]);
      v |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return v;
    }
  };
  while (at < message.size()) {
    const std::uint64_t key = varint();
    const int number = static_cast<int>(key >> 3);
    const int wire = static_cast<int>(key & 7);
    if (wire == 0) {
      field(number, wire, varint(), std::string());
    } else if (wire == 1 || wire == 5) {
      const std::size_t n = wire == 1 ? 8 : 4;
      field(number, wire, little_endian(message, at, n), std::string());
      at += n;
    } else if (wire == 2) {
      const std::uint64_t n = varint();
      if (at + n > message.size()) throw std::runtime_error("protobuf: field runs past the end");
      field(number, wire, 0, message.substr(at, n));
      at += n;
    } else {
      throw std::runtime_error("protobuf: unexpected wire type " + std::to_string(wire));
    }
  }
}

template <typename T, typename U>
T bit_cast_from(U bits) {
  T value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace event_detail

// Every record of an event file; throws std::runtime_error naming what is wrong (a CRC
// mismatch, a cut record, bad protobuf).
inline std::vector<ReadEvent> read_event_file(const std::string& path) {
  using namespace event_detail;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<ReadEvent> events;
  for (std::size_t at = 0; at < bytes.size();) {
    const std::uint64_t length = little_endian(bytes, at, 8);
    if (little_endian(bytes, at + 8, 4) != masked(bytes, at, 8)) {
      throw std::runtime_error("record at " + std::to_string(at) + ": length CRC mismatch");
    }
    const std::size_t data = at + 12;
    if (little_endian(bytes, data + length, 4) != masked(bytes, data, length)) {
      throw std::runtime_error("record at " + std::to_string(at) + ": data CRC mismatch");
    }
    ReadEvent event;
    walk(bytes.substr(data, length), [&](int number, int wire, std::uint64_t v, const std::string& b) {
      if (number == 1 && wire == 1) event.wall_time = bit_cast_from<double>(v);
      if (number == 2 && wire == 0) event.step = static_cast<std::int64_t>(v);
      if (number == 3 && wire == 2) event.file_version = b;
      if (number == 5 && wire == 2) {
        walk(b, [&](int n1, int w1, std::uint64_t, const std::string& value) {
          if (n1 != 1 || w1 != 2) return;
          std::string tag;
          std::optional<float> simple;
          walk(value, [&](int n2, int w2, std::uint64_t v2, const std::string& b2) {
            if (n2 == 1 && w2 == 2) tag = b2;
            if (n2 == 2 && w2 == 5) simple = bit_cast_from<float>(static_cast<std::uint32_t>(v2));
          });
          if (simple) event.scalars[tag] = *simple;
        });
      }
    });
    events.push_back(std::move(event));
    at = data + length + 4;
  }
  return events;
}

}  // namespace tandem::testing
