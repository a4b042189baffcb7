// Checkpoint directories: atomic write (temp dir, fsync, rename, fsync parent), validated read.
#include "tandem/io/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include <unistd.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include "tandem/base/check.h"
#include "tandem/io/file_util.h"
#include "tandem/io/safetensors.h"

namespace tandem::io {
namespace fs = std::filesystem;
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kContext = "checkpoint";  // how file_util's errors begin
constexpr const char* kFormat = "tandem-checkpoint";
constexpr int kVersion = 1;
constexpr const char* kManifest = "manifest.json";
constexpr const char* kPrefix = "step-";
// The largest file a checkpoint may hold (a guard against a corrupted size field).
constexpr std::uint64_t kMaxFileBytes = std::uint64_t{1} << 40;

std::vector<std::uint8_t> read_all(const fs::path& path, const std::string& where) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK(in.good(), where, ": cannot open ", path.filename().string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The step of a directory named step-N; -1 for any other name.
std::int64_t step_of(const std::string& name) {
  if (!name.starts_with(kPrefix)) return -1;
  const std::string_view digits = std::string_view(name).substr(std::strlen(kPrefix));
  std::int64_t step = -1;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) return -1;
  return step;
}

Json file_entry(const std::string& name, const std::vector<std::uint8_t>& bytes) {
  Json entry;
  entry["name"] = name;
  entry["bytes"] = bytes.size();
  entry["crc32"] = crc32_of(bytes.data(), bytes.size());
  return entry;
}

}  // namespace

std::uint32_t crc32_of(const void* data, std::size_t size) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {
    const uInt chunk = static_cast<uInt>(std::min<std::size_t>(size, 1u << 30));
    crc = ::crc32(crc, bytes, chunk);
    bytes += chunk;
    size -= chunk;
  }
  return static_cast<std::uint32_t>(crc);
}

std::string checkpoint_name(std::int64_t step) {
  TANDEM_CHECK(step >= 0, "checkpoint: negative step ", step);
  std::string digits = std::to_string(step);
  if (digits.size() < 8) digits.insert(0, 8 - digits.size(), '0');
  return kPrefix + digits;
}

std::string write_checkpoint(const std::string& dir, std::int64_t step,
                             const CheckpointContents& contents) {
  const fs::path parent(dir);
  std::error_code ec;
  fs::create_directories(parent, ec);
  TANDEM_CHECK(!ec, "checkpoint: cannot create directory '", dir, "': ", ec.message());
  const std::string name = checkpoint_name(step);
  const std::string pid = std::to_string(::getpid());
  const fs::path tmp = parent / (".tmp-" + name + "-" + pid);
  const fs::path final_path = parent / name;
  fs::remove_all(tmp, ec);
  TANDEM_CHECK(fs::create_directory(tmp, ec) && !ec, "checkpoint: cannot create '", tmp.string(),
               "': ", ec.message());

  const std::vector<std::pair<std::string, std::vector<std::uint8_t>>> files = {
      {"model.safetensors", to_safetensors_buffer(contents.model)},
      {"state.safetensors", to_safetensors_buffer(contents.state_tensors)},
      {"state.json", std::vector<std::uint8_t>(contents.state_json.begin(),
                                               contents.state_json.end())}};
  Json manifest;
  manifest["format"] = kFormat;
  manifest["version"] = kVersion;
  manifest["step"] = step;
  manifest["files"] = Json::array();
  for (const auto& [file, bytes] : files) {
    write_synced(tmp / file, {{bytes.data(), bytes.size()}}, kContext);
    manifest["files"].push_back(file_entry(file, bytes));
  }
  // The manifest goes last: a directory without one is incomplete.
  const std::string manifest_text = manifest.dump(2) + "\n";
  write_synced(tmp / kManifest, {{manifest_text.data(), manifest_text.size()}}, kContext);
  fsync_path(tmp, true, kContext);

  // Replace an older checkpoint of the same step only now that the new one is whole.
  const fs::path aside = parent / (".old-" + name + "-" + pid);
  const bool replacing = fs::exists(final_path);
  if (replacing) {
    fs::remove_all(aside, ec);
    TANDEM_CHECK(::rename(final_path.c_str(), aside.c_str()) == 0, "checkpoint: cannot move '",
                 final_path.string(), "' aside: ", errno_text());
  }
  TANDEM_CHECK(::rename(tmp.c_str(), final_path.c_str()) == 0, "checkpoint: rename of '",
               tmp.string(), "' to '", final_path.string(), "' failed: ", errno_text());
  fsync_path(parent, true, kContext);
  if (replacing) fs::remove_all(aside, ec);
  return final_path.string();
}

CheckpointContents read_checkpoint(const std::string& path) {
  const fs::path dir(path);
  const std::string where = "checkpoint '" + path + "'";
  TANDEM_CHECK(fs::is_directory(dir), where, ": not a checkpoint directory");
  TANDEM_CHECK(fs::exists(dir / kManifest), where, ": no ", kManifest,
               " (incomplete or not a checkpoint)");
  const std::vector<std::uint8_t> manifest_bytes = read_all(dir / kManifest, where);
  Json manifest;
  try {
    manifest = Json::parse(manifest_bytes.begin(), manifest_bytes.end());
  } catch (const Json::exception& e) {
    TANDEM_FAIL(where, ": ", kManifest, " is damaged (", e.what(), ")");
  }
  // Types before values: Json::value() throws its own exception on a field of the wrong type.
  TANDEM_CHECK(manifest.is_object() && manifest.contains("format") &&
                   manifest["format"].is_string() && manifest["format"] == kFormat,
               where, ": ", kManifest, " is not a tandem checkpoint manifest");
  TANDEM_CHECK(manifest.contains("version") && manifest["version"].is_number_integer() &&
                   manifest["version"] == kVersion,
               where, ": ", kManifest, " field \"version\": checkpoint version ",
               manifest.contains("version")
                   ? manifest["version"].dump(-1, ' ', true, Json::error_handler_t::replace)
                   : std::string("(missing)"),
               " is not supported (expected ", kVersion, ")");
  TANDEM_CHECK(manifest.contains("files") && manifest["files"].is_array(), where, ": ", kManifest,
               " lists no files");

  CheckpointContents contents;
  bool have_model = false, have_state = false, have_json = false;
  for (const Json& entry : manifest["files"]) {
    TANDEM_CHECK(entry.is_object() && entry.contains("name") && entry["name"].is_string() &&
                     entry.contains("bytes") && entry["bytes"].is_number_unsigned() &&
                     entry.contains("crc32") && entry["crc32"].is_number_unsigned(),
                 where, ": ", kManifest, " has a malformed file entry");
    const std::string name = entry["name"].get<std::string>();
    // Only the three known names, each once: a name is a path, and "/dev/zero" or "../x" must
    // not make the reader read outside the checkpoint or without end.
    bool* const seen = name == "model.safetensors"   ? &have_model
                       : name == "state.safetensors" ? &have_state
                       : name == "state.json"        ? &have_json
                                                     : nullptr;
    TANDEM_CHECK(seen != nullptr, where, ": ", kManifest, " field \"name\": ",
                 entry["name"].dump(-1, ' ', true, Json::error_handler_t::replace),
                 " is not model.safetensors, state.safetensors or state.json");
    TANDEM_CHECK(!*seen, where, ": ", kManifest, " field \"name\": ", name, " is listed twice");
    const auto bytes_expected = entry["bytes"].get<std::uint64_t>();
    TANDEM_CHECK(bytes_expected <= kMaxFileBytes, where, ": ", kManifest, " field \"bytes\": ",
                 name, " claims ", bytes_expected, " bytes");
    const fs::path file = dir / name;
    std::error_code ec;
    TANDEM_CHECK(fs::is_regular_file(file, ec), where, ": ", name, " is missing");
    // The size before the contents: nothing is read from a file the manifest does not describe.
    const std::uintmax_t size = fs::file_size(file, ec);
    TANDEM_CHECK(!ec && size == bytes_expected, where, ": ", name, " is ", size,
                 " bytes, the manifest says ", bytes_expected, " (truncated or damaged)");
    const std::vector<std::uint8_t> bytes = read_all(file, where);
    TANDEM_CHECK(bytes.size() == bytes_expected, where, ": ", name, " is ", bytes.size(),
                 " bytes, the manifest says ", bytes_expected, " (truncated or damaged)");
    const std::uint32_t crc = crc32_of(bytes.data(), bytes.size());
    TANDEM_CHECK(crc == entry["crc32"].get<std::uint64_t>(), where, ": ", name,
                 " fails its CRC-32 check (damaged)");
    const std::string source = path + "/" + name;
    if (name == "model.safetensors") {
      contents.model = from_safetensors_buffer(bytes, source).tensors;
    } else if (name == "state.safetensors") {
      contents.state_tensors = from_safetensors_buffer(bytes, source).tensors;
    } else {
      contents.state_json.assign(bytes.begin(), bytes.end());
    }
    *seen = true;
  }
  TANDEM_CHECK(have_model && have_state && have_json, where,
               ": the manifest does not list model.safetensors, state.safetensors and state.json");
  return contents;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::int64_t step = step_of(name);
    if (step >= 0 && entry.is_directory()) found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::optional<FoundCheckpoint> find_latest_checkpoint(
    const std::string& dir, const std::function<void(const std::string&)>& warn) {
  for (const std::string& path : list_checkpoints(dir)) {
    try {
      return FoundCheckpoint{path, read_checkpoint(path)};
    } catch (const Error& e) {
      if (warn) warn(std::string("skipping damaged checkpoint: ") + e.what());
    }
  }
  return std::nullopt;
}

void prune_checkpoints(const std::string& dir, std::int64_t keep) {
  TANDEM_CHECK(keep >= 1, "checkpoint: keep must be at least 1, not ", keep);
  const std::vector<std::string> paths = list_checkpoints(dir);
  std::error_code ec;
  for (std::size_t i = static_cast<std::size_t>(keep); i < paths.size(); ++i) {
    fs::remove_all(paths[i], ec);
  }
  const std::string own = "-" + std::to_string(::getpid());
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if ((name.starts_with(".tmp-") || name.starts_with(".old-")) && !name.ends_with(own)) {
      fs::remove_all(entry.path(), ec);
    }
  }
}

}  // namespace tandem::io
