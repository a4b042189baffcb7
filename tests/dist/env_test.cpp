// Reading the launcher's variables (torchrun-style, mpirun, Slurm) and the store spelling.
#include "tandem/dist/env.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <vector>

#include "errors.h"

namespace tandem::dist {
namespace {

using tandem::testing::error_of;
using tandem::testing::expect_contains;

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(WorldFromEnv, NothingSetIsASingleProcess) { EXPECT_FALSE(world_from_env(env_of({}))); }

// rank, world size, local rank, local world size, master address:port, source.
void expect_world(const std::optional<WorldInfo>& w, std::vector<int> ranks,
                  const std::string& master, const std::string& source) {
  ASSERT_TRUE(w);
  EXPECT_EQ((std::vector<int>{w->rank, w->world_size, w->local_rank, w->local_world_size}), ranks);
  EXPECT_EQ(w->master_addr + ":" + std::to_string(w->master_port), master);
  EXPECT_EQ(w->source, source);
}

TEST(WorldFromEnv, TorchrunVariables) {
  expect_world(world_from_env(env_of({{"RANK", "3"},
                                      {"WORLD_SIZE", "4"},
                                      {"LOCAL_RANK", "1"},
                                      {"LOCAL_WORLD_SIZE", "2"},
                                      {"MASTER_ADDR", "10.0.0.1"},
                                      {"MASTER_PORT", "1234"}})),
               {3, 4, 1, 2}, "10.0.0.1:1234", "env");
}

TEST(WorldFromEnv, Mpirun) {
  expect_world(world_from_env(env_of({{"OMPI_COMM_WORLD_RANK", "2"},
                                      {"OMPI_COMM_WORLD_SIZE", "6"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                                      {"MASTER_ADDR", "head"}})),
               {2, 6, 0, 3}, "head:29500", "mpirun");
}

TEST(WorldFromEnv, SlurmTakesTheFirstNodeAsMaster) {
  expect_world(world_from_env(env_of({{"SLURM_PROCID", "5"},
                                      {"SLURM_NTASKS", "8"},
                                      {"SLURM_LOCALID", "1"},
                                      {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
                                      {"SLURM_STEP_NODELIST", "gpu[07-08]"}})),
               {5, 8, 1, 4}, "gpu07:29500", "slurm");
}

TEST(WorldFromEnv, FirstSlurmHost) {
  EXPECT_EQ(first_slurm_host("node1"), "node1");
  EXPECT_EQ(first_slurm_host("a,b"), "a");
  EXPECT_EQ(first_slurm_host("node[3,5-9]"), "node3");
  EXPECT_EQ(first_slurm_host("rack1-n[10-12],x"), "rack1-n10");
}

TEST(WorldFromEnv, BadValuesNameTheVariable) {
  expect_contains(error_of([] { world_from_env(env_of({{"RANK", "1"}})); }), "WORLD_SIZE");
  expect_contains(error_of([] {
                    world_from_env(env_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}));
                  }),
                  "RANK='x'");
  expect_contains(error_of([] {
                    world_from_env(env_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}));
                  }),
                  "rank 2 is not below the world size 2");
  expect_contains(
      error_of([] {
        world_from_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}));
      }),
      "MASTER_PORT");
}

TEST(StoreSpec, Spellings) {
  EXPECT_EQ(parse_store_spec("tcp").kind, StoreKind::Tcp);
  EXPECT_EQ(parse_store_spec("env://").kind, StoreKind::Tcp);
  const StoreSpec f = parse_store_spec("file:/shared/rdzv");
  EXPECT_EQ(f.kind, StoreKind::File);
  EXPECT_EQ(f.path, "/shared/rdzv");
  const StoreSpec r = parse_store_spec("redis:cache.local:7000");
  EXPECT_EQ(r.kind, StoreKind::Redis);
  EXPECT_EQ(r.host, "cache.local");
  EXPECT_EQ(r.port, 7000);
  EXPECT_EQ(parse_store_spec("redis://h").port, 6379);
  expect_contains(error_of([] { parse_store_spec("etcd:x"); }), "not tcp, file:DIR or redis");
  expect_contains(error_of([] { parse_store_spec("redis:h:port"); }), "'port' is not a port");
  expect_contains(error_of([] { parse_store_spec("file:"); }), "needs a directory");
}

}  // namespace
}  // namespace tandem::dist
