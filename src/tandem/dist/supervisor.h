// Process supervision for `tandem launch`: starts a set of workers (own process group, killed
// if the launcher dies), prefixes each line they print with their label, forwards SIGINT and
// SIGTERM, and when one fails stops the others (SIGTERM, then SIGKILL after a grace period).
// Restarts are the caller's loop; this runs one attempt.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tandem::dist {

struct WorkerSpec {
  std::vector<std::string> argv;                         // argv[0] searched in PATH
  std::vector<std::pair<std::string, std::string>> env;  // added to the launcher's environment
  std::string label;                                     // "rank 3": the prefix "[rank 3] "
  std::vector<int> cpus;                                 // its CPU affinity; empty: inherited
};

struct WorkerExit {
  int code = -1;       // exit status, or -1 when killed by a signal
  int signal = 0;      // the signal that killed it, or 0
  double seconds = 0;  // from the start of the attempt
  bool ok() const { return code == 0; }
};

struct AttemptResult {
  enum class Outcome : std::uint8_t { Success, WorkerFailed, Interrupted, TimedOut };
  Outcome outcome = Outcome::Success;
  std::string failure;            // "rank 2 (pid 4242) was killed by signal 9 (SIGKILL)"
  int signal = 0;                 // Interrupted: the signal the launcher received
  std::vector<WorkerExit> exits;  // [worker]
};

enum class OnFailure : std::uint8_t {
  StopOthers,  // a worker failed: SIGTERM the rest (what a launcher does)
  LetRun,      // let the others find out by themselves (tests of failure detection)
};

struct SupervisorOptions {
  std::chrono::milliseconds grace{10000};  // SIGTERM to SIGKILL when stopping the workers
  OnFailure on_failure = OnFailure::StopOthers;
  std::chrono::milliseconds time_limit{0};  // > 0: SIGKILL everything after it (TimedOut)
};

// Runs the workers to the end: Success when all exit 0; WorkerFailed at the first that exits
// non-zero or by a signal (the others are stopped, unless LetRun); TimedOut past time_limit;
// Interrupted when SIGINT/SIGTERM arrived
// (forwarded to every worker, which get the grace period to finish). No worker outlives it.
AttemptResult run_workers(const std::vector<WorkerSpec>& workers, const SupervisorOptions& options);

}  // namespace tandem::dist
