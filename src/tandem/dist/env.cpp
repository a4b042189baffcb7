// Reading the launcher's variables: whole-string integer parsing, consistency checks, and the
// Slurm node-list's first host (enough of Slurm's hostlist syntax to find the master).
#include "tandem/dist/env.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <iterator>

#include "tandem/base/check.h"

namespace tandem::dist {
namespace {

int parse_int(const EnvLookup& env, const char* name, int fallback) {
  const char* text = env(name);
  if (!text) return fallback;
  const std::string s(text);
  int value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  TANDEM_CHECK(ec == std::errc() && end == s.data() + s.size() && value >= 0, "environment: ", name,
               "='", s, "' is not a non-negative integer");
  return value;
}

// The leading count of a Slurm per-node task list: "4(x2),3" -> 4.
int leading_count(const char* text, int fallback) {
  if (!text) return fallback;
  const int n = std::atoi(text);
  return n > 0 ? n : fallback;
}

}  // namespace

EnvLookup process_env() {
  return [](const char* name) { return std::getenv(name); };
}

std::string first_slurm_host(const std::string& nodelist) {
  const std::size_t cut = nodelist.find_first_of(",[");
  if (cut == std::string::npos || nodelist[cut] == ',') return nodelist.substr(0, cut);
  const std::size_t end = nodelist.find_first_of(",-]", cut + 1);
  return nodelist.substr(0, cut) + nodelist.substr(cut + 1, end - cut - 1);
}

// The variables a launcher sets, in order of precedence.
struct LauncherVars {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;  // Slurm has none: its per-node task list says it
};
constexpr LauncherVars kLaunchers[] = {
    {"env", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

std::optional<WorldInfo> world_from_env(const EnvLookup& env) {
  const auto found =
      std::find_if(std::begin(kLaunchers), std::end(kLaunchers),
                   [&](const LauncherVars& v) { return env(v.rank) || env(v.size); });
  if (found == std::end(kLaunchers)) return std::nullopt;
  const LauncherVars& v = *found;
  TANDEM_CHECK(env(v.rank) && env(v.size), "environment: ", v.rank, " and ", v.size,
               " go together (", env(v.rank) ? v.size : v.rank, " is not set)");
  WorldInfo w;
  w.source = v.source;
  w.rank = parse_int(env, v.rank, 0);
  w.world_size = parse_int(env, v.size, 1);
  w.local_rank = parse_int(env, v.local_rank, w.rank);
  if (v.local_size) {
    w.local_world_size = parse_int(env, v.local_size, w.world_size);
  } else {
    w.local_world_size = leading_count(env("SLURM_STEP_TASKS_PER_NODE"),
                                       leading_count(env("SLURM_TASKS_PER_NODE"), 1));
    const char* nodes = env("SLURM_STEP_NODELIST");
    if (!nodes) nodes = env("SLURM_NODELIST");
    if (nodes) w.master_addr = first_slurm_host(nodes);
  }
  if (const char* addr = env("MASTER_ADDR")) w.master_addr = addr;
  const int port = parse_int(env, "MASTER_PORT", w.master_port);
  TANDEM_CHECK(port > 0 && port < 65536, "environment: MASTER_PORT=", port, " is not a TCP port");
  w.master_port = static_cast<std::uint16_t>(port);
  TANDEM_CHECK(w.world_size >= 1 && w.rank < w.world_size, "environment (", w.source, "): rank ",
               w.rank, " is not below the world size ", w.world_size);
  TANDEM_CHECK(w.local_world_size >= 1 && w.local_rank < w.local_world_size, "environment (",
               w.source, "): local rank ", w.local_rank, " is not below the local world size ",
               w.local_world_size);
  return w;
}

StoreSpec parse_store_spec(const std::string& text) {
  StoreSpec spec;
  if (text == "tcp" || text == "env://" || text.empty()) return spec;
  if (text.rfind("file:", 0) == 0) {
    spec.kind = StoreKind::File;
    spec.path = text.substr(text.rfind("file://", 0) == 0 ? 7 : 5);
    TANDEM_CHECK(!spec.path.empty(), "store '", text, "': file: needs a directory (file:DIR)");
    return spec;
  }
  if (text.rfind("redis:", 0) == 0) {
    spec.kind = StoreKind::Redis;
    std::string rest = text.substr(text.rfind("redis://", 0) == 0 ? 8 : 6);
    const std::size_t colon = rest.rfind(':');
    if (colon != std::string::npos) {
      const std::string port = rest.substr(colon + 1);
      int value = 0;
      const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
      TANDEM_CHECK(
          ec == std::errc() && end == port.data() + port.size() && value > 0 && value < 65536,
          "store '", text, "': '", port, "' is not a port");
      spec.port = static_cast<std::uint16_t>(value);
      rest = rest.substr(0, colon);
    }
    TANDEM_CHECK(!rest.empty(), "store '", text, "': redis: needs a host (redis:HOST[:PORT])");
    spec.host = rest;
    return spec;
  }
  TANDEM_FAIL("store '", text, "' is not tcp, file:DIR or redis:HOST[:PORT]");
}

}  // namespace tandem::dist
