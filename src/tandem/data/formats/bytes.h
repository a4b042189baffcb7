// Bytes in, for the file parsers: whole files read into memory, gzip inflated with zlib, and
// big-endian reads. Every error names the file and the byte offset. The parsers take spans, so a
// fuzzer (or a test) can hand them any buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::data {

// Largest inflated size accepted by default (a gzip bomb stops here): 4 GiB.
inline constexpr std::size_t kMaxInflatedBytes = std::size_t{4} << 30;

// The whole file; throws naming the path when it cannot be opened or read.
std::vector<std::uint8_t> read_file(const std::filesystem::path& path);

// True when `bytes` start with the gzip magic 1f 8b.
bool is_gzip(std::span<const std::uint8_t> bytes);

// Inflates a gzip file (one or more members). Errors name `name` and the compressed byte offset:
// corrupt data, a stream that ends early, bytes after the last member, or more than `max_bytes`
// of output.
std::vector<std::uint8_t> gunzip(std::span<const std::uint8_t> bytes, std::string_view name,
                                 std::size_t max_bytes = kMaxInflatedBytes);

// read_file, then gunzip when the content is gzip.
std::vector<std::uint8_t> read_maybe_gzip(const std::filesystem::path& path);

inline std::uint32_t read_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

// Up to `max` characters of `text` for an error message, with control bytes escaped.
std::string printable(std::string_view text, std::size_t max = 40);

}  // namespace tandem::data
