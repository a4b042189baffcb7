// Rendezvous in four steps: store, monitor mesh, backend, and a store barrier ("ready/<rank>"),
// after which no rank touches the store again (so rank 0 may stop serving it whenever it ends).
#include "tandem/dist/init.h"

#include <atomic>
#include <csignal>
#include <cstdlib>

#include "tandem/base/check.h"
#include "tandem/dist/gloo/gloo_process_group.h"
#include "tandem/dist/gloo/gloo_store.h"
#include "tandem/dist/monitor.h"
#include "tandem/dist/tcp_store.h"
#if TANDEM_HAVE_NCCL
#include "tandem/dist/nccl/nccl_process_group.h"
#endif

namespace tandem::dist {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string key_namespace(const ProcessGroupOptions& options) {
  const std::string job = !options.job.empty()
                              ? options.job
                              : env_or("TANDEM_JOB_ID", env_or("SLURM_JOB_ID", "tandem"));
  return job + "/" + env_or("TANDEM_RESTART_COUNT", "0");
}

std::shared_ptr<Store> open_store(const StoreSpec& spec, const WorldInfo& world,
                                  const ProcessGroupOptions& options, Rendezvous& rv) {
  switch (spec.kind) {
    case StoreKind::Tcp:
      if (world.rank == 0) rv.server = std::make_unique<TcpStoreServer>(world.master_port);
      return std::make_shared<TcpStore>(world.master_addr, world.master_port, options.timeout);
    case StoreKind::File:
      return make_file_store(spec.path);
    case StoreKind::Redis:
      return make_redis_store(spec.host, spec.port);
  }
  TANDEM_FAIL("unknown store kind");
}

}  // namespace

bool nccl_available() { return TANDEM_HAVE_NCCL != 0; }

std::unique_ptr<ProcessGroup> init_process_group(const WorldInfo& world,
                                                 const ProcessGroupOptions& options) {
  // A peer that dies makes writes to its socket fail; that must be an error, not SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  const StoreSpec spec =
      parse_store_spec(!options.store.empty() ? options.store : env_or("TANDEM_STORE", "tcp"));
  Rendezvous rv;
  rv.rank = world.rank;
  rv.size = world.world_size;
  rv.timeout = options.timeout;
  rv.address =
      env_or("TANDEM_SOCKET_ADDR",
             local_address_toward(spec.kind == StoreKind::Redis ? spec.host : world.master_addr));
  rv.store =
      std::make_shared<PrefixStore>(key_namespace(options), open_store(spec, world, options, rv));
  rv.monitor = std::make_unique<PeerMonitor>(world.rank, world.world_size, *rv.store, rv.address,
                                             options.timeout);
  std::shared_ptr<Store> store = rv.store;
  std::unique_ptr<ProcessGroup> group;
  if (options.backend == Backend::Gloo) {
    group = make_gloo_process_group(std::move(rv));
  } else {
#if TANDEM_HAVE_NCCL
    const int device = options.cuda_device >= 0 ? options.cuda_device : world.local_rank;
    group = make_nccl_process_group(std::move(rv), device);
#else
    TANDEM_FAIL(
        "process group: this build has no NCCL backend (CUDA and NCCL were not found "
        "when it was configured); use the gloo backend");
#endif
  }
  store->set("ready/" + std::to_string(world.rank), "1");
  std::vector<std::string> ready;
  for (int r = 0; r < world.world_size; ++r) ready.push_back("ready/" + std::to_string(r));
  store->wait(ready, options.timeout);
  return group;
}

std::unique_ptr<ProcessGroup> init_nccl_beside(const ProcessGroup& group, int cuda_device) {
#if TANDEM_HAVE_NCCL
  // Each call's keys apart (the unique id of a second call must not be read from the first's):
  // numbered in call order, the same on every rank since every rank makes the same calls.
  static std::atomic<int> calls{0};
  return make_nccl_process_group(group.companion("nccl-beside/" + std::to_string(calls++)),
                                 cuda_device);
#else
  (void)group;
  TANDEM_FAIL("process group: this build has no NCCL backend (CUDA and NCCL were not found when "
              "it was configured), so cuda:", cuda_device, "'s tensors cannot go through NCCL");
#endif
}

}  // namespace tandem::dist
