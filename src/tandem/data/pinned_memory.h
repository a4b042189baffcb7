// Page-locked ("pinned") host memory for batches. The hook is filled in by whoever can allocate it
// (the CUDA layer: cudaHostAlloc / cudaFreeHost); until then "pinned" batches are plain host
// buffers and nothing fails. Not an allocator of its own: it only routes to the hook.
#pragma once

#include <cstddef>

#include "tandem/tensor/tensor.h"

namespace tandem::data {

// Two plain functions so the hook can be installed from any layer without linking this one's
// types. `allocate` may return null (pinned memory exhausted): the caller then falls back to
// ordinary memory.
struct PinnedMemoryHooks {
  void* (*allocate)(std::size_t nbytes) = nullptr;
  void (*free)(void* ptr) = nullptr;
};

// Installs the hooks (null removes them). `hooks` must outlive every tensor allocated through it.
void set_pinned_memory_hooks(const PinnedMemoryHooks* hooks);
// True when hooks are installed, i.e. a pinned request really gives page-locked memory.
bool pinned_memory_available();

// A contiguous CPU tensor; page-locked when `pinned` and the hooks are installed (and succeed).
Tensor empty_host(const Shape& shape, DType dtype, bool pinned);

}  // namespace tandem::data
