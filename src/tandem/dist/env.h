// Where this process stands in a job, read from the environment a launcher leaves: tandem
// launch / torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
// mpirun (OMPI_COMM_WORLD_*) or srun (SLURM_*); and the rendezvous store a job meets through.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace tandem::dist {

struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 29500;
  std::string source = "single process";  // "env", "mpirun", "slurm": for messages
};

// Reads a variable; nullptr when unset. Tests pass a map instead of the real environment.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup process_env();

// The launcher's variables, in that order of precedence (torchrun-style first), or nullopt when
// none is set (a single process). Inconsistent or malformed values are errors naming the variable.
std::optional<WorldInfo> world_from_env(const EnvLookup& env = process_env());

// The first host of a Slurm node list: "node[03-05,9],gpu1" -> "node03".
std::string first_slurm_host(const std::string& nodelist);

enum class StoreKind : std::uint8_t { Tcp, File, Redis };

// The rendezvous store: "tcp" (rank 0 serves it at MASTER_ADDR:MASTER_PORT), "file:DIR" (a
// directory on a file system every rank sees) or "redis:HOST[:PORT]" (default port 6379).
struct StoreSpec {
  StoreKind kind = StoreKind::Tcp;
  std::string path;           // File
  std::string host;           // Redis
  std::uint16_t port = 6379;  // Redis
};
StoreSpec parse_store_spec(const std::string& text);

}  // namespace tandem::dist
