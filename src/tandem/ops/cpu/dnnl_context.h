// oneDNN plumbing for the CPU kernels: one engine and stream per thread, a per-thread cache of
// primitives keyed by everything that defines them (created once per shape, reused every step),
// and memory descriptors for plain row-major tensors. Only ops/cpu includes this file.
#pragma once

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

// Returns the primitive cached under `key`, building it with make() the first time this thread
// asks. make returns a CachedPrimitive.
template <typename Make>
CachedPrimitive& cached_primitive(const std::string& key, Make&& make) {
  thread_local std::unordered_map<std::string, std::unique_ptr<CachedPrimitive>> cache;
  auto it = cache.find(key);
  if (it == cache.end()) {
    it = cache.emplace(key, std::make_unique<CachedPrimitive>(make())).first;
  }
  return *it->second;
}

// Key fragment for a shape: "64x784".
std::string key_of(const Shape& shape);

// A scratchpad buffer for `pd`, reused per thread (grown when needed).
dnnl::memory scratchpad_for(const dnnl::primitive_desc_base& pd);

}  // namespace tandem::ops::cpu
