// The NCCL RankCollective: dist::NcclClique over the replicas' GPUs (one each, distinct). Sums run
// on each GPU's communication stream; after_sums() queues its work's ops there.
#pragma once

#include <memory>
#include <vector>

#include "tandem/parallel/rank_collective.h"

namespace tandem::parallel {

// Whether this build has NCCL between the GPUs of a process.
bool nccl_collective_built();
// Every device a GPU of its own (at least two). Throws what NCCL says when it refuses them.
std::unique_ptr<RankCollective> make_nccl_collective(const std::vector<Device>& devices);

}  // namespace tandem::parallel
