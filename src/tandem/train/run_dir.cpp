// Run directories and small atomic text writes.
#include "tandem/train/run_dir.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "tandem/base/check.h"

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
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TANDEM_CHECK(fd >= 0, "cannot create '", tmp, "': ", std::strerror(errno));
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      TANDEM_FAIL("writing '", tmp, "' failed: ", std::strerror(err));
    }
    written += static_cast<std::size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  TANDEM_CHECK(synced, "fsync of '", tmp, "' failed: ", std::strerror(errno));
  TANDEM_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, "renaming '", tmp, "' to '", path,
               "' failed: ", std::strerror(errno));
}

}  // namespace tandem::train
