// Harness of the multi-process tests: free ports, a private redis-server, and a group of
// dist_worker processes started on loopback (through the launcher's own supervisor).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../data/data_test_util.h"
#include "tandem/dist/socket.h"
#include "tandem/dist/supervisor.h"

extern char** environ;

namespace tandem::dist::testing {

using data::testing::TempDir;

// A port nothing listens on right now (the kernel's choice).
inline std::uint16_t free_port() { return local_port(listen_on(0)); }

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

// A redis-server on a free loopback port, in its own directory, stopped on destruction; or a
// skip reason when the binary is not installed.
class RedisServer {
 public:
  RedisServer() {
    for (const char* candidate : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"}) {
      if (std::filesystem::exists(candidate)) binary_ = candidate;
    }
    if (binary_.empty()) return;
    port_ = free_port();
    std::vector<std::string> args{binary_,
                                  "--port",
                                  std::to_string(port_),
                                  "--bind",
                                  "127.0.0.1",
                                  "--save",
                                  "",
                                  "--appendonly",
                                  "no",
                                  "--dir",
                                  dir_.path().string(),
                                  "--logfile",
                                  (dir_ / "redis.log").string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, binary_.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
      pid_ = -1;
      return;
    }
    connect_until("127.0.0.1", port_, deadline_in(std::chrono::seconds(10)), "redis-server");
  }
  ~RedisServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  bool running() const { return pid_ > 0; }
  std::string spec() const { return "redis:127.0.0.1:" + std::to_string(port_); }

 private:
  std::string binary_;
  TempDir dir_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

struct GroupRun {
  AttemptResult result;
  std::vector<std::string> errors;  // [rank] what the worker reported (rank<r>.err), or ""
  std::vector<bool> ok;             // [rank] it wrote rank<r>.txt
};

// Starts `n` dist_worker processes of `scenario` against the store `store` and waits for all
// (LetRun: a failed rank does not stop the others; everything is killed after `limit`).
inline GroupRun run_group(int n, const std::string& scenario, const std::string& store,
                          std::chrono::milliseconds comm_timeout, int victim = -1,
                          std::chrono::seconds limit = std::chrono::seconds(60)) {
  TempDir dir;
  const std::uint16_t port = free_port();
  std::vector<WorkerSpec> specs;
  for (int r = 0; r < n; ++r) {
    specs.push_back(
        {{TANDEM_DIST_WORKER, scenario, std::to_string(victim), dir.path().string()},
         {{"RANK", std::to_string(r)},
          {"WORLD_SIZE", std::to_string(n)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"TANDEM_STORE", store == "file" ? "file:" + (dir / "store").string() : store},
          {"TANDEM_TEST_TIMEOUT_MS", std::to_string(comm_timeout.count())}},
         "rank " + std::to_string(r)});
  }
  GroupRun run;
  run.result = run_workers(
      specs,
      {.grace = std::chrono::seconds(5), .on_failure = OnFailure::LetRun, .time_limit = limit});
  for (int r = 0; r < n; ++r) {
    run.errors.push_back(read_text(dir / ("rank" + std::to_string(r) + ".err")));
    run.ok.push_back(std::filesystem::exists(dir / ("rank" + std::to_string(r) + ".txt")));
  }
  return run;
}

}  // namespace tandem::dist::testing
