// safetensors reading and writing. Layout: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data
// buffer, offsets relative to its start. The reader checks every field before allocating from it.
#include "tandem/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "tandem/io/file_util.h"
#include "tandem/tensor/factories.h"

namespace tandem::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; tandem reads it on little-endian hosts only");

using Json = nlohmann::ordered_json;

constexpr std::uint64_t kPrefixBytes = 8;
constexpr const char* kMetadataKey = "__metadata__";
// The format nests three levels (header, tensor, shape); errors print values, and printing a
// value nested much deeper would recurse past the stack.
constexpr int kMaxHeaderDepth = 32;

// A name or value as it appears in an error: quoted, non-printable bytes escaped, long ones cut.
std::string show(std::string_view text) {
  constexpr std::size_t kMax = 120;
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMax) out += "...";
  return out + "\"";
}

// Text from elsewhere (a parser's message quoting the input) made safe for a one-line error.
std::string printable(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

// A JSON value as it appears in an error (compact, cut when long).
std::string show_json(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 120) text = text.substr(0, 120) + "...";
  return text;
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (DType d : {DType::Float32, DType::Float64, DType::BFloat16, DType::Int64, DType::UInt8}) {
    if (safetensors_dtype_name(d) == name) return d;
  }
  return std::nullopt;
}

// The dtype names of the safetensors format that tandem has no tensor type for.
bool is_known_safetensors_dtype(std::string_view name) {
  static constexpr std::string_view kOthers[] = {"BOOL", "I8",  "I16",     "I32",     "U16", "U32",
                                                 "U64",  "F16", "F8_E4M3", "F8_E5M2", "C64"};
  return std::find(std::begin(kOthers), std::end(kOthers), name) != std::end(kOthers);
}

// A non-negative JSON integer, or nothing (negative, fractional, not a number).
std::optional<std::uint64_t> as_unsigned(const Json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer()) {
    const auto v = value.get<std::int64_t>();
    if (v >= 0) return static_cast<std::uint64_t>(v);
  }
  return std::nullopt;
}

struct Entry {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

struct Header {
  std::vector<Entry> entries;  // sorted by data offset (file order)
  Metadata metadata;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& source, std::uint64_t buffer_bytes)
      : source_(source), buffer_bytes_(buffer_bytes) {}

  Header parse(std::string_view text) {
    Json root = parse_json(text);
    if (!root.is_object()) {
      fail("field \"header\": expected a JSON object, got ", show_json(root));
    }
    Header header;
    for (const auto& [key, value] : root.items()) {
      if (key == kMetadataKey) {
        header.metadata = parse_metadata(value);
      } else {
        header.entries.push_back(parse_entry(key, value));
      }
    }
    check_tiling(header.entries);
    return header;
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const {
    TANDEM_FAIL("safetensors ", show(source_), ": ", args...);
  }

  // Parses with a callback that notices repeated keys in any object (nlohmann keeps the last
  // silently; a repeated tensor name must be an error).
  Json parse_json(std::string_view text) const {
    std::vector<std::set<std::string>> open_objects;
    std::string duplicate;
    bool duplicate_is_name = false;
    bool too_deep = false;
    auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
      switch (event) {
        case Json::parse_event_t::object_start:
          open_objects.emplace_back();
          too_deep = too_deep || depth > kMaxHeaderDepth;
          break;
        case Json::parse_event_t::array_start:
          too_deep = too_deep || depth > kMaxHeaderDepth;
          break;
        case Json::parse_event_t::object_end:
          if (!open_objects.empty()) open_objects.pop_back();
          break;
        case Json::parse_event_t::key:
          if (!open_objects.empty() && parsed.is_string() && duplicate.empty()) {
            auto key = parsed.get<std::string>();
            if (!open_objects.back().insert(key).second) {
              duplicate = std::move(key);
              duplicate_is_name = open_objects.size() == 1;
            }
          }
          break;
        default:
          break;
      }
      return true;
    };
    Json root;
    try {
      root = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                         /*ignore_comments=*/false);
    } catch (const Json::exception& e) {
      fail("field \"header\": not valid JSON (", printable(e.what()), ")");
    }
    if (too_deep) fail("field \"header\": JSON nested deeper than ", kMaxHeaderDepth, " levels");
    if (!duplicate.empty()) {
      if (duplicate_is_name) fail("field \"name\": duplicate tensor name ", show(duplicate));
      fail("field ", show(duplicate), ": appears twice in one object of the header");
    }
    return root;
  }

  Metadata parse_metadata(const Json& value) const {
    if (!value.is_object()) {
      fail("field \"__metadata__\": expected an object of strings, got ", show_json(value));
    }
    Metadata metadata;
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string()) {
        fail("field \"__metadata__\": value of ", show(key), " is not a string: ", show_json(item));
      }
      metadata.emplace(key, item.get<std::string>());
    }
    return metadata;
  }

  const Json& field(const std::string& name, const Json& entry, const char* key) const {
    auto it = entry.find(key);
    if (it == entry.end()) fail("tensor ", show(name), ": field \"", key, "\" is missing");
    return *it;
  }

  Entry parse_entry(const std::string& name, const Json& value) const {
    if (!value.is_object()) {
      fail("tensor ", show(name), ": expected an object with dtype, shape and data_offsets, got ",
           show_json(value));
    }
    Entry entry;
    entry.name = name;

    const Json& dtype = field(name, value, "dtype");
    if (!dtype.is_string()) {
      fail("tensor ", show(name), " field \"dtype\": expected a string, got ", show_json(dtype));
    }
    const auto dtype_text = dtype.get<std::string>();
    const auto parsed = dtype_from_safetensors(dtype_text);
    if (!parsed) {
      fail("tensor ", show(name), " field \"dtype\": ",
           is_known_safetensors_dtype(dtype_text) ? "unsupported dtype " : "unknown dtype ",
           show(dtype_text), " (tandem reads F32, F64, BF16, I64, U8)");
    }
    entry.dtype = *parsed;

    const Json& shape = field(name, value, "shape");
    if (!shape.is_array()) {
      fail("tensor ", show(name), " field \"shape\": expected an array, got ", show_json(shape));
    }
    // The product of the non-zero dimensions must be addressable in bytes even when another
    // dimension is zero, so that no later element count can overflow.
    std::uint64_t count = 1;
    bool overflow = false;
    bool has_zero = false;
    for (const Json& dim : shape) {
      const auto d = as_unsigned(dim);
      if (!d) {
        fail("tensor ", show(name), " field \"shape\": entry ", show_json(dim),
             " is not a non-negative integer (shape ", show_json(shape), ")");
      }
      if (*d == 0) {
        has_zero = true;
      } else {
        overflow = overflow || __builtin_mul_overflow(count, *d, &count);
      }
      entry.shape.push_back(static_cast<std::int64_t>(*d));  // > int64 max fails below
    }
    std::uint64_t nbytes = 0;
    overflow = overflow || __builtin_mul_overflow(count, element_size(entry.dtype), &nbytes) ||
               nbytes > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (overflow) {
      fail("tensor ", show(name), " field \"shape\": ", show_json(shape),
           " has more elements than can be addressed");
    }
    if (has_zero) nbytes = 0;

    const Json& offsets = field(name, value, "data_offsets");
    if (!offsets.is_array() || offsets.size() != 2) {
      fail("tensor ", show(name), " field \"data_offsets\": expected [begin, end], got ",
           show_json(offsets));
    }
    const auto begin = as_unsigned(offsets[0]);
    const auto end = as_unsigned(offsets[1]);
    if (!begin || !end) {
      fail("tensor ", show(name), " field \"data_offsets\": ", show_json(offsets),
           " are not two non-negative integers");
    }
    if (*begin > *end) {
      fail("tensor ", show(name), " field \"data_offsets\": begin ", *begin, " is after end ",
           *end);
    }
    if (*end > buffer_bytes_) {
      fail("tensor ", show(name), " field \"data_offsets\": end ", *end,
           " is beyond the data buffer (", buffer_bytes_, " bytes)");
    }
    if (*end - *begin != nbytes) {
      fail("tensor ", show(name), " field \"data_offsets\": ", show_json(offsets), " span ",
           *end - *begin, " bytes but shape ", show_json(shape), " of ", dtype_text, " needs ",
           nbytes);
    }
    entry.begin = *begin;
    entry.end = *end;
    return entry;
  }

  // Sorts into file order and checks that the tensors tile the buffer exactly.
  void check_tiling(std::vector<Entry>& entries) const {
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::uint64_t expected = 0;
    const Entry* previous = nullptr;
    for (const Entry& e : entries) {
      if (e.begin < expected) {
        fail("tensor ", show(e.name), " field \"data_offsets\": [", e.begin, ", ", e.end,
             "] overlaps tensor ", show(previous->name), " [", previous->begin, ", ", previous->end,
             "]");
      }
      if (e.begin > expected) {
        fail("tensor ", show(e.name), " field \"data_offsets\": [", e.begin, ", ", e.end,
             "] leaves a gap of ", e.begin - expected, " bytes after ",
             previous ? "tensor " + show(previous->name) : std::string("the buffer start"),
             " (which ends at ", expected, ")");
      }
      expected = e.end;
      previous = &e;
    }
    if (expected != buffer_bytes_) {
      fail("field \"file size\": ", buffer_bytes_ - expected,
           " trailing bytes after the last tensor (data buffer is ", buffer_bytes_,
           " bytes, tensors end at ", expected, ")");
    }
  }

  const std::string& source_;
  std::uint64_t buffer_bytes_;
};

// Reads `n` bytes at `offset` of the data source into `dst`.
using ReadAt = std::function<void(void* dst, std::uint64_t offset, std::uint64_t n)>;

// The common loader: validates the prefix and header, then fills one tensor per entry.
LoadedTensors load(const std::string& source, std::uint64_t total_bytes, const ReadAt& read_at) {
  TANDEM_CHECK(total_bytes >= kPrefixBytes, "safetensors ", show(source),
               ": field \"file size\": ", total_bytes,
               " bytes is shorter than the 8-byte header length");
  std::uint8_t prefix[kPrefixBytes];
  read_at(prefix, 0, kPrefixBytes);
  std::uint64_t header_bytes = 0;
  for (std::size_t i = 0; i < kPrefixBytes; ++i) {
    header_bytes |= static_cast<std::uint64_t>(prefix[i]) << (8 * i);
  }
  TANDEM_CHECK(header_bytes <= kMaxSafetensorsHeaderBytes, "safetensors ", show(source),
               ": field \"header length\": ", header_bytes, " exceeds the limit of ",
               kMaxSafetensorsHeaderBytes, " bytes");
  TANDEM_CHECK(header_bytes <= total_bytes - kPrefixBytes, "safetensors ", show(source),
               ": field \"header length\": ", header_bytes, " is larger than the ",
               total_bytes - kPrefixBytes, " bytes that follow it");
  std::string text(header_bytes, '\0');
  read_at(text.data(), kPrefixBytes, header_bytes);
  const std::uint64_t data_start = kPrefixBytes + header_bytes;
  Header header = HeaderParser(source, total_bytes - data_start).parse(text);

  LoadedTensors out;
  out.metadata = std::move(header.metadata);
  out.tensors.reserve(header.entries.size());
  for (const Entry& e : header.entries) {
    Tensor t = empty(e.shape, {.dtype = e.dtype});
    if (e.end > e.begin) read_at(t.raw_data(), data_start + e.begin, e.end - e.begin);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

// What save_safetensors writes: the prefix and padded header, then each tensor's bytes.
struct Prepared {
  std::string head;          // 8-byte length + header JSON + padding
  std::vector<Tensor> host;  // CPU, contiguous, in the given order
  std::uint64_t total_bytes = 0;
};

Prepared prepare(const nn::StateDict& tensors, const Metadata& metadata, const std::string& dest) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header[kMetadataKey] = std::move(meta);
  }
  Prepared out;
  std::set<std::string_view> seen;
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    TANDEM_CHECK(!name.empty(), "save_safetensors ", show(dest),
                 ": field \"name\": a tensor has an empty name");
    TANDEM_CHECK(name != kMetadataKey, "save_safetensors ", show(dest),
                 ": field \"name\": ", show(name), " is reserved for the metadata");
    TANDEM_CHECK(seen.insert(name).second, "save_safetensors ", show(dest),
                 ": field \"name\": duplicate tensor name ", show(name));
    TANDEM_CHECK(tensor.defined(), "save_safetensors ", show(dest), ": tensor ", show(name),
                 " is undefined");
    Tensor host = copy_to(tensor, kCPU);
    if (!host.is_contiguous()) host = contiguous_copy(host);
    const std::uint64_t nbytes = host.nbytes();
    Json entry = Json::object();
    entry["dtype"] = std::string(safetensors_dtype_name(host.dtype()));
    entry["shape"] = host.shape();
    entry["data_offsets"] = {offset, offset + nbytes};
    header[name] = std::move(entry);
    offset += nbytes;
    out.host.push_back(std::move(host));
  }
  std::string text;
  try {
    text = header.dump(-1, ' ', false, Json::error_handler_t::strict);
  } catch (const Json::exception& e) {
    TANDEM_FAIL("save_safetensors ", show(dest),
                ": field \"header\": a name or metadata string is not valid UTF-8 (", e.what(),
                ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data buffer starts 8-byte aligned
  out.head.resize(kPrefixBytes);
  for (std::size_t i = 0; i < kPrefixBytes; ++i) {
    out.head[i] = static_cast<char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xff);
  }
  out.head += text;
  out.total_bytes = out.head.size() + offset;
  return out;
}

}  // namespace

std::vector<std::uint8_t> to_safetensors_buffer(const nn::StateDict& tensors,
                                                const Metadata& metadata) {
  Prepared prepared = prepare(tensors, metadata, "<memory>");
  std::vector<std::uint8_t> out;
  out.reserve(prepared.total_bytes);
  out.insert(out.end(), prepared.head.begin(), prepared.head.end());
  for (const Tensor& t : prepared.host) {
    const auto* p = static_cast<const std::uint8_t*>(t.raw_data());
    if (t.nbytes() > 0) out.insert(out.end(), p, p + t.nbytes());
  }
  return out;
}

void save_safetensors(const std::string& path, const nn::StateDict& tensors,
                      const Metadata& metadata) {
  Prepared prepared = prepare(tensors, metadata, path);
  std::vector<ByteRun> runs{{prepared.head.data(), prepared.head.size()}};
  for (const Tensor& t : prepared.host) {
    if (t.nbytes() > 0) runs.push_back({t.raw_data(), t.nbytes()});
  }
  write_atomic(path, runs, "save_safetensors " + show(path));
}

LoadedTensors load_safetensors(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  TANDEM_CHECK(fd.get() >= 0, "safetensors ", show(path), ": cannot open: ", errno_text(errno));
  struct stat st {};
  TANDEM_CHECK(::fstat(fd.get(), &st) == 0, "safetensors ", show(path),
               ": cannot stat: ", errno_text(errno));
  TANDEM_CHECK(S_ISREG(st.st_mode), "safetensors ", show(path), ": not a regular file");
  const auto total = static_cast<std::uint64_t>(st.st_size);
  auto read_at = [&](void* dst, std::uint64_t offset, std::uint64_t n) {
    auto* p = static_cast<char*>(dst);
    while (n > 0) {
      const ssize_t got = ::pread(fd.get(), p, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      TANDEM_CHECK(got >= 0, "safetensors ", show(path), ": read at byte ", offset,
                   " failed: ", errno_text(errno));
      TANDEM_CHECK(got > 0, "safetensors ", show(path), ": field \"file size\": the file ended at ",
                   offset, " bytes, before the ", total, " it had when opened");
      p += got;
      offset += static_cast<std::uint64_t>(got);
      n -= static_cast<std::uint64_t>(got);
    }
  };
  return load(path, total, read_at);
}

LoadedTensors from_safetensors_buffer(const std::uint8_t* data, std::size_t size,
                                      const std::string& source) {
  TANDEM_CHECK(data != nullptr || size == 0, "safetensors ", show(source), ": null buffer");
  auto read_at = [&](void* dst, std::uint64_t offset, std::uint64_t n) {
    std::memcpy(dst, data + offset, n);  // offset + n <= size: checked by load()
  };
  return load(source, size, read_at);
}

}  // namespace tandem::io
