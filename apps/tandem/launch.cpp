// `tandem launch`: starts --nproc-per-node workers on this node with the variables a process
// group reads (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), relays
// their output prefixed with the rank, forwards SIGINT/SIGTERM, and restarts every worker
// (a `tandem train` from its newest checkpoint: --resume auto) up to --max-restarts times.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "tandem/base/check.h"
#include "tandem/dist/env.h"
#include "tandem/dist/supervisor.h"
#include "tandem/parallel/replica_threads.h"

namespace tandem::app {
namespace {

struct LaunchFlags {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int max_restarts = 0;
  std::string store;
  double grace_s = 10;
  std::vector<std::string> command;
};

// The worker command of one attempt: `tandem` means this binary; a restarted `tandem train`
// without --resume continues from its newest checkpoint.
std::vector<std::string> worker_command(const LaunchFlags& f, int attempt) {
  std::vector<std::string> argv = f.command;
  if (argv.front() == "tandem") {
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) argv.front() = std::string(self, static_cast<std::size_t>(n));
  }
  const bool is_train = argv.size() > 1 && argv[1] == "train";
  const bool has_resume = std::any_of(
      argv.begin(), argv.end(), [](const std::string& a) { return a.rfind("--resume", 0) == 0; });
  if (attempt > 0 && is_train && !has_resume) {
    argv.push_back("--resume");
    argv.push_back("auto");
  }
  return argv;
}

std::vector<dist::WorkerSpec> workers(const LaunchFlags& f, int attempt) {
  std::vector<dist::WorkerSpec> specs;
  const int world = f.nnodes * f.nproc_per_node;
  for (int local = 0; local < f.nproc_per_node; ++local) {
    const int rank = f.node_rank * f.nproc_per_node + local;
    std::vector<std::pair<std::string, std::string>> env{
        {"RANK", std::to_string(rank)},
        {"WORLD_SIZE", std::to_string(world)},
        {"LOCAL_RANK", std::to_string(local)},
        {"LOCAL_WORLD_SIZE", std::to_string(f.nproc_per_node)},
        {"GROUP_RANK", std::to_string(f.node_rank)},
        {"MASTER_ADDR", f.master_addr},
        {"MASTER_PORT", std::to_string(f.master_port)},
        {"TANDEM_RESTART_COUNT", std::to_string(attempt)},
        {"TANDEM_MAX_RESTARTS", std::to_string(f.max_restarts)}};
    if (!f.store.empty()) env.emplace_back("TANDEM_STORE", f.store);
    // Workers share the cores: each gets its own block of this launcher's CPUs (when there are
    // enough) and as many OpenMP threads, unless OMP_NUM_THREADS says otherwise. A worker whose
    // OMP_NUM_THREADS fits in its block is pinned to it too: unpinned, one worker's helper threads
    // (loader, communication) preempt the other's compute, and the ranks drift apart before each
    // all-reduce.
    std::vector<int> cpus;
    const std::vector<int> all = parallel::available_cpus();
    const std::size_t share = std::max<std::size_t>(1, all.size() / f.nproc_per_node);
    const char* omp = std::getenv("OMP_NUM_THREADS");
    const long threads = omp ? std::atol(omp) : static_cast<long>(share);
    if (all.size() >= static_cast<std::size_t>(f.nproc_per_node) && threads >= 1 &&
        static_cast<std::size_t>(threads) <= share) {
      cpus.assign(all.begin() + static_cast<std::ptrdiff_t>(share * local),
                  all.begin() + static_cast<std::ptrdiff_t>(share * (local + 1)));
    }
    if (!omp) env.emplace_back("OMP_NUM_THREADS", std::to_string(share));
    specs.push_back({worker_command(f, attempt), std::move(env), "rank " + std::to_string(rank),
                     std::move(cpus)});
  }
  return specs;
}

int run_launch(const LaunchFlags& f) {
  TANDEM_CHECK(!f.command.empty(), "no worker command: tandem launch [flags] -- tandem train ...");
  TANDEM_CHECK(f.nproc_per_node >= 1 && f.nnodes >= 1,
               "--nproc-per-node and --nnodes must be >= 1");
  TANDEM_CHECK(f.node_rank >= 0 && f.node_rank < f.nnodes, "--node-rank ", f.node_rank,
               " is not below --nnodes ", f.nnodes);
  TANDEM_CHECK(f.master_port > 0 && f.master_port < 65536, "--master-port ", f.master_port,
               " is not a TCP port");
  TANDEM_CHECK(f.max_restarts >= 0, "--max-restarts must be >= 0");
  if (!f.store.empty()) dist::parse_store_spec(f.store);  // a bad spelling fails here, once
  const dist::SupervisorOptions options{
      .grace = std::chrono::milliseconds(static_cast<std::int64_t>(f.grace_s * 1000))};
  for (int attempt = 0;; ++attempt) {
    const dist::AttemptResult result = dist::run_workers(workers(f, attempt), options);
    switch (result.outcome) {
      case dist::AttemptResult::Outcome::Success:
        return 0;
      case dist::AttemptResult::Outcome::Interrupted:
        std::fprintf(stderr, "tandem launch: stopped by signal %d; workers stopped\n",
                     result.signal);
        return 128 + result.signal;
      default:
        break;
    }
    if (attempt >= f.max_restarts) {
      TANDEM_FAIL(result.failure, "; the other workers were stopped",
                  f.max_restarts > 0 ? " and no restarts are left (--max-restarts " +
                                           std::to_string(f.max_restarts) + ")"
                                     : std::string());
    }
    std::fprintf(stderr, "tandem launch: %s; restarting all %d workers (restart %d of %d)\n",
                 result.failure.c_str(), f.nproc_per_node, attempt + 1, f.max_restarts);
  }
}

}  // namespace

Command add_launch_command(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("launch",
                         "Start one worker per process on this node (multi-process training): "
                         "tandem launch --nproc-per-node 2 -- tandem train ...");
  auto f = std::make_shared<LaunchFlags>();
  cmd->add_option("--nproc-per-node", f->nproc_per_node, "Workers on this node")->required();
  cmd->add_option("--nnodes", f->nnodes, "Nodes in the job (each runs tandem launch)");
  cmd->add_option("--node-rank", f->node_rank, "This node's index, 0..nnodes-1");
  cmd->add_option("--master-addr", f->master_addr,
                  "Address of node 0 (rank 0 serves the store there)");
  cmd->add_option("--master-port", f->master_port, "Port of the rendezvous store");
  cmd->add_option("--max-restarts", f->max_restarts,
                  "Restart all workers up to this many times when one fails");
  cmd->add_option("--store", f->store,
                  "Rendezvous store: tcp (default), file:DIR, redis:HOST[:PORT]");
  cmd->add_option("--grace", f->grace_s,
                  "Seconds between SIGTERM and SIGKILL when stopping workers");
  cmd->add_option("command", f->command, "The worker command, after --")->required();
  return [f]() { return run_launch(*f); };
}

}  // namespace tandem::app
