// The caching allocator of each GPU: BlockAllocator over cudaMalloc/cudaFree and CUDA events, one
// per device, made on first use and never destroyed (tensors may be freed during exit). CUDA code
// only; the CUDA backend (backend.cpp) allocates through it on the current stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "tandem/device/cuda/block_allocator.h"

namespace tandem::cuda {

BlockAllocator& caching_allocator(int device);

// At least nbytes on `device`, for work queued on `stream` (nullptr for 0 bytes). Throws
// OutOfMemoryError (block_allocator.h) with what was asked, in use, reserved and free. Blocks are
// cached per stream: a stream must outlive its cached blocks (empty_cache() after destroying one),
// or a new stream given the same handle would inherit them unordered.
void* allocate(int device, std::size_t nbytes, cudaStream_t stream);
// Reusable on its stream at once (stream order keeps queued work safe); on other streams named by
// record_stream, after their work queued up to now completes.
void free(int device, void* ptr);
// The memory at ptr is also used by work on `stream` (e.g. the copy or communication stream), a
// stream of the same device: freeing it waits (with an event) for the work queued there by then.
void record_stream(int device, void* ptr, cudaStream_t stream);

}  // namespace tandem::cuda
