// The caching allocator's figures per GPU and the emptying of its cache. CUDA-free header: in a
// build without CUDA (cuda/no_cuda.cpp) there are no GPUs, so asking for one's figures throws.
#pragma once

#include "tandem/device/cuda/block_allocator.h"

namespace tandem::cuda {

// In use, reserved, peaks, cudaMalloc calls, cache hits... of cuda:<device> (check_index first).
AllocatorStats memory_stats(int device);
// Peaks start again from the current figures.
void reset_peak_memory(int device);
// Gives every GPU's wholly free cached segments back to the driver (after their pending events).
void empty_cache();

}  // namespace tandem::cuda
