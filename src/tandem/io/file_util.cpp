// POSIX file helpers shared by the writers: owned descriptors, fsync, synced and atomic writes.
#include "tandem/io/file_util.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#include "tandem/base/check.h"

namespace tandem::io {
namespace fs = std::filesystem;
namespace {

// Writes all of `run` to `fd`, retrying short writes and EINTR.
void write_all(int fd, const ByteRun& run, const fs::path& path, std::string_view context) {
  const auto* bytes = static_cast<const char*>(run.data);
  std::size_t written = 0;
  while (written < run.size) {
    const ssize_t n = ::write(fd, bytes + written, run.size - written);
    if (n < 0 && errno == EINTR) continue;
    TANDEM_CHECK(n > 0, context, ": writing '", path.string(), "' failed: ", errno_text());
    written += static_cast<std::size_t>(n);
  }
}

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

int Fd::release() { return std::exchange(fd_, -1); }

std::string errno_text(int error) { return std::strerror(error); }

void fsync_path(const fs::path& path, bool directory, std::string_view context) {
  Fd fd(::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC));
  TANDEM_CHECK(fd.get() >= 0, context, ": cannot open '", path.string(), "' to sync: ",
               errno_text());
  TANDEM_CHECK(::fsync(fd.get()) == 0 || (directory && errno == EINVAL), context, ": fsync of '",
               path.string(), "' failed: ", errno_text());
}

void write_synced(const fs::path& path, const std::vector<ByteRun>& runs,
                  std::string_view context) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  TANDEM_CHECK(fd.get() >= 0, context, ": cannot create '", path.string(), "': ", errno_text());
  for (const ByteRun& run : runs) write_all(fd.get(), run, path, context);
  TANDEM_CHECK(::fsync(fd.get()) == 0, context, ": fsync of '", path.string(), "' failed: ",
               errno_text());
  TANDEM_CHECK(::close(fd.release()) == 0, context, ": close of '", path.string(), "' failed: ",
               errno_text());
}

void write_atomic(const fs::path& path, const std::vector<ByteRun>& runs,
                  std::string_view context) {
  const fs::path tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  try {
    write_synced(tmp, runs, context);
    TANDEM_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, context, ": rename of '", tmp.string(),
                 "' to '", path.string(), "' failed: ", errno_text());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  fs::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  fsync_path(dir, true, context);
}

}  // namespace tandem::io
