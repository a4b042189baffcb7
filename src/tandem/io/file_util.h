// POSIX file helpers shared by the writers (safetensors, checkpoints, run files): an owned file
// descriptor, errno text, fsync, and synced / atomic (temporary + rename) writes. Not a general
// file API: every failure is a TANDEM_CHECK error that starts with the caller's `context`.
#pragma once

#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::io {

// A file descriptor closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release();  // the descriptor, no longer closed by this Fd

 private:
  int fd_;
};

// strerror(error) as a string.
std::string errno_text(int error = errno);

// A run of bytes to write.
struct ByteRun {
  const void* data = nullptr;
  std::size_t size = 0;
};

// fsyncs the file or directory at `path`. A directory whose file system cannot sync it (EINVAL)
// passes: the rename before it is then as durable as it gets.
void fsync_path(const std::filesystem::path& path, bool directory, std::string_view context);

// Creates (or truncates) `path`, writes `runs` in order, fsyncs and closes it.
void write_synced(const std::filesystem::path& path, const std::vector<ByteRun>& runs,
                  std::string_view context);

// Writes `runs` to `path` atomically: to "<path>.tmp-<pid>" (synced as by write_synced), renamed
// over `path`, then the directory synced. On failure the temporary is removed and `path` is as it
// was.
void write_atomic(const std::filesystem::path& path, const std::vector<ByteRun>& runs,
                  std::string_view context);

}  // namespace tandem::io
