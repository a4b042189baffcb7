// Blocked-layout twins of float32 tensors for the oneDNN kernels: a tensor's elements kept in the
// layout a primitive reads or writes (nChw16c and friends) and attached to its storage (see
// tensor/storage.h), so that consecutive primitives hand blocked data along instead of converting
// to plain NCHW and back. Not a general layout system: a twin matches only the exact elements
// (offset and plain shape) and the exact layout it was made for; anything else reads plain data.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "tandem/tensor/tensor.h"

namespace tandem::ops::cpu {

// Memory for a primitive, with what keeps its buffer alive through the call (another thread
// may drop the twin from the storage meanwhile).
struct Operand {
  dnnl::memory memory;
  std::shared_ptr<const LayoutTwin> twin;  // null when `memory` is the tensor's own data
};

// Tensor `t` (contiguous, plain layout `plain`) as memory in layout `want`, for a primitive to
// read: t's twin when it is exactly that; t's own data when `want` is plain; otherwise a copy
// reordered (the reorder cached under `key`) into a new buffer that becomes t's twin, so the next
// reader in the same layout (a backward pass) finds it there.
Operand read_as(const Tensor& t, const dnnl::memory::desc& plain, const dnnl::memory::desc& want,
                const std::string& key);

// Memory for a primitive to write `t`, a fresh output (plain layout `plain`), in layout `want`:
// t's own data when `want` is plain; otherwise a new buffer (`key` names the reorder that may
// later write it back to plain). Call finish_write after the primitive has run.
Operand write_as(const Tensor& t, const dnnl::memory::desc& plain, const dnnl::memory::desc& want,
                 const std::string& key);
// Makes a buffer from write_as t's pending twin: t's plain data is written only when someone asks
// for it (Tensor::raw_data), which a following oneDNN primitive in the same layout never does.
void finish_write(const Tensor& t, const Operand& written);

// The descriptors of the twin made for exactly t's elements (same offset, same size), whatever
// shape t views them with: for t (N, C*H*W) flattened from a conv's output, `plain` is (N, C, H, W)
// nchw and `blocked` e.g. nChw16c. Nothing when t (contiguous) has no such twin.
struct TwinLayouts {
  dnnl::memory::desc plain, blocked;
};
std::optional<TwinLayouts> twin_layouts(const Tensor& t);

// A key fragment naming a descriptor's blocking ("16b" for nChw16c), for primitive cache keys.
std::string layout_key(const dnnl::memory::desc& md);

}  // namespace tandem::ops::cpu
