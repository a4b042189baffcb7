// Helpers for the data tests: a scratch directory removed afterwards, file writing, gzip
// compression (zlib), IDX buffers, and expecting an error whose message holds given pieces.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "errors.h"
#include "tandem/tandem.h"

namespace tandem::data::testing {

using Bytes = std::vector<std::uint8_t>;

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("tandem_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  write_file(path, Bytes(text.begin(), text.end()));
}

// gzip framing (deflate with windowBits 16 + 15), as the gzip tool writes.
inline Bytes gzip(const Bytes& data) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  Bytes out(deflateBound(&zs, static_cast<uLong>(data.size())) + 32);
  zs.next_in = const_cast<Bytef*>(data.data());
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// An IDX buffer: magic 0 0 type rank, big-endian sizes, then `data`.
inline Bytes idx_bytes(const std::vector<std::uint32_t>& dims, const Bytes& data,
                       std::uint8_t type = 0x08) {
  Bytes out{0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8)
      out.push_back(static_cast<std::uint8_t>(d >> shift));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// The message of the Error a callable throws (tests/support/errors.h).
using tandem::testing::error_of;

// Expects every piece in the message.
#define TANDEM_EXPECT_ERROR_HAS(message, ...)                                 \
  do {                                                                        \
    const std::string& msg_ = (message);                                      \
    for (const std::string& piece_ : std::vector<std::string>{__VA_ARGS__}) { \
      EXPECT_NE(msg_.find(piece_), std::string::npos)                         \
          << "missing '" << piece_ << "' in: " << msg_;                       \
    }                                                                         \
  } while (0)

// Number of threads in this process (Linux).
inline std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

}  // namespace tandem::data::testing
