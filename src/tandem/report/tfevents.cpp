// Protobuf wire encoding of the few Event fields tandem writes, and the TFRecord file writer.
#include "tandem/report/tfevents.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "tandem/base/check.h"
#include "tandem/report/crc32c.h"

namespace tandem::report {
namespace {

// Wire types: 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit.
void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire_type));
}

template <typename T>
void put_little_endian(std::string& out, T value) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  if constexpr (std::endian::native == std::endian::big) std::reverse(bytes, bytes + sizeof(T));
  out.append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_double(std::string& out, int field, double v) {
  put_key(out, field, 1);
  put_little_endian(out, v);
}

}  // namespace

std::string encode_version_event(double wall_time) {
  std::string event;
  put_double(event, 1, wall_time);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

std::string encode_scalar_event(double wall_time, std::int64_t step, const Scalars& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes(v, 1, tag);
    put_key(v, 2, 5);
    put_little_endian(v, static_cast<float>(value));
    put_bytes(summary, 1, v);
  }
  std::string event;
  put_double(event, 1, wall_time);
  put_key(event, 2, 0);
  put_varint(event, static_cast<std::uint64_t>(step));  // int64: two's complement, as protobuf
  put_bytes(event, 5, summary);
  return event;
}

std::string frame_record(std::string_view data) {
  std::string record;
  std::string length;
  put_little_endian(length, static_cast<std::uint64_t>(data.size()));
  record += length;
  put_little_endian(record, masked_crc32c(length.data(), length.size()));
  record.append(data);
  put_little_endian(record, masked_crc32c(data.data(), data.size()));
  return record;
}

double unix_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventFileWriter::EventFileWriter(const std::string& directory) {
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  const double now = unix_time();
  // The pid keeps two writers started in the same second apart.
  path_ = (std::filesystem::path(directory) /
           ("events.out.tfevents." + std::to_string(static_cast<long long>(now)) + "." + host + "." +
            std::to_string(::getpid())))
              .string();
  out_.open(path_, std::ios::binary | std::ios::trunc);
  TANDEM_CHECK(out_.good(), "--tensorboard: cannot create '", path_, "'");
  write(encode_version_event(now));
}

void EventFileWriter::add_scalars(std::int64_t step, const Scalars& scalars, double wall_time) {
  write(encode_scalar_event(wall_time, step, scalars));
}

void EventFileWriter::write(const std::string& event) {
  out_ << frame_record(event);
  out_.flush();
  TANDEM_CHECK(out_.good(), "--tensorboard: writing '", path_, "' failed");
}

}  // namespace tandem::report
