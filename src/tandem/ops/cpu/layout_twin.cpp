// Blocked twins: the buffer, how a twin is matched to a tensor, and writing one back to plain.
#include "tandem/ops/cpu/layout_twin.h"

#include <cstdint>
#include <cstring>

#include "tandem/ops/cpu/dnnl_context.h"

namespace tandem::ops::cpu {
namespace {

using dnnl::memory;

dnnl::primitive& reorder(const std::string& key, const memory::desc& from, const memory::desc& to) {
  return cached_primitive(key, [&] {
    dnnl::reorder::primitive_desc pd(dnnl_engine(), from, dnnl_engine(), to);
    return CachedPrimitive{dnnl::reorder(pd), pd};
  }).primitive;
}

bool pads(const memory::desc& md) {
  for (int i = 0; i < md.data.ndims; ++i) {
    if (md.data.padded_dims[i] != md.data.dims[i]) return true;
  }
  return false;
}

// The elements at byte_offset of a storage (plain layout `plain`) in layout `md`, in a buffer of
// its own.
class BlockedTwin final : public LayoutTwin {
 public:
  BlockedTwin(std::int64_t byte_offset, memory::desc plain, memory::desc md, std::string key)
      : buffer_(md.get_size(), kCPU), byte_offset_(byte_offset), plain_(std::move(plain)),
        md_(std::move(md)), key_(std::move(key)) {
    // A layout that pads (4 channels in blocks of 16) must hold zeros in the padding, which the
    // next primitive reads (a NaN there would spread) and not every primitive writes.
    if (pads(md_)) std::memset(buffer_.data_keeping_twin(), 0, md_.get_size());
  }

  const memory::desc& plain() const { return plain_; }
  const memory::desc& blocked() const { return md_; }
  std::int64_t byte_offset() const { return byte_offset_; }
  bool matches(std::int64_t byte_offset, const memory::desc& plain, const memory::desc& md) const {
    return byte_offset == byte_offset_ && plain == plain_ && md == md_;
  }
  // The twin as memory on the calling thread's engine.
  memory as_memory() const { return memory(md_, dnnl_engine(), buffer_.data_keeping_twin()); }

  void materialize(void* base) const override {
    memory to(plain_, dnnl_engine(), static_cast<char*>(base) + byte_offset_);
    memory from = as_memory();
    reorder(key_, md_, plain_).execute(dnnl_stream(), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  }

 private:
  Storage buffer_;  // through the CPU allocator: 64-byte aligned, cached when large
  std::int64_t byte_offset_;
  memory::desc plain_, md_;
  std::string key_;  // of the reorder back to plain
};

std::int64_t byte_offset(const Tensor& t) {
  return t.offset() * static_cast<std::int64_t>(element_size(t.dtype()));
}

}  // namespace

Operand read_as(const Tensor& t, const memory::desc& plain, const memory::desc& want,
                const std::string& key) {
  if (want == plain) return {as_memory(t, plain), nullptr};  // writes back a pending twin
  auto twin = std::dynamic_pointer_cast<const BlockedTwin>(t.storage()->twin());
  if (twin && t.is_contiguous() && twin->matches(byte_offset(t), plain, want)) {
    return {twin->as_memory(), twin};
  }
  memory user = as_memory(t, plain);  // raw_data(): drops (or writes back) any other twin
  auto fresh = std::make_shared<const BlockedTwin>(byte_offset(t), plain, want, key + ">plain");
  memory blocked = fresh->as_memory();
  reorder(key, plain, want).execute(dnnl_stream(), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, blocked}});
  t.storage()->set_twin(fresh, /*pending=*/false);
  return {blocked, fresh};
}

Operand write_as(const Tensor& t, const memory::desc& plain, const memory::desc& want,
                 const std::string& key) {
  if (want == plain) return {as_memory(t, plain), nullptr};
  auto twin = std::make_shared<const BlockedTwin>(byte_offset(t), plain, want, key);
  return {twin->as_memory(), twin};
}

void finish_write(const Tensor& t, const Operand& written) {
  if (!written.twin) return;
  if (t.storage()->owns_memory()) {
    t.storage()->set_twin(written.twin, /*pending=*/true);
  } else {  // memory owned elsewhere never holds a twin: write the values back now
    written.twin->materialize(t.storage()->data_keeping_twin());
  }
}

std::optional<TwinLayouts> twin_layouts(const Tensor& t) {
  auto twin = std::dynamic_pointer_cast<const BlockedTwin>(t.storage()->twin());
  if (!twin || !t.is_contiguous() || twin->byte_offset() != byte_offset(t) ||
      twin->plain().get_size() != t.nbytes()) {
    return std::nullopt;
  }
  return TwinLayouts{twin->plain(), twin->blocked()};
}

std::string layout_key(const memory::desc& md) {
  const auto& blocking = md.data.format_desc.blocking;
  std::string key;
  for (int i = 0; i < blocking.inner_nblks; ++i) {
    key += std::to_string(blocking.inner_blks[i]);
    key += static_cast<char>('a' + blocking.inner_idxs[i]);
  }
  for (int i = 0; i < md.data.ndims; ++i) {
    key += '.';
    key += std::to_string(blocking.strides[i]);
  }
  return key;
}

}  // namespace tandem::ops::cpu
