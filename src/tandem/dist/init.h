// init_process_group: from a WorldInfo (env.h) to a connected ProcessGroup — the store (rank 0
// serves the TCP one), the peer monitor, then the backend — all bounded by the timeout.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tandem/dist/env.h"
#include "tandem/dist/process_group.h"

namespace tandem::dist {

struct ProcessGroupOptions {
  Backend backend = Backend::Gloo;
  std::chrono::milliseconds timeout{60000};  // of the rendezvous and the default of every call
  std::string store;  // StoreSpec: tcp, file:DIR, redis:HOST[:PORT]; empty: TANDEM_STORE, else tcp
  // Keys live under "<job>/<attempt>/" so restarts and jobs sharing a store do not collide;
  // empty: TANDEM_JOB_ID, else SLURM_JOB_ID, else "tandem", and TANDEM_RESTART_COUNT (else 0).
  std::string job;
  int cuda_device = -1;  // NCCL: the GPU of this rank (-1: LOCAL_RANK)
};

// Whether this build has the NCCL backend (CUDA toolkit and NCCL were found).
bool nccl_available();

std::unique_ptr<ProcessGroup> init_process_group(const WorldInfo& world,
                                                 const ProcessGroupOptions& options);

// A second group of `group`'s ranks on the NCCL backend, for GPU tensors: this rank on GPU
// `cuda_device` (one GPU per rank, none shared), its unique id sent through `group`'s store.
// Collective: every rank calls it at the same point (every rank makes the same calls, in the same
// order: each call's keys are numbered), while `group` lives. Its timeout is
// `group`'s; a failure (or a build without NCCL) is an error naming the cause.
std::unique_ptr<ProcessGroup> init_nccl_beside(const ProcessGroup& group, int cuda_device);

}  // namespace tandem::dist
