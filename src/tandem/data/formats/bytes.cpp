// File reading and gzip inflation (zlib's inflate with gzip framing).
#include "tandem/data/formats/bytes.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "tandem/base/check.h"

namespace tandem::data {

std::vector<std::uint8_t> read_file(const std::filesystem::path& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  TANDEM_CHECK(file != nullptr, path.string(), ": cannot open (", std::strerror(errno), ")");
  // Read straight into a buffer of the file's size (touching every page once: fresh pages are
  // expensive), then in chunks past it should the file have grown or not report a size.
  std::error_code ec;
  const std::uintmax_t expected = std::filesystem::file_size(path, ec);
  std::vector<std::uint8_t> out(ec ? 0 : static_cast<std::size_t>(expected));
  std::size_t got_total = std::fread(out.data(), 1, out.size(), file.get());
  out.resize(got_total);
  std::uint8_t chunk[1 << 16];
  for (;;) {
    if (std::ferror(file.get())) break;
    const std::size_t got = std::fread(chunk, 1, sizeof chunk, file.get());
    out.insert(out.end(), chunk, chunk + got);
    if (got < sizeof chunk) break;
  }
  TANDEM_CHECK(!std::ferror(file.get()), path.string(), ": read error at offset ", out.size(), " (",
               std::strerror(errno), ")");
  return out;
}

bool is_gzip(std::span<const std::uint8_t> bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

std::vector<std::uint8_t> gunzip(std::span<const std::uint8_t> bytes, std::string_view name,
                                 std::size_t max_bytes) {
  TANDEM_CHECK(is_gzip(bytes), name, ": not a gzip stream at offset 0 (no 1f 8b magic)");
  z_stream zs{};
  TANDEM_CHECK(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, name, ": zlib cannot start inflating");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, &inflateEnd);

  // Start from the size the last member's trailer claims (ISIZE, modulo 2^32: exact for the usual
  // single member under 4 GiB), but never above what deflate can reach (about 1032:1), so a lying
  // trailer cannot force a huge allocation; without a trailer, from 4 times the input. A larger
  // first guess would cost: every byte of the buffer is touched (zeroed) up front.
  std::size_t guess = bytes.size() * 4;
  if (bytes.size() >= 18) {
    const std::uint8_t* t = bytes.data() + bytes.size() - 4;
    const std::size_t isize = std::uint32_t{t[0]} | (std::uint32_t{t[1]} << 8) |
                              (std::uint32_t{t[2]} << 16) | (std::uint32_t{t[3]} << 24);
    guess = std::min(isize, bytes.size() * 1032);
  }
  std::vector<std::uint8_t> out(std::min(std::max<std::size_t>(guess, 1024), max_bytes));
  std::size_t in_pos = 0;   // compressed bytes consumed (over all members)
  std::size_t out_pos = 0;  // inflated bytes produced
  for (;;) {
    if (out_pos == out.size()) {
      TANDEM_CHECK(out.size() < max_bytes, name, ": inflated data exceeds the limit of ", max_bytes,
                   " bytes (compressed offset ", in_pos, ")");
      out.resize(std::min(out.size() * 2, max_bytes));
    }
    const std::size_t in_chunk = std::min<std::size_t>(bytes.size() - in_pos, 1u << 30);
    const std::size_t out_chunk = std::min<std::size_t>(out.size() - out_pos, 1u << 30);
    zs.next_in = const_cast<Bytef*>(bytes.data() + in_pos);
    zs.avail_in = static_cast<uInt>(in_chunk);
    zs.next_out = out.data() + out_pos;
    zs.avail_out = static_cast<uInt>(out_chunk);
    const int ret = inflate(&zs, Z_NO_FLUSH);
    in_pos += in_chunk - zs.avail_in;
    out_pos += out_chunk - zs.avail_out;
    if (ret == Z_STREAM_END) {
      if (in_pos == bytes.size()) break;
      // Another member follows (as `cat a.gz b.gz` makes), or trailing bytes that are not one.
      TANDEM_CHECK(is_gzip(bytes.subspan(in_pos)), name, ": ", bytes.size() - in_pos,
                   " unexpected bytes after the gzip stream at offset ", in_pos);
      TANDEM_CHECK(inflateReset(&zs) == Z_OK, name, ": zlib cannot restart at offset ", in_pos);
      continue;
    }
    if (ret == Z_OK) continue;
    if (ret == Z_BUF_ERROR && zs.avail_out == 0) continue;  // needs more room: grown above
    TANDEM_CHECK(!(ret == Z_BUF_ERROR && in_pos == bytes.size()), name,
                 ": gzip stream is truncated at offset ", in_pos,
                 " (the compressed data ends before the stream does)");
    TANDEM_FAIL(name, ": corrupt gzip stream near offset ", in_pos,
                " (zlib: ", zs.msg ? zs.msg : "error", ")");
  }
  out.resize(out_pos);
  if (out.capacity() > out_pos + out_pos / 8) out.shrink_to_fit();  // the caller may keep it
  return out;
}

std::vector<std::uint8_t> read_maybe_gzip(const std::filesystem::path& path) {
  std::vector<std::uint8_t> bytes = read_file(path);
  if (is_gzip(bytes)) return gunzip(bytes, path.string());
  return bytes;
}

std::string printable(std::string_view text, std::size_t max) {
  std::string out;
  constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < text.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (text.size() > max) out += "...";
  return out;
}

}  // namespace tandem::data
