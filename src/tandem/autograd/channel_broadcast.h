// Per-channel helpers for inputs shaped (N, C, *): a (C) tensor viewed to broadcast against them,
// and the dims a per-channel reduction sums over. Shared by batch norm's backward
// (functions/batch_norm.cpp, where they are defined) and parallel's synchronised batch norm.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/tensor/tensor.h"

namespace tandem::autograd {

// A (C) tensor viewed as (1, C, 1, ...) to broadcast against an input of rank `rank`.
Tensor channel_view(const Tensor& t, std::int64_t rank);

// Every dim of a rank-`rank` tensor except the channel dim 1: {0, 2, 3, ..., rank - 1}.
std::vector<std::int64_t> non_channel_dims(std::int64_t rank);

}  // namespace tandem::autograd
