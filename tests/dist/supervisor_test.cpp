// The launcher's supervisor: prefixed output, a failed worker stops the others, SIGINT reaches
// every worker, and nothing outlives an attempt.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "dist_harness.h"
#include "errors.h"

namespace tandem::dist::testing {
namespace {

using namespace std::chrono_literals;
using tandem::testing::expect_contains;

WorkerSpec shell(const std::string& script, const std::string& label) {
  return {{"/bin/sh", "-c", script}, {{"GREETING", "hello"}}, label};
}

// Runs the workers with this process's stdout sent to a file; returns what they printed.
std::string run_captured(const std::vector<WorkerSpec>& specs, AttemptResult& result,
                         const SupervisorOptions& options = {}) {
  TempDir dir;
  std::fflush(stdout);
  const int saved = ::dup(1);
  const int file = ::open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(file, 1);
  ::close(file);
  result = run_workers(specs, options);
  ::dup2(saved, 1);
  ::close(saved);
  return read_text(dir / "out");
}

TEST(Supervisor, PrefixesEveryLineWithTheLabel) {
  AttemptResult result;
  const std::string out =
      run_captured({shell("echo \"$GREETING from a\"; printf 'two\\npartial'", "rank 0"),
                    shell("echo b", "rank 1")},
                   result);
  EXPECT_EQ(result.outcome, AttemptResult::Outcome::Success);
  expect_contains(out, "[rank 0] hello from a\n");
  expect_contains(out, "[rank 0] two\n");
  expect_contains(out, "[rank 0] partial\n");
  expect_contains(out, "[rank 1] b\n");
}

TEST(Supervisor, PinsAWorkerToItsCpus) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &mine)) ++cpu;
  WorkerSpec pinned = shell("grep Cpus_allowed_list /proc/self/status", "w");
  pinned.cpus = {cpu};
  AttemptResult result;
  const std::string out = run_captured({pinned}, result);
  EXPECT_EQ(result.outcome, AttemptResult::Outcome::Success);
  expect_contains(out, "[w] Cpus_allowed_list:\t" + std::to_string(cpu) + "\n");
}

TEST(Supervisor, AFailedWorkerStopsTheOthers) {
  AttemptResult result;
  run_captured({shell("sleep 30", "rank 0"), shell("exit 7", "rank 1")}, result);
  EXPECT_EQ(result.outcome, AttemptResult::Outcome::WorkerFailed);
  expect_contains(result.failure, "rank 1 (pid ");
  expect_contains(result.failure, "exited with status 7");
  EXPECT_EQ(result.exits[0].signal, SIGTERM);
}

TEST(Supervisor, GraceEndsInSigkill) {
  // Rank 0 ignores SIGTERM; rank 1 fails once rank 0's trap is in place.
  TempDir dir;
  const std::string ready = (dir / "ready").string();
  AttemptResult result;
  run_captured({shell("trap '' TERM; touch " + ready + "; sleep 30", "rank 0"),
                shell("while [ ! -e " + ready + " ]; do sleep 0.01; done; exit 1", "rank 1")},
               result, {.grace = std::chrono::milliseconds(300)});
  EXPECT_EQ(result.outcome, AttemptResult::Outcome::WorkerFailed);
  EXPECT_EQ(result.exits[0].signal, SIGKILL);
}

TEST(Supervisor, ForwardsSigintToEveryWorker) {
  AttemptResult result;
  std::thread interrupt([] {
    std::this_thread::sleep_for(300ms);
    ::kill(::getpid(), SIGINT);
  });
  run_captured({shell("sleep 30", "rank 0"), shell("sleep 30", "rank 1")}, result);
  interrupt.join();
  EXPECT_EQ(result.outcome, AttemptResult::Outcome::Interrupted);
  EXPECT_EQ(result.signal, SIGINT);
  EXPECT_EQ(result.exits[0].signal, SIGINT);
  EXPECT_EQ(result.exits[1].signal, SIGINT);
}

TEST(Supervisor, TimeLimitKillsEverything) {
  AttemptResult result;
  run_captured({shell("sleep 30", "w")}, result, {.time_limit = 200ms});
  EXPECT_EQ(result.outcome, AttemptResult::Outcome::TimedOut);
  EXPECT_EQ(result.exits[0].signal, SIGKILL);
}

}  // namespace
}  // namespace tandem::dist::testing
