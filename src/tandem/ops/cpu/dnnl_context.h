// oneDNN plumbing for the CPU kernels: one engine and stream per thread, a per-thread cache of
// primitives keyed by everything that defines them (created once per shape, reused every step),
// and memory descriptors for plain row-major tensors. Only ops/cpu includes this file.
#pragma once

#include <omp.h>

#include <memory>
#include <string>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "tandem/tensor/tensor.h"

namespace tandem::ops::cpu {

dnnl::engine& dnnl_engine();
dnnl::stream& dnnl_stream();

// Plain (row-major, dense) descriptor of a contiguous float32 tensor; `shape` overrides its shape.
dnnl::memory::desc plain_md(const Shape& shape, DType dtype = DType::Float32);
dnnl::memory::desc plain_md(const Tensor& t);
dnnl::memory as_memory(const Tensor& t);  // wraps t's data (t must be contiguous)
dnnl::memory as_memory(const Tensor& t, const dnnl::memory::desc& md);

// A cached primitive together with its primitive descriptor (for scratchpad/workspace queries).
struct CachedPrimitive {
  dnnl::primitive primitive;
  dnnl::primitive_desc_base pd;
};

// Returns the primitive cached under `key` and the thread's current OpenMP thread count (oneDNN
// fixes a primitive's work split when it is made: one made for 2 threads would start a team of 2
// where 1 is asked for, as when DataParallel runs a 1-thread replica on a thread that used 2),
// building it with make() the first time this thread asks. make returns a CachedPrimitive.
template <typename Make>
CachedPrimitive& cached_primitive(const std::string& key, Make&& make) {
  thread_local std::unordered_map<std::string, std::unique_ptr<CachedPrimitive>> cache;
  std::string full = key;
  full += "|omp";
  full += std::to_string(omp_get_max_threads());
  auto it = cache.find(full);
  if (it == cache.end()) {
    it = cache.emplace(std::move(full), std::make_unique<CachedPrimitive>(make())).first;
  }
  return *it->second;
}

// Key fragment for a shape: "64x784".
std::string key_of(const Shape& shape);

// A scratchpad buffer for `pd`, reused per thread (grown when needed).
dnnl::memory scratchpad_for(const dnnl::primitive_desc_base& pd);

}  // namespace tandem::ops::cpu
