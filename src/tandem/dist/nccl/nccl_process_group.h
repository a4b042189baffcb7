// The NCCL backend: collectives between CUDA tensors, one GPU per rank; NCCL's unique id goes
// through the rendezvous store. Built only when the CUDA toolkit and NCCL are found. This header
// does not include CUDA or NCCL; only dist/nccl/*.cpp do.
#pragma once

#include <memory>

#include "tandem/dist/process_group.h"

namespace tandem::dist {

// Creates the communicator on GPU `cuda_device` (non-blocking, aborted after the timeout).
std::unique_ptr<ProcessGroup> make_nccl_process_group(Rendezvous rendezvous, int cuda_device);

}  // namespace tandem::dist
