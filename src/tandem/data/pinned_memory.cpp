// The pinned-memory hook: one atomic pointer, read when a batch buffer is allocated.
#include "tandem/data/pinned_memory.h"

#include <atomic>
#include <memory>

#include "tandem/tensor/factories.h"

namespace tandem::data {
namespace {

std::atomic<const PinnedMemoryHooks*>& hooks_slot() {
  static std::atomic<const PinnedMemoryHooks*> slot{nullptr};
  return slot;
}

}  // namespace

void set_pinned_memory_hooks(const PinnedMemoryHooks* hooks) {
  TANDEM_CHECK(hooks == nullptr || (hooks->allocate != nullptr && hooks->free != nullptr),
               "set_pinned_memory_hooks: both allocate and free must be set");
  hooks_slot().store(hooks, std::memory_order_release);
}

bool pinned_memory_available() { return hooks_slot().load(std::memory_order_acquire) != nullptr; }

Tensor empty_host(const Shape& shape, DType dtype, bool pinned) {
  const PinnedMemoryHooks* hooks = pinned ? hooks_slot().load(std::memory_order_acquire) : nullptr;
  if (hooks == nullptr) return empty(shape, {.dtype = dtype});
  for (auto d : shape) {
    TANDEM_CHECK(d >= 0, "empty_host: negative dimension in shape ", show(shape));
  }
  const std::size_t nbytes = static_cast<std::size_t>(numel(shape)) * element_size(dtype);
  void* ptr = nbytes ? hooks->allocate(nbytes) : nullptr;
  if (ptr == nullptr) return empty(shape, {.dtype = dtype});
  auto impl = std::make_shared<TensorImpl>();
  // The free function is copied now, so removing the hooks later cannot strand this buffer.
  impl->storage = std::make_shared<Storage>(ptr, nbytes, kCPU,
                                            [free_fn = hooks->free](void* p) { free_fn(p); });
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

}  // namespace tandem::data
