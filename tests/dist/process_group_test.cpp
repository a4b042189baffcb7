// Gloo process groups of 2 and 3 processes on loopback, through each store: every collective
// checks its own results (exact: the values are small integers and quarters); a rank killed or
// stopped mid-run is named by the others, which exit within the timeout + 5 s.
#include <csignal>
#include <ostream>
#include <string>

#include "dist_harness.h"
#include "errors.h"

namespace tandem::dist::testing {
namespace {

using tandem::testing::expect_contains;
using namespace std::chrono_literals;

struct GroupCase {
  int ranks;
  std::string store;  // tcp, file, redis
};

void PrintTo(const GroupCase& c, std::ostream* out) { *out << c.ranks << " ranks, " << c.store; }

class Collectives : public ::testing::TestWithParam<GroupCase> {};

TEST_P(Collectives, AgreeOnEveryRank) {
  const GroupCase c = GetParam();
  std::unique_ptr<RedisServer> redis;
  std::string store = c.store;
  if (store == "redis") {
    redis = std::make_unique<RedisServer>();
    if (!redis->running())
      GTEST_SKIP() << "redis-server is not installed (apt-get install redis-server)";
    store = redis->spec();
  }
  const GroupRun run = run_group(c.ranks, "collectives", store, 20s);
  EXPECT_EQ(run.result.outcome, AttemptResult::Outcome::Success) << run.result.failure;
  for (int r = 0; r < c.ranks; ++r) {
    EXPECT_TRUE(run.ok[r]) << "rank " << r << ": " << run.errors[r];
    EXPECT_EQ(run.result.exits[r].code, 0) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, Collectives,
                         ::testing::Values(GroupCase{2, "tcp"}, GroupCase{3, "tcp"},
                                           GroupCase{2, "file"}, GroupCase{3, "file"},
                                           GroupCase{2, "redis"}, GroupCase{3, "redis"}),
                         [](const auto& param_info) {
                           return param_info.param.store + std::to_string(param_info.param.ranks);
                         });

constexpr auto kTimeout = 3s;

// The survivors' errors name the victim with `cause`, and they exit within the timeout + 5 s.
void expect_named(const GroupRun& run, int victim, const std::string& cause) {
  for (std::size_t r = 0; r < run.errors.size(); ++r) {
    if (static_cast<int>(r) == victim) continue;
    EXPECT_EQ(run.result.exits[r].code, 3) << "rank " << r << " should fail, not hang or pass";
    expect_contains(run.errors[r], "rank " + std::to_string(victim) + " " + cause);
    expect_contains(run.errors[r], "all_reduce(sum)");
    EXPECT_LT(run.result.exits[r].seconds, std::chrono::duration<double>(kTimeout + 5s).count());
  }
}

// A rank killed (SIGKILL) or stopped (SIGSTOP, then ended by the survivors) inside per-call
// all-reduces, or inside a repeated one (the gradient buckets': on Gloo, a second mesh of
// synchronous pairs); killing rank 0 also kills the TCP store's host.
struct DeadPeerCase {
  std::string name;
  int ranks;
  std::string scenario;
  std::string store;
  int victim;
  std::string cause;
};

void PrintTo(const DeadPeerCase& c, std::ostream* out) { *out << c.name; }

class DeadPeer : public ::testing::TestWithParam<DeadPeerCase> {};

TEST_P(DeadPeer, TheVictimIsNamedByTheOthers) {
  const DeadPeerCase& c = GetParam();
  const GroupRun run = run_group(c.ranks, c.scenario, c.store, kTimeout, c.victim);
  // A stopped victim is ended with SIGKILL by a survivor once it gives up.
  EXPECT_EQ(run.result.exits[static_cast<std::size_t>(c.victim)].signal, SIGKILL);
  expect_named(run, c.victim, c.cause);
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, DeadPeer,
    ::testing::Values(
        DeadPeerCase{"KilledRank", 3, "die", "tcp", 1, "exited or died"},
        DeadPeerCase{"KilledStoreHost", 3, "die", "tcp", 0, "exited or died"},
        DeadPeerCase{"StoppedRankAfterTheTimeout", 2, "stall", "file", 1, "is stopped or hung"},
        DeadPeerCase{"KilledRankInARepeatedAllReduce", 3, "die-repeated", "tcp", 1,
                     "exited or died"},
        DeadPeerCase{"StoppedRankInARepeatedAllReduce", 2, "stall-repeated", "file", 1,
                     "is stopped or hung"}),
    [](const auto& param_info) { return param_info.param.name; });

TEST(Fingerprint, AMismatchIsAnErrorOnEveryRankNamingTheParameters) {
  const GroupRun run = run_group(3, "mismatch", "tcp", 20s, /*victim*/ 2);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(run.result.exits[r].code, 3) << "rank " << r;
    expect_contains(run.errors[r], "the ranks do not train the same model");
    expect_contains(run.errors[r],
                    "fc.weight is (10, 7) float32 on rank 2 but (10, 6) float32 on rank 0");
    expect_contains(run.errors[r], "extra.bias is on rank 2 but not on rank 0");
  }
}

}  // namespace
}  // namespace tandem::dist::testing
