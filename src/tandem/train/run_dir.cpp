// Run directories and small atomic text writes.
#include "tandem/train/run_dir.h"

#include <ctime>
#include <filesystem>
#include <vector>

#include "tandem/base/check.h"
#include "tandem/io/file_util.h"

namespace tandem::train {
namespace fs = std::filesystem;

std::string default_run_path() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  std::string path = std::string("runs/") + stamp;
  for (int i = 2; fs::exists(path); ++i) path = std::string("runs/") + stamp + "-" + std::to_string(i);
  return path;
}

RunDir make_run_dir(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  TANDEM_CHECK(!ec && fs::is_directory(path), "--out ", path, ": cannot create the run directory",
               ec ? ": " + ec.message() : std::string());
  return RunDir{path};
}

std::string newest_run_with_checkpoints(const std::string& runs) {
  std::error_code ec;
  if (!fs::is_directory(runs, ec)) return "";
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(runs, ec)) {
    if (entry.is_directory() && fs::is_directory(entry.path() / "checkpoints")) {
      names.push_back(entry.path().string());
    }
  }
  std::string newest;
  for (const std::string& n : names) {
    if (n > newest) newest = n;
  }
  return newest;
}

void write_text_atomic(const std::string& path, const std::string& text) {
  io::write_atomic(path, {{text.data(), text.size()}}, "run directory");
}

}  // namespace tandem::train
