// `tandem launch` end to end with the dist_worker: the variables it sets make a working process
// group, output is prefixed with the rank, and a worker killed on the first attempt leads to a
// restart of all workers (or, with no restarts left, to a clear error); each worker is pinned to
// its own CPUs when its threads fit.
#include <sched.h>

#include "errors.h"
#include "launch_harness.h"

namespace tandem::dist::testing {
namespace {

using tandem::testing::expect_contains;

TEST(Launch, ThreeWorkersFormAGroup) {
  TempDir dir;
  const Launched l = launch("--nproc-per-node 3", "collectives -1", dir);
  EXPECT_EQ(l.status, 0) << l.err;
  for (int r = 0; r < 3; ++r) {
    expect_contains(l.out, "[rank " + std::to_string(r) + "] rank " + std::to_string(r) + ": ok");
    EXPECT_TRUE(std::filesystem::exists(dir / ("rank" + std::to_string(r) + ".txt")));
  }
}

TEST(Launch, RestartsEveryWorkerAfterADeath) {
  TempDir dir;
  const Launched l = launch("--nproc-per-node 2 --max-restarts 1", "die-once 1", dir);
  EXPECT_EQ(l.status, 0) << l.err;
  expect_contains(l.err, "rank 1 (pid ");
  expect_contains(l.err,
                  "was killed by signal 9 (SIGKILL); restarting all 2 workers (restart 1 of 1)");
  expect_contains(l.out, "[rank 1] rank 1: ok");
}

TEST(Launch, NoRestartsLeftIsAnError) {
  TempDir dir;
  const Launched l = launch("--nproc-per-node 2", "die-once 0", dir);
  EXPECT_EQ(l.status, 2);
  expect_contains(l.err, "tandem launch: error: rank 0 (pid ");
  expect_contains(l.err, "killed by signal 9 (SIGKILL); the other workers were stopped");
}

// Each worker gets its own block of the launcher's CPUs when its OpenMP threads fit in it (set by
// the launcher, or by the user's OMP_NUM_THREADS), and the whole set when they do not.
TEST(Launch, WorkersArePinnedToTheirOwnCpusWhenTheirThreadsFit) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  const int cpus = CPU_COUNT(&mine);
  if (cpus < 2) GTEST_SKIP() << "needs 2 CPUs, this test may use " << cpus;
  const std::string share = std::to_string(cpus / 2);
  const std::string worker =
      "sh -c 'echo cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) omp=$OMP_NUM_THREADS'";
  struct Case {
    std::string env, cpus, omp;
  };
  for (const Case& c :
       {Case{"env -u OMP_NUM_THREADS ", share, share}, Case{"OMP_NUM_THREADS=1 ", share, "1"},
        Case{"OMP_NUM_THREADS=" + std::to_string(cpus + 1) + " ", std::to_string(cpus),
             std::to_string(cpus + 1)}}) {
    TempDir dir;
    const Launched l =
        run_command(std::string(TANDEM_BINARY) + " launch --nproc-per-node 2 --master-port " +
                        std::to_string(free_port()) + " -- " + worker,
                    dir, c.env);
    ASSERT_EQ(l.status, 0) << c.env << l.err;
    for (int r = 0; r < 2; ++r) {
      expect_contains(l.out, "[rank " + std::to_string(r) + "] cpus=" + c.cpus + " omp=" + c.omp);
    }
  }
}

TEST(Launch, BadFlagsAreErrors) {
  TempDir dir;
  EXPECT_EQ(launch("--nproc-per-node 2 --nnodes 2 --node-rank 2", "collectives -1", dir).status, 2);
  expect_contains(read_text(dir / "err"), "--node-rank 2 is not below --nnodes 2");
}

TEST(Launch, TwoNodesInNetworkNamespaces) {
  TwoHosts hosts;
  if (!hosts.ok()) GTEST_SKIP() << hosts.skip_message();
  TempDir dir;
  const AttemptResult result =
      run_two_nodes(hosts, "--nproc-per-node 2",
                    std::string(TANDEM_DIST_WORKER) + " collectives -1 " + dir.path().string(),
                    {{"TANDEM_TEST_TIMEOUT_MS", "20000"}});
  EXPECT_EQ(result.outcome, AttemptResult::Outcome::Success) << result.failure;
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(std::filesystem::exists(dir / ("rank" + std::to_string(r) + ".txt")))
        << "rank " << r;
  }
}

}  // namespace
}  // namespace tandem::dist::testing
