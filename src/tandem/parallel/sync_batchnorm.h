// Batch normalisation with statistics over the global batch of a DataParallel step. Each replica
// contributes its slice's per-channel count, mean and sum of squared deviations, merged in replica
// order (Chan et al.), and the backward gathers the weighted per-channel sums of dy and dy * xhat
// the same way. DataParallel installs it on replica threads for BatchNormStats::Global (through
// nn::BatchNormTrainOverride); it is a function, not a module. Shapes: x (N, C, *) on this replica,
// weight / bias / running stats (C).
#pragma once

#include <cstddef>

#include "tandem/parallel/replica_group.h"
#include "tandem/tensor/tensor.h"

namespace tandem::parallel {

struct SyncBatchNormContext {
  ReplicaGroup* group = nullptr;
  std::size_t replica = 0;
  // This replica's share of the global loss, n_r / N: the gradient reaching this replica is that
  // of its own mean loss, and the reducer multiplies its gradients by grad_weight afterwards.
  double grad_weight = 1.0;
};

// Training-mode batch norm over the union of every active replica's x: normalises with the global
// mean and biased variance and updates the running stats (if defined) with the global mean and
// unbiased variance, exactly as one device would on the whole batch. Differentiable in x, weight
// and bias; every active replica must call it (and run its backward) in the same order.
Tensor sync_batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, double momentum, double eps,
                       const SyncBatchNormContext& context);

}  // namespace tandem::parallel
