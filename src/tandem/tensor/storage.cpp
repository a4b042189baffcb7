// Storage lifetime, and the layout twin's hand-over rules (see storage.h).
#include "tandem/tensor/storage.h"

#include "tandem/device/allocator.h"

namespace tandem {

Storage::Storage(std::size_t nbytes, Device device)
    : data_(device_allocate(device, nbytes)), nbytes_(nbytes), device_(device) {}

Storage::Storage(void* data, std::size_t nbytes, Device device,
                 std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)), owned_(false) {}

Storage::~Storage() {
  twin_.reset();  // before the memory goes: a twin may refer to it
  if (owned_) {
    device_free(device_, data_, nbytes_);
  } else if (deleter_) {
    deleter_(data_);
  }
}

void* Storage::data() const {
  if (has_twin_.load(std::memory_order_acquire)) drop_twin();
  return data_;
}

void Storage::drop_twin() const {
  std::shared_ptr<const LayoutTwin> old;
  {
    std::lock_guard<std::mutex> lock(twin_mutex_);
    if (!twin_) return;
    if (pending_) twin_->materialize(data_);
    old = std::move(twin_);
    pending_ = false;
    has_twin_.store(false, std::memory_order_release);
  }
  // `old` (the twin's memory) is freed here, outside the lock.
}

std::shared_ptr<const LayoutTwin> Storage::twin() const {
  if (!has_twin_.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(twin_mutex_);
  return twin_;
}

void Storage::set_twin(std::shared_ptr<const LayoutTwin> twin, bool pending) const {
  if (!owned_) return;
  std::shared_ptr<const LayoutTwin> old;
  {
    std::lock_guard<std::mutex> lock(twin_mutex_);
    // Replacing a pending twin would lose the values: write them back first.
    if (pending_ && twin_) twin_->materialize(data_);
    old = std::exchange(twin_, std::move(twin));
    pending_ = twin_ && pending;
    has_twin_.store(twin_ != nullptr, std::memory_order_release);
  }
}

}  // namespace tandem
